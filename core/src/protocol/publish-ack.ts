import type { WriteWaiter } from '../session/session';
import type { PACKET } from '../codec/packet-types';

/** Where settled acknowledgements go: the connection sends them in PUBLISH order. */
export interface AckSink {
  flushAcks(): void;
}

/**
 * The PUBACK/PUBREC of one inbound QoS 1/2 PUBLISH (or the PUBCOMP of a PUBREL), sent once every
 * storage write it depends on is done (subscribers' inboxes and inflight records, the retained
 * message, our QoS 2 packet id and its release). Each write holds it and releases (or fails) it;
 * the handler holds it too until the acknowledgement is queued, so it cannot settle early. One
 * object per message instead of a promise per write.
 */
export class PublishAck implements WriteWaiter {
  state: 'waiting' | 'ready' | 'failed' = 'waiting';
  /** The first write failure, when one failed. */
  error: unknown = undefined;
  /** Set once distribution is known (v5 0x10 when nobody subscribes). */
  reasonCode = 0;
  private pending = 1;
  private failed = false;

  constructor(
    private readonly sink: AckSink,
    readonly type: typeof PACKET.PUBACK | typeof PACKET.PUBREC | typeof PACKET.PUBCOMP,
    readonly packetId: number,
    /** The PUBLISH's topic, for the `pubAcked` / `pubReceived` events. */
    readonly topic: string | undefined,
  ) {}

  /** Whether a write still holds it or one failed: it must wait its turn in the queue. */
  mustQueue(): boolean {
    return this.pending > 1 || this.failed;
  }

  hold(): void {
    this.pending++;
  }

  release(): void {
    if (--this.pending === 0) {
      this.state = this.failed ? 'failed' : 'ready';
      this.sink.flushAcks();
    }
  }

  fail(err: unknown): void {
    if (!this.failed) {
      this.failed = true;
      this.error = err;
    }
    this.release();
  }

  add(write: Promise<unknown>): void {
    this.pending++;
    write.then(
      () => this.release(),
      (err: unknown) => this.fail(err),
    );
  }
}
