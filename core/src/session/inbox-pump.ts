import type { InflightRecord } from '@bifro/spi';
import { fromInboxMessage, type PersistedSession, type SessionPersistence } from './session-persistence';
import type { QueueHost } from './session-queue';
import type { Delivery, SessionLink } from './session-types';

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
  /** Put a QoS 1/2 delivery read from the inbox in flight and send it on `link` (if any); returns its packet id. */
  sendFromInbox(d: Delivery, link: SessionLink | undefined, inboxSeq: number): number;
}

/** The broker services the inbox reports to, on behalf of its session `S`. */
export interface InboxHost<S> extends Pick<QueueHost<S>, 'queueLimit' | 'dropped' | 'hasRoom' | 'adjustUsage'> {
  readonly persistence: SessionPersistence;
  /** The broker's clock (message expiry is decided against it). */
  now(): number;
  /** A storage call of this session failed. */
  storageFailed(session: S, what: string, err: unknown): void;
}

/**
 * A persistent session's storage inbox as the session sees it: how many entries wait, the last
 * seq moved into flight, the bytes this process appended (TotalPersistentSessionSpaceBytes), and
 * the pump that moves entries into flight while the client's window and the socket allow.
 * Created for a session when it first uses its inbox.
 */
export class SessionInbox<S extends InboxOwner> {
  /** Entries in the storage inbox not yet moved to inflight. */
  backlog = 0;
  /** Whether the pump is running (a delivery then goes through the inbox, keeping the order). */
  pumping = false;
  /** Appends issued and not yet written: counted in the backlog, not yet readable. */
  private appending = 0;
  /** pump() was asked for while it ran: it runs once more before it stops. */
  private again = false;
  /** The last seq moved into flight. */
  private cursor = 0;
  /** Entries the next read takes: about one connection's queued-bytes bound of messages of the last read's average size. */
  private readMax = INBOX_FIRST_READ;
  /** Inbox bytes this process appended (tenant quotas). */
  private bytes = 0;

  constructor(
    private readonly session: S,
    private readonly host: InboxHost<S>,
  ) {}

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

  /** Forget the backlog and the cursor (clean start, session end). */
  clear(): void {
    this.account(-this.bytes);
    this.backlog = 0;
    this.cursor = 0;
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
    this.backlog++;
    this.appending++;
    const size = d.msg.size;
    const written = host.persistence.append(session, d, maxSize, dropOldest);
    written.then(
      () => this.appending--,
      () => this.appending--,
    );
    return written.then((r) => {
      if (r.appended === 0) {
        this.backlog--;
        host.dropped(session, d, 'queue-full');
      } else {
        this.account(size);
        if (r.dropped > 0) {
          this.backlog -= r.dropped;
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
      for (;;) {
        const link = session.link;
        if (link === undefined || this.backlog <= 0 || !link.writable()) break;
        const room = link.receiveMaximum - session.inflightSize;
        if (room <= 0) break;
        const entries = await this.host.persistence.read(session, this.cursor, Math.min(room, this.readMax));
        if (entries.length === 0) {
          // Nothing readable: an append still being written is read when it lands (it pumps
          // again); with none pending, the backlog counted entries that are gone.
          if (this.appending === 0) this.backlog = 0;
          break;
        }
        const records: InflightRecord[] = [];
        const now = this.host.now();
        let readBytes = 0;
        let seen = 0;
        let moved = 0;
        for (const e of entries) {
          const d = fromInboxMessage(e);
          readBytes += d.msg.size;
          seen++;
          const current = session.link;
          // The socket filled up: the rest stays in the inbox (read again later), not in the socket's buffer [SEC-MEM-1].
          if (current !== undefined && moved > 0 && !current.writable()) break;
          moved++;
          this.cursor = e.seq;
          this.backlog--;
          this.account(-d.msg.size);
          if (d.msg.expired(now)) {
            this.host.dropped(session, d, 'expired');
            continue;
          }
          if (d.qos === 0) {
            current?.sendPublish(d, 0, false);
            continue;
          }
          records.push({ packetId: session.sendFromInbox(d, current, e.seq), phase: 'publish', message: e, inboxSeq: e.seq });
        }
        // Large messages: fewer per read, so a read holds about one connection bound of them.
        this.readMax = Math.max(1, Math.min(INBOX_READ_BATCH, Math.floor((link.maxQueuedBytes * seen) / Math.max(1, readBytes))));
        const p = this.host.persistence;
        const put = records.length > 0 ? p.putInflight(session, records) : undefined;
        // Storage over the network (a cluster's) writes each store on its own: the records first,
        // then the commit, so a crash in between leaves a duplicate, never a loss.
        if (p.storage.shared === true) await put;
        await Promise.all([put, p.commit(session, this.cursor)]);
      }
    } catch (err) {
      this.host.storageFailed(session, 'inbox pump', err);
    } finally {
      this.pumping = false;
    }
    if (this.again) void this.pump();
  }

  /** Inbox bytes this process appended; entries from before a restart are not counted, so it never goes below 0. */
  private account(delta: number): void {
    if (delta < 0 && -delta > this.bytes) delta = -this.bytes;
    if (delta === 0) return;
    this.bytes += delta;
    this.host.adjustUsage(this.session, 'TotalPersistentSessionSpaceBytes', delta);
  }
}
