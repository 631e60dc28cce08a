import { CountedWaiter } from '../session/counted-waiter';
import type { PACKET } from '../codec/packet-types';

/** Where settled acknowledgements go: the connection sends them in PUBLISH order. */
export interface AckSink {
  flushAcks(): void;
}

/**
 * The PUBACK/PUBREC of one inbound QoS 1/2 PUBLISH (or the PUBCOMP of a PUBREL), sent once every
 * storage write it depends on is done (subscribers' inboxes and inflight records, the retained
 * message, our QoS 2 packet id and its release). Each write holds it and releases (or fails) it;
 * the handler holds it too until the acknowledgement is queued, so it cannot settle early.
 */
export class PublishAck extends CountedWaiter {
  state: 'waiting' | 'ready' | 'failed' = 'waiting';
  /** Set once distribution is known (v5 0x10 when nobody subscribes). */
  reasonCode = 0;

  constructor(
    private readonly sink: AckSink,
    readonly type: typeof PACKET.PUBACK | typeof PACKET.PUBREC | typeof PACKET.PUBCOMP,
    readonly packetId: number,
    /** The PUBLISH's topic, for the `pubAcked` / `pubReceived` events. */
    readonly topic: string | undefined,
  ) {
    super();
  }

  /** Whether a write still holds it or one failed: it must wait its turn in the queue. */
  mustQueue(): boolean {
    return this.pending > 1 || this.failed;
  }

  protected settled(failed: boolean): void {
    this.state = failed ? 'failed' : 'ready';
    this.sink.flushAcks();
  }
}
