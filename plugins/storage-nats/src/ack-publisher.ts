import { createInbox, type Msg, type MsgHdrs, type NatsConnection, type Subscription } from 'nats';

/** An error with the code the JetStream client would give it (`503`, `TIMEOUT`, or the API error's). */
export class PublishError extends Error {
  constructor(
    message: string,
    readonly code: string,
    readonly api_error?: { code: number; err_code: number; description: string },
  ) {
    super(message);
  }
}

interface Waiting {
  readonly resolve: (seq: number) => void;
  readonly reject: (err: Error) => void;
  readonly deadline: number;
}

/**
 * JetStream publishes without a request each: every message is sent with a reply subject under
 * one inbox this connection subscribes to once, and its acknowledgement is matched by id. A
 * `js.publish` per message costs a request's bookkeeping and reaches 5–8k acknowledged
 * messages/s from Node here; this reaches 40k+ with the same acknowledgement per message.
 * Timeouts are swept every 100 ms (no timer per message).
 */
export class AckPublisher {
  private readonly prefix = createInbox();
  private readonly waiting = new Map<string, Waiting>();
  private readonly sub: Subscription;
  private readonly sweeper: NodeJS.Timeout;
  private id = 0;

  constructor(
    private readonly nc: NatsConnection,
    private readonly timeoutMs: number,
  ) {
    this.sub = nc.subscribe(`${this.prefix}.*`, { callback: (_err, m) => this.answer(m) });
    this.sweeper = setInterval(() => this.sweep(), 100);
    this.sweeper.unref();
  }

  /** Resolves with the stream sequence once JetStream acknowledged the message. */
  publish(subject: string, data: Uint8Array, headers?: MsgHdrs, timeoutMs = this.timeoutMs): Promise<number> {
    const key = (++this.id).toString(36);
    return new Promise<number>((resolve, reject) => {
      this.waiting.set(key, { resolve, reject, deadline: Date.now() + timeoutMs });
      try {
        this.nc.publish(subject, data, { reply: `${this.prefix}.${key}`, ...(headers !== undefined ? { headers } : {}) });
      } catch (err) {
        this.waiting.delete(key);
        reject(err as Error);
      }
    });
  }

  private answer(m: Msg): void {
    const key = m.subject.slice(this.prefix.length + 1);
    const w = this.waiting.get(key);
    if (w === undefined) return;
    this.waiting.delete(key);
    // No JetStream server took the message (no stream leader): the client's status reply.
    if (m.headers?.code === 503) return w.reject(new PublishError('503 no responders', '503'));
    let ack: { seq?: number; error?: { code: number; err_code: number; description: string } };
    try {
      ack = JSON.parse(m.string()) as typeof ack;
    } catch {
      return w.reject(new PublishError(`unreadable acknowledgement: ${m.string().slice(0, 100)}`, 'BAD_ACK'));
    }
    if (ack.error !== undefined) return w.reject(new PublishError(ack.error.description, String(ack.error.code), ack.error));
    if (typeof ack.seq !== 'number') return w.reject(new PublishError('acknowledgement without seq', 'BAD_ACK'));
    w.resolve(ack.seq);
  }

  private sweep(): void {
    const now = Date.now();
    for (const [key, w] of this.waiting) {
      if (w.deadline > now) continue;
      this.waiting.delete(key);
      w.reject(new PublishError('no acknowledgement in time', 'TIMEOUT'));
    }
  }

  close(): void {
    clearInterval(this.sweeper);
    this.sub.unsubscribe();
    for (const w of this.waiting.values()) w.reject(new PublishError('connection closed', 'CLOSED'));
    this.waiting.clear();
  }
}
