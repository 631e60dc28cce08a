import type { InflightRecord } from '@bifro/spi';
import { fromInboxMessage, type PersistedSession, type SessionPersistence } from './session-persistence';
import type { QueueHost } from './session-queue';
import { STORE_RETRY_MS, type Delivery, type SessionLink } from './session-types';

/** Most inbox entries one read takes. */
const INBOX_READ_BATCH = 256;
/** Entries the first inbox read of a session takes, before the size of its messages is known. */
const INBOX_FIRST_READ = 16;

/** What the inbox needs of its session. */
export interface InboxOwner extends PersistedSession {
  readonly link: SessionLink | undefined;
  /** false for a session restored from storage until its inflight state is read back. */
  readonly loaded: boolean;
  /** QoS 1/2 deliveries in flight. */
  readonly inflightSize: number;
  /**
   * Put a QoS 1/2 delivery read from the inbox in flight and send it on `link` (if any); returns
   * its packet id, or undefined when it was discarded as too large for the client [MQTT-3.1.2-25].
   */
  sendFromInbox(d: Delivery, link: SessionLink | undefined, inboxSeq: number): number | undefined;
  /**
   * The record to store again for an entry moved from the inbox whose first write failed: `record`
   * while its PUBLISH is in flight, its pubrel record once the client sent PUBREC and that phase
   * is not stored yet, undefined once it completed or its pubrel record is stored.
   */
  unstoredRecord(record: InflightRecord): InflightRecord | undefined;
}

/** The broker services the inbox reports to, on behalf of its session `S`. */
export interface InboxHost<S> extends Pick<QueueHost<S>, 'queueLimit' | 'dropped' | 'hasRoom' | 'adjustUsage'> {
  readonly persistence: SessionPersistence;
  /** The broker's clock (message expiry is decided against it). */
  now(): number;
  /** A storage call of this session failed. */
  storageFailed(session: S, what: string, err: unknown): void;
  /** A storage call succeeded (ends an episode of failures of a storage that cannot tell its health). */
  storageSucceeded(): void;
  /**
   * Issue now the session's deferred inflight records (live QoS 1 deliveries not acknowledged yet),
   * before a record written at once: the store keeps records in the order they were put, which is
   * the order a restart resends them in [MQTT-4.6.0-1].
   */
  flushDeferred(session: S): void;
}

/**
 * A persistent session's storage inbox as the session sees it: how many entries wait, the last
 * seq moved into flight, the bytes this process appended (TotalPersistentSessionSpaceBytes), and
 * the pump that moves entries into flight while the client's window and the socket allow.
 * Created for a session when it first uses its inbox.
 */
export class SessionInbox<S extends InboxOwner> {
  /**
   * About how many entries wait in the storage inbox (appended, not yet moved into flight or
   * dropped): a figure for reports. Whether to read is decided by {@link unread}, never by it.
   */
  backlog = 0;
  /** Whether the pump is running (a delivery then goes through the inbox, keeping the order). */
  pumping = false;
  /**
   * The storage inbox may hold entries after the cursor. Set by every append (when it is issued)
   * and by a restored session's count; cleared only by a read that reached the end of the inbox
   * after every append issued before it had been written, with none issued while it ran. A count
   * cannot decide this: an append that lands while a read runs is not in that read.
   */
  private unread = false;
  /** Appends issued, and those settled (written or failed): equal when none is on its way. */
  private issued = 0;
  private landed = 0;
  /** pump() was asked for while it ran: it runs once more before it stops. */
  private again = false;
  /** The last seq moved into flight. */
  private cursor = 0;
  /** Entries the next read takes: about one connection's queued-bytes bound of messages of the last read's average size. */
  private readMax = INBOX_FIRST_READ;
  /** Inbox bytes this process appended (tenant quotas). */
  private bytes = 0;
  /** A pump again after a failed storage call. */
  private retry: NodeJS.Timeout | undefined;
  /**
   * Entries moved into flight whose records or inbox commit failed to store: written again before
   * the next read (only the records of entries still in flight). Until then a restart would read
   * them from the inbox again.
   */
  private unstored: InflightRecord[] | undefined;

  constructor(
    private readonly session: S,
    private readonly host: InboxHost<S>,
  ) {}

  /** Whether deliveries must queue behind the inbox (something may wait in it, or the pump is moving entries). */
  get waiting(): boolean {
    return this.unread || this.pumping;
  }

  /** Whether the pump has work: entries a read may find, or writes of moved entries to store again. */
  get hasUnread(): boolean {
    return this.unread || this.unstored !== undefined;
  }

  /**
   * Entries up to `seq` are already in flight (their records say so): reading starts after them,
   * even when the commit of a previous owner did not reach storage.
   */
  skipTo(seq: number): void {
    if (seq <= this.cursor) return;
    this.cursor = seq;
    // The commit that did not land, made now: the next owner must not read them either.
    this.host.persistence.commit(this.session, seq).catch((err: unknown) => this.host.storageFailed(this.session, 'inbox commit', err));
  }

  /** A restored session's storage inbox holds `count` entries (some may be in flight already: {@link skipTo}). */
  restored(count: number): void {
    if (count <= 0) return;
    this.unread = true;
    if (count > this.backlog) this.backlog = count;
  }

  /** Forget the backlog and the cursor (clean start, session end). */
  clear(): void {
    this.account(-this.bytes);
    this.backlog = 0;
    this.unread = false;
    this.unstored = undefined;
    this.cursor = 0;
  }

  /**
   * An append to the storage inbox was issued (by {@link append}, or by a session turning
   * persistent): counted until it settles, so no read taken meanwhile may conclude the inbox is empty.
   */
  issuedAppend<T>(written: Promise<T>): Promise<T> {
    this.issued++;
    this.backlog++;
    this.unread = true;
    const settle = (): void => {
      this.landed++;
    };
    written.then(settle, settle);
    return written;
  }

  /**
   * Append to the storage inbox; then, if the client is there, move what the window allows. Over
   * the tenant's TotalPersistentSessionSpaceBytes the delivery is dropped for this session.
   */
  append(d: Delivery): Promise<void> {
    const session = this.session;
    const host = this.host;
    if (!host.hasRoom(session, 'TotalPersistentSessionSpaceBytes')) {
      host.dropped(session, d, 'quota');
      return Promise.resolve();
    }
    const { maxSize, dropOldest } = host.queueLimit(session.tenantId);
    const size = d.msg.size;
    const written = this.issuedAppend(host.persistence.append(session, d, maxSize, dropOldest));
    return written.then((r) => {
      host.storageSucceeded();
      if (r.appended === 0) {
        this.backlog--;
        host.dropped(session, d, 'queue-full');
      } else {
        this.account(size);
        if (r.dropped > 0) {
          this.backlog = Math.max(0, this.backlog - r.dropped);
          // The store drops its oldest entries without telling their sizes: counted as this one's.
          this.account(-size * r.dropped);
          host.dropped(session, d, 'queue-full');
        }
      }
      if (session.link !== undefined) void this.pump();
    });
  }

  /**
   * Move inbox entries into flight while the window allows. The inflight records (with their
   * messages) and the inbox commit are issued in the same tick, so a backend that groups writes
   * (storage-level) stores them in one batch; with shared storage the commit waits for the records.
   */
  async pump(): Promise<void> {
    const session = this.session;
    if (!session.loaded) return;
    if (this.pumping) {
      this.again = true;
      return;
    }
    this.pumping = true;
    this.again = false;
    try {
      if (this.unstored !== undefined) await this.storeMoved([]);
      for (;;) {
        const link = session.link;
        if (link === undefined || !this.unread || !link.writable()) break;
        const room = link.receiveMaximum - session.inflightSize;
        if (room <= 0) break;
        // Whether every append issued so far is written: only then can a short read mean the end.
        const issuedBefore = this.issued;
        const allLanded = this.landed === issuedBefore;
        const asked = Math.min(room, this.readMax);
        const entries = await this.host.persistence.read(session, this.cursor, asked);
        const records: InflightRecord[] = [];
        const now = this.host.now();
        let readBytes = 0;
        let moved = 0;
        for (const e of entries) {
          const d = fromInboxMessage(e);
          const current = session.link;
          // The socket filled up: the rest stays in the inbox (read again later), not in the socket's buffer [SEC-MEM-1].
          if (current !== undefined && moved > 0 && !current.writable()) break;
          readBytes += d.msg.size;
          moved++;
          this.cursor = e.seq;
          if (this.backlog > 0) this.backlog--;
          this.account(-d.msg.size);
          if (d.msg.expired(now)) {
            this.host.dropped(session, d, 'expired');
            continue;
          }
          if (d.qos === 0) {
            current?.sendPublish(d, 0, false);
            continue;
          }
          const packetId = session.sendFromInbox(d, current, e.seq);
          // Discarded as too large: completed, so no record (the commit below still moves past it).
          if (packetId !== undefined) records.push({ packetId, phase: 'publish', message: e, inboxSeq: e.seq });
        }
        // The read came back short and everything in it moved: the end of the inbox, unless an
        // append was on its way when it started or was issued while it ran (that one pumps again
        // when it lands, or at the next attach).
        if (entries.length < asked && moved === entries.length && allLanded && this.issued === issuedBefore) {
          this.unread = false;
          this.backlog = 0;
        }
        if (moved > 0) {
          // Large messages: fewer per read, so a read holds about one connection bound of them.
          this.readMax = Math.max(1, Math.min(INBOX_READ_BATCH, Math.floor((link.maxQueuedBytes * moved) / Math.max(1, readBytes))));
          await this.storeMoved(records);
        } else if (entries.length === 0) {
          // Nothing readable yet: the appends on their way pump again when they land.
          break;
        }
      }
    } catch (err) {
      this.host.storageFailed(session, 'inbox pump', err);
      // Storage heals (the level storage reopens or repairs itself): the client still connected
      // gets what waits without having to reconnect, and moved entries get stored.
      this.retry ??= setTimeout(() => {
        this.retry = undefined;
        if (session.link !== undefined || this.unstored !== undefined) void this.pump();
      }, STORE_RETRY_MS).unref();
    } finally {
      this.pumping = false;
    }
    if (this.again) void this.pump();
  }

  /**
   * Store the inflight records of entries just moved into flight, and the inbox commit up to the
   * cursor, issued in the same tick so a backend that groups writes (storage-level) stores them in
   * one batch; with shared storage the commit waits for the records (a crash in between leaves a
   * duplicate, never a loss). Records that failed before go with them, those still in flight (as
   * their pubrel records once PUBREC came): no commit passes an entry whose record is not stored.
   */
  private async storeMoved(records: InflightRecord[]): Promise<void> {
    const session = this.session;
    const before = this.unstored;
    const again: InflightRecord[] = [];
    for (const r of before ?? []) {
      const record = session.unstoredRecord(r);
      if (record !== undefined) again.push(record);
    }
    const all = again.length === 0 ? records : [...again, ...records];
    this.unstored = undefined;
    const p = this.host.persistence;
    try {
      if (all.length > 0) this.host.flushDeferred(session);
      const put = all.length > 0 ? p.putInflight(session, all) : undefined;
      if (p.storage.shared === true) await put;
      await Promise.all([put, p.commit(session, this.cursor)]);
    } catch (err) {
      this.unstored = all;
      throw err;
    }
  }

  /** Inbox bytes this process appended; entries from before a restart are not counted, so it never goes below 0. */
  private account(delta: number): void {
    if (delta < 0 && -delta > this.bytes) delta = -this.bytes;
    if (delta === 0) return;
    this.bytes += delta;
    this.host.adjustUsage(this.session, 'TotalPersistentSessionSpaceBytes', delta);
  }
}
