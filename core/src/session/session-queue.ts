import type { Delivery, DropReason, QueueLimit, SessionLink } from './session-types';

/** The quota resources the session queue reports to. */
export type QueueResource = 'TotalSessionMemoryBytes' | 'TotalPersistentSessionSpaceBytes';

/** The broker services a session's memory queue reports to, on behalf of its session `S`. */
export interface QueueHost<S> {
  /** Most queued deliveries and bytes, and what to drop when full, for this session's tenant (SessionInboxSize, MaxTenantQueuedBytes, QoS0DropOldest). */
  queueLimit(tenantId: string): QueueLimit;
  /** Message bytes queued in memory for all of the session's tenant's sessions (its TotalSessionMemoryBytes). */
  tenantQueuedBytes(session: S): number;
  /** A delivery was dropped. */
  dropped(session: S, delivery: Delivery, reason: DropReason): void;
  /** Whether the session's tenant has room for more of a quota resource; reports `resourceExhausted` when not. */
  hasRoom(session: S, resource: QueueResource): boolean;
  /** Add to a gauge of the session's tenant. */
  adjustUsage(session: S, resource: QueueResource, delta: number): void;
}

/**
 * A transient session's deliveries waiting in memory (for a connection, the client's receive
 * window or room in the socket), with their bytes and bounds: SessionInboxSize, the connection's
 * queued-bytes bound, the tenant's MaxTenantQueuedBytes and TotalSessionMemoryBytes, and the drop
 * policy (QoS0DropOldest). Created on a session's first queued delivery; an array with a moving
 * head, compacted as it empties.
 */
export class SessionQueue<S extends { readonly tenantId: string }> {
  private items: Delivery[] = [];
  private head = 0;
  /** Message bytes in the queue (tenant quotas). */
  private queuedBytes = 0;

  constructor(
    private readonly session: S,
    private readonly host: QueueHost<S>,
  ) {}

  /** Deliveries waiting. */
  get size(): number {
    return this.items.length - this.head;
  }

  /** Message bytes waiting. */
  get bytes(): number {
    return this.queuedBytes;
  }

  /** The oldest delivery waiting, if any. */
  peek(): Delivery | undefined {
    return this.head < this.items.length ? this.items[this.head] : undefined;
  }

  /** Take the oldest delivery (the queue must not be empty; see {@link peek}). Call {@link compact} after a run of these. */
  shift(): Delivery {
    const d = this.items[this.head]!;
    this.items[this.head++] = undefined as unknown as Delivery;
    this.account(-d.msg.size);
    return d;
  }

  /** Take everything waiting, oldest first (the session becomes persistent). */
  takeAll(): Delivery[] {
    const waiting = this.items.slice(this.head);
    this.items = [];
    this.head = 0;
    this.account(-this.queuedBytes);
    return waiting;
  }

  /** Drop everything waiting (clean start, session end). */
  clear(): void {
    this.account(-this.queuedBytes);
    this.items = [];
    this.head = 0;
  }

  /**
   * Queue in memory, within SessionInboxSize, the connection's queued-bytes bound (this queue plus
   * the socket's write buffer, mqtt.maxQueuedBytesPerConnection) [SEC-MEM-1], the tenant's
   * MaxTenantQueuedBytes [SEC-MEM-2] and its TotalSessionMemoryBytes quota. QoS0DropOldest decides
   * what goes [SEC-MEM-3]: the new delivery, or the oldest queued ones until the new one fits.
   */
  enqueue(d: Delivery, link: SessionLink | undefined): void {
    const session = this.session;
    const host = this.host;
    if (!host.hasRoom(session, 'TotalSessionMemoryBytes')) {
      host.dropped(session, d, 'quota');
      return;
    }
    const limit = host.queueLimit(session.tenantId);
    if (this.items.length - this.head >= limit.maxSize) {
      if (!limit.dropOldest) {
        host.dropped(session, d, 'queue-full');
        return;
      }
      this.dropOldest('queue-full');
      this.compact();
    }
    const size = d.msg.size;
    if (link !== undefined) {
      const room = link.maxQueuedBytes - link.bufferedBytes() - size;
      if (this.queuedBytes > room && !this.makeRoom(room, limit.dropOldest, 'queue-bytes', d)) return;
    }
    if (limit.maxTenantBytes > 0) {
      const room = limit.maxTenantBytes - size - (host.tenantQueuedBytes(session) - this.queuedBytes);
      if (this.queuedBytes > room && !this.makeRoom(room, limit.dropOldest, 'tenant-queue-bytes', d)) return;
    }
    this.items.push(d);
    this.account(size);
  }

  /** Release the slots of deliveries taken from the head of the queue. */
  compact(): void {
    if (this.head === this.items.length) {
      this.items = [];
      this.head = 0;
    } else if (this.head > 1024 && this.head * 2 > this.items.length) {
      this.items = this.items.slice(this.head);
      this.head = 0;
    }
  }

  /**
   * Bring the queued bytes down to `room` by dropping the oldest deliveries (dropOldest), or drop
   * `d` (not dropOldest, or not even an empty queue would make room). Returns whether `d` may be queued.
   */
  private makeRoom(room: number, dropOldest: boolean, reason: DropReason, d: Delivery): boolean {
    if (!dropOldest || room < 0) {
      this.host.dropped(this.session, d, reason);
      return false;
    }
    while (this.queuedBytes > room && this.head < this.items.length) this.dropOldest(reason);
    this.compact();
    return true;
  }

  private dropOldest(reason: DropReason): void {
    const oldest = this.items[this.head]!;
    this.items[this.head++] = undefined as unknown as Delivery;
    this.account(-oldest.msg.size);
    this.host.dropped(this.session, oldest, reason);
  }

  private account(delta: number): void {
    if (delta === 0) return;
    this.queuedBytes += delta;
    this.host.adjustUsage(this.session, 'TotalSessionMemoryBytes', delta);
  }
}
