import type { ClientInfo, InflightRecord, ProtocolVersion, QoS, ResourceType, SubscriptionRecord } from '@bifro/spi';
import type { WheelEntry } from './timer-wheel';
import { SessionInbox, type InboxHost } from './inbox-pump';
import { fromInboxMessage, toInboxMessage, type SessionPersistence } from './session-persistence';
import { SessionQueue, type QueueHost } from './session-queue';
import { STORE_RETRY_MS, type Delivery, type SessionLink, type SessionWill, type WriteReporter, type WriteWaiter } from './session-types';

export type { Delivery, DropReason, QueueLimit, SessionLink, SessionWill, WriteWaiter } from './session-types';

/**
 * An outbound QoS 1/2 message waiting for the client. For a connected persistent session's QoS 1
 * delivery it is also the deferred storage write of its inflight record (D20): one object per
 * message for both.
 */
export class Inflight {
  /** `publish`: awaiting PUBACK/PUBREC; `pubrel`: PUBREL sent, awaiting PUBCOMP. */
  phase: 'publish' | 'pubrel' = 'publish';
  /** MQTT 3: the resend scan that first saw it unacknowledged, or last resent it (0: not yet seen). A scan count, not a time: it stays a small integer. */
  sentAt = 0;
  /** MQTT 3: how often it was resent on this connection. */
  resends = 0;
  /** The seq of the inbox entry it was read from; kept in every record of it, the PUBREL phase's too. */
  inboxSeq: number | undefined = undefined;
  /**
   * Phase `pubrel` of a persistent session: whether its record is stored. PUBREL goes out only
   * once it is (`storing`: the write is on its way; `unstored`: it failed and is tried again).
   */
  pubrel: 'stored' | 'storing' | 'unstored' = 'stored';
  /**
   * The deferred write of the record: `none` (not deferred), `waiting` (not issued yet), `issued`
   * (handed to storage) or `settled` (no longer needed, or done).
   */
  state: 'none' | 'waiting' | 'issued' | 'settled';

  constructor(
    readonly session: Session,
    readonly packetId: number,
    /** Undefined once the PUBLISH phase is over (PUBREL sent). */
    public delivery: Delivery | undefined,
    /** Released when the client acknowledges first or the deferred write is done; failed when the write fails. */
    readonly waiter: WriteWaiter | undefined,
    deferred: boolean,
  ) {
    this.state = deferred ? 'waiting' : 'none';
  }
}

/** A storage write that waits a moment in case the client's acknowledgement makes it unnecessary: the inflight entry itself. */
export type DeferredWrite = Inflight;

/** The broker services a session reports to (with those its memory queue and inbox report to). */
export interface SessionHost extends QueueHost<Session>, InboxHost<Session> {
  readonly persistence: SessionPersistence;
  /** An MQTT 3 connection has unacknowledged deliveries: watch them for resends (MaxResendTimes, ResendTimeoutSeconds). */
  watchResends(session: Session): void;
  /** A QoS 1/2 delivery completed (PUBACK / PUBCOMP received). */
  confirmed(session: Session, delivery: Delivery | undefined, qos: QoS): void;
  /**
   * Write this inflight record a little later (one batch for many sessions) unless the client
   * acknowledges it first; the promise settles with whichever comes first.
   */
  deferInflight(write: DeferredWrite): void;
  /** Timer wheel callback of a disconnected session (will delay, expiry); returns the next deadline or 0. */
  onDeadline(session: Session, now: number): number;
  /** The session served here under this key now (undefined: none, or ended, or taken by another node). */
  served(key: string): Session | undefined;
}

/** How often, and how many times, an append nobody would send again (a will's) is tried again after a storage failure. */
const UNOWNED_APPEND_RETRY_MS = 1000;
const UNOWNED_APPEND_TRIES = 60;

/**
 * The state of one MQTT session, keyed by (tenantId, clientId): subscriptions, outbound QoS 1/2
 * in flight, deliveries waiting for a connection or for the client's receive window, inbound QoS 2
 * packet ids, the will and the expiry.
 *
 * A transient session (expiry 0) keeps everything in memory. A persistent session writes through
 * the storage SPI: its waiting deliveries live in the storage inbox (appended before the
 * publisher is acknowledged), what is in flight in the inflight store (with the message, so a
 * restart can resend it with the same packet id [MQTT-4.4.0-1]), and inbound QoS 2 packet ids so
 * exactly-once survives a restart.
 */
export class Session implements WheelEntry, WriteReporter {
  wheelSlot = -1;
  link: SessionLink | undefined;
  // Maps and sets are allocated on first use: an idle session of a client that never subscribed
  // or used QoS 1/2 holds none (memory per idle connection).
  private subscriptionMap: Map<string, SubscriptionRecord> | undefined;
  private inboundIds: Set<number> | undefined;
  private counted: Map<string, ResourceType> | undefined;
  private inflightMap: Map<number, Inflight> | undefined;
  will: SessionWill | undefined;
  /**
   * No longer served by this registry (its `forget`: another node serves it),
   * its routes kept a moment (so publishers' nodes see the new owner's routes before these go);
   * a QoS 1/2 delivery to it fails.
   */
  forgotten = false;
  /** When the pending will fires (ms since epoch), 0 = none pending. */
  willAt = 0;
  /** When the disconnected session expires (ms since epoch), 0 = not scheduled. */
  expireAt = 0;
  /** When the client last disconnected (ms since epoch). */
  disconnectedAt = 0;
  /** When the current connection attached (ms since epoch), 0 before the first. */
  connectedAt = 0;

  /** Whether the session's record is in storage (it was persistent at some point). */
  stored = false;
  /** false for a session restored from storage until its inflight state is read back ({@link load}). */
  loaded = true;
  private loading: Promise<void> | undefined;
  /** Registered with the engine's resend scan (MQTT 3 connections). */
  resendWatched = false;

  /** Transient sessions: deliveries waiting in memory (created on the first one). */
  private queue: SessionQueue<Session> | undefined;
  /** Persistent sessions: the storage inbox's backlog, cursor and pump (created on first use). */
  private inboxState: SessionInbox<Session> | undefined;
  private nextPacketId = 1;
  /** Retained lookups in progress for new subscriptions, and the live deliveries waiting behind them. */
  private retainedLookups = 0;
  private waiting: { delivery: Delivery; waiter: WriteWaiter | undefined }[] | undefined;

  constructor(
    readonly key: string,
    public client: ClientInfo,
    public protocolVersion: ProtocolVersion,
    /** Session Expiry Interval in seconds (0: ends with the connection). */
    public expirySeconds: number,
    readonly createdAt: number,
    readonly host: SessionHost,
  ) {}

  /** The session's subscriptions by filter. */
  get subscriptions(): Map<string, SubscriptionRecord> {
    return (this.subscriptionMap ??= new Map());
  }

  /** Inbound QoS 2 packet ids: PUBREC sent, PUBREL not yet received (§4.3.3). */
  get inboundQoS2(): Set<number> {
    return (this.inboundIds ??= new Set());
  }

  /** How each subscription was counted in the tenant's usage (transient, persistent or shared). */
  get countedSubscriptions(): Map<string, ResourceType> {
    return (this.counted ??= new Map());
  }

  /** Filters counted in the tenant's usage (a copy: safe to release while iterating). */
  countedFilters(): string[] {
    return this.counted === undefined ? [] : [...this.counted.keys()];
  }

  /** Forget every subscription (the session ends). */
  dropSubscriptions(): void {
    this.subscriptionMap = undefined;
  }

  private get inbox(): SessionInbox<Session> {
    return (this.inboxState ??= new SessionInbox<Session>(this, this.host));
  }

  /** QoS 1/2 deliveries in flight. */
  get inflightSize(): number {
    return this.inflightMap?.size ?? 0;
  }

  private get inflight(): Map<number, Inflight> {
    return (this.inflightMap ??= new Map());
  }

  get tenantId(): string {
    return this.client.tenantId;
  }

  get clientId(): string {
    return this.client.clientId;
  }

  get connected(): boolean {
    return this.link !== undefined;
  }

  /** Whether the session writes through storage: from the first time it was persistent until it ends. */
  get persistent(): boolean {
    return this.stored;
  }

  /** Deliveries waiting (queued) plus in flight. */
  get backlog(): number {
    return (this.queue?.size ?? 0) + (this.inboxState?.backlog ?? 0) + (this.inflightMap?.size ?? 0);
  }

  onWheelTick(now: number): number {
    return this.host.onDeadline(this, now);
  }

  /**
   * Retained messages for a new subscription are being looked up: live deliveries wait behind
   * them, so a subscriber sees the retained message of a topic before newer ones.
   */
  holdForRetained(): void {
    this.retainedLookups++;
  }

  /** The lookup is done: deliver what it found, then (when no other lookup is pending) what waited. */
  releaseRetained(retained: readonly Delivery[]): void {
    for (const d of retained) this.deliverNow(d, undefined, false);
    if (--this.retainedLookups > 0 || this.waiting === undefined) return;
    const waiting = this.waiting;
    this.waiting = undefined;
    for (const w of waiting) {
      this.deliverNow(w.delivery, w.waiter, true);
      w.waiter?.release();
    }
  }

  /**
   * Hand a delivery to the session: sent now, queued, or dropped by policy. For a persistent
   * session a QoS 1/2 delivery returns the promise of its storage write: the publisher is
   * acknowledged only once it resolves.
   */
  deliver(d: Delivery, waiter?: WriteWaiter): void {
    if (this.retainedLookups === 0) {
      this.deliverNow(d, waiter, true);
      return;
    }
    const waiting = (this.waiting ??= []);
    if (!this.persistent || d.qos === 0 || waiter === undefined) {
      waiting.push({ delivery: d, waiter: undefined });
      return;
    }
    waiter.hold();
    waiting.push({ delivery: d, waiter });
  }

  /**
   * `live`: a message being published now (not a retained one a new subscription gets). A live
   * QoS 1/2 delivery without a waiter has no publisher to send it again (a will): a persistent
   * session stores it in its inbox before sending it, so a failed write is tried again
   * ({@link appendUnowned}) instead of the message living only in a flight that may be lost.
   */
  private deliverNow(d: Delivery, waiter: WriteWaiter | undefined, live: boolean): void {
    const link = this.link;
    if (!this.persistent) {
      // writable() is asked even when the queue is not empty: it is where a subscriber stuck over
      // the high-water mark for slowConsumerTimeoutMs is disconnected.
      if (
        link !== undefined &&
        link.writable() &&
        (this.queue === undefined || this.queue.size === 0) &&
        (d.qos === 0 || this.inflight.size < link.receiveMaximum)
      ) {
        if (d.qos === 0) link.sendPublish(d, 0, false);
        else this.send(link, d);
      } else {
        (this.queue ??= new SessionQueue<Session>(this, this.host)).enqueue(d, link);
      }
      return undefined;
    }
    if (this.forgotten) {
      // Served elsewhere now: this broker takes no responsibility for it.
      if (d.qos > 0 && waiter !== undefined) {
        waiter.hold();
        waiter.fail(new Error(`session ${this.clientId} moved to another node`));
      }
      return undefined;
    }
    if (d.qos === 0) {
      // QoS 0 is not worth a disk write while the client is there: sent, or dropped behind a full
      // socket. While the inbox still holds what was queued for the client (also QoS 0), it queues
      // behind it: a publisher's messages on a topic arrive in order [MQTT-4.6.0-5].
      if (link === undefined || this.inboxState?.waiting === true)
        this.inbox.append(d).catch((err: unknown) => this.host.storageFailed(this, 'inbox append', err));
      else if (link.writable()) link.sendPublish(d, 0, false);
      else this.host.dropped(this, d, 'queue-full');
      return undefined;
    }
    const inbox = this.inboxState;
    const direct =
      link !== undefined && this.loaded && (waiter !== undefined || !live) && (inbox === undefined || !inbox.waiting) && link.writable();
    if (direct && this.inflight.size < link.receiveMaximum) {
      const packetId = this.allocatePacketId();
      if (d.qos === 1) {
        // QoS 1 to a connected client: its PUBACK usually comes before a disk write would, and a
        // message the client acknowledged needs none. The publisher is acknowledged when either
        // the client's PUBACK or the write comes (D20).
        waiter?.hold();
        const entry = new Inflight(this, packetId, d, waiter, true);
        this.track(packetId, entry);
        this.host.deferInflight(entry);
        if (!link.sendPublish(d, packetId, false)) this.completeLocally(packetId, d, 'too-large');
        return;
      }
      this.track(packetId, new Inflight(this, packetId, d, undefined, false));
      this.host.flushDeferred(this);
      const written = this.host.persistence.putInflight(this, [{ packetId, phase: 'publish', message: toInboxMessage(d) }]);
      if (waiter !== undefined) waiter.add(written, this, 'inflight put');
      else written.catch((err: unknown) => this.host.storageFailed(this, 'inflight put', err));
      if (!link.sendPublish(d, packetId, false)) this.completeLocally(packetId, d, 'too-large');
      return;
    }
    if (waiter !== undefined) waiter.add(this.inbox.append(d), this, 'inbox append');
    else this.appendUnowned(d, 1);
  }

  /**
   * A QoS 1/2 delivery no publisher waits for, so none sends it again (a will): after a storage
   * failure it is appended again, every second for a minute, to the session served under this key
   * then (a cluster node that lost its lease meanwhile serves it again once it takes it back).
   */
  private appendUnowned(d: Delivery, attempt: number): void {
    this.inbox.append(d).catch((err: unknown) => {
      this.host.storageFailed(this, 'inbox append', err);
      this.appendLater(d, attempt + 1);
    });
  }

  private appendLater(d: Delivery, attempt: number): void {
    if (attempt > UNOWNED_APPEND_TRIES) return;
    setTimeout(() => {
      const now = this.host.served(this.key);
      if (now === undefined || now.forgotten) this.appendLater(d, attempt + 1);
      else now.appendUnowned(d, attempt);
    }, UNOWNED_APPEND_RETRY_MS).unref();
  }

  /** PUBACK (QoS 1) or PUBCOMP (QoS 2) for `packetId`. Returns false when no such packet is in flight. */
  complete(packetId: number): boolean {
    const entry = this.inflight.get(packetId);
    if (entry === undefined) return false;
    this.inflight.delete(packetId);
    if (entry.state === 'waiting') {
      // Acknowledged before its record was written: nothing to write, nothing to remove.
      entry.state = 'settled';
      entry.waiter?.release();
    } else if (this.persistent) {
      this.host.persistence.removeInflight(this, [packetId]).catch((err: unknown) => this.host.storageFailed(this, 'inflight remove', err));
    }
    this.host.confirmed(this, entry.delivery, entry.phase === 'pubrel' ? 2 : (entry.delivery?.qos ?? 1));
    this.drain();
    return true;
  }

  /** PUBREC for `packetId`: the PUBLISH phase is over, PUBREL goes out. Returns false when unknown. */
  received(packetId: number, failed: boolean): boolean {
    const entry = this.inflight.get(packetId);
    if (entry === undefined || (entry.delivery !== undefined && entry.delivery.qos !== 2)) return false;
    if (failed) {
      // A PUBREC with a reason code ≥ 0x80 ends the flow (§4.3.3): no PUBREL.
      return this.complete(packetId);
    }
    entry.phase = 'pubrel';
    entry.delivery = undefined;
    entry.sentAt = 0;
    entry.resends = 0;
    if (!this.persistent) {
      this.link?.sendPubrel(packetId);
      return true;
    }
    this.storePubrel(packetId, entry);
    return true;
  }

  /**
   * PUBREL only once the new phase is stored: after a crash the next owner resends PUBREL, never
   * the PUBLISH the client may already have completed (exactly once [MQTT-4.3.3]). A failed write
   * is tried again a second later while the client is connected, and at its next connection;
   * until then the PUBREL waits (the client's window stays used, nothing is lost).
   */
  private storePubrel(packetId: number, entry: Inflight): void {
    entry.pubrel = 'storing';
    this.host.persistence.putInflight(this, [{ packetId, phase: 'pubrel', inboxSeq: entry.inboxSeq }]).then(
      () => {
        entry.pubrel = 'stored';
        if (this.inflight.get(packetId) === entry) this.link?.sendPubrel(packetId);
      },
      (err: unknown) => {
        entry.pubrel = 'unstored';
        this.host.storageFailed(this, 'inflight pubrel', err);
        setTimeout(() => {
          if (this.inflight.get(packetId) === entry && entry.pubrel === 'unstored' && this.link !== undefined)
            this.storePubrel(packetId, entry);
        }, STORE_RETRY_MS).unref();
      },
    );
  }

  /** PUBREL for an entry in phase `pubrel` (again): at once when its record is stored, else once it is. */
  private releaseAgain(link: SessionLink, packetId: number, entry: Inflight): void {
    if (entry.pubrel === 'stored') link.sendPubrel(packetId);
    else if (entry.pubrel === 'unstored') this.storePubrel(packetId, entry);
  }

  /**
   * Attach a connection: resend what was in flight with DUP [MQTT-4.4.0-1], then what waits. A
   * restored session is {@link load}ed first (the CONNECT that resumes it waits for that).
   */
  attach(link: SessionLink): void {
    this.link = link;
    this.connectedAt = this.host.now();
    this.resend(link);
  }

  /** Detach the connection; what is in flight stays for the next one. */
  detach(): void {
    this.link = undefined;
  }

  /** Send waiting deliveries while the client's window and the socket allow. */
  drain(): void {
    const link = this.link;
    if (link === undefined) return;
    if (this.persistent) {
      const inbox = this.inboxState;
      if (inbox !== undefined && inbox.hasUnread) void inbox.pump();
      return;
    }
    const queue = this.queue;
    if (queue === undefined) return;
    const now = this.host.now();
    for (let d = queue.peek(); d !== undefined; d = queue.peek()) {
      if (d.qos > 0 && this.inflight.size >= link.receiveMaximum) break;
      if (!link.writable()) break;
      queue.shift();
      if (d.msg.expired(now)) {
        this.host.dropped(this, d, 'expired');
        continue;
      }
      if (d.qos === 0) link.sendPublish(d, 0, false);
      else this.send(link, d);
    }
    queue.compact();
  }

  /** Deliveries waiting in the memory queue (a transient session's; not those in flight). */
  get memoryQueued(): number {
    return this.queue?.size ?? 0;
  }

  /** Message bytes this session holds in its memory queue. */
  get memoryBytes(): number {
    return this.queue?.bytes ?? 0;
  }

  /** Drop everything queued and in flight (clean start, session end). */
  clearState(): void {
    this.queue?.clear();
    this.inboxState?.clear();
    this.inflightMap = undefined;
    this.inboundIds = undefined;
  }

  /**
   * A transient session becomes persistent (a reconnect with expiry > 0): what waits in memory
   * moves to the inbox, what is in flight to the inflight store.
   */
  async persist(): Promise<void> {
    const p = this.host.persistence;
    const records: InflightRecord[] = [];
    for (const [packetId, e] of this.inflight)
      records.push(
        e.delivery === undefined
          ? { packetId, phase: 'pubrel', inboxSeq: e.inboxSeq }
          : { packetId, phase: 'publish', message: toInboxMessage(e.delivery), inboxSeq: e.inboxSeq },
      );
    const waiting = this.queue?.takeAll() ?? [];
    const { maxSize, dropOldest } = this.host.queueLimit(this.tenantId);
    const writes: Promise<unknown>[] = [];
    if (records.length > 0) writes.push(p.putInflight(this, records));
    for (const d of waiting) {
      if (d.qos === 0 && this.link !== undefined) continue;
      writes.push(this.inbox.issuedAppend(p.append(this, d, maxSize, dropOldest)));
    }
    for (const id of this.inboundQoS2) writes.push(p.addIncoming(this, id));
    await Promise.all(writes);
  }

  private resend(link: SessionLink): void {
    const now = this.host.now();
    const inflight = this.inflightMap;
    if (inflight !== undefined)
      for (const [packetId, entry] of inflight) {
        const d = entry.delivery;
        entry.sentAt = 0;
        entry.resends = 0;
        if (d === undefined) {
          this.releaseAgain(link, packetId, entry);
        } else if (d.msg.expired(now)) {
          this.completeLocally(packetId, d, 'expired');
        } else if (!link.sendPublish(d, packetId, true)) {
          this.completeLocally(packetId, d, 'too-large');
        }
      }
    if (inflight !== undefined && inflight.size > 0 && !this.resendWatched && !link.v5) this.host.watchResends(this);
    this.drain();
  }

  /** A storage write a publisher's acknowledgement waited for failed ({@link WriteReporter}). */
  writeFailed(call: string, err: unknown): void {
    this.host.storageFailed(this, call, err);
  }

  /**
   * Read back what a restored session had in flight, its inbound QoS 2 ids and its inbox count,
   * once: a CONNECT that resumes it waits for this before CONNACK, and concurrent CONNECTs share
   * one read. Rejects when storage fails: the session then stays unloaded (the next CONNECT reads
   * again), so nothing is ever sent from a state that was not read.
   */
  load(): Promise<void> {
    if (this.loaded) return Promise.resolve();
    return (this.loading ??= this.readBack().finally(() => {
      this.loading = undefined;
    }));
  }

  private async readBack(): Promise<void> {
    const p = this.host.persistence;
    let read: [InflightRecord[], number[], number];
    try {
      read = await Promise.all([p.listInflight(this), p.listIncoming(this), p.count(this)]);
    } catch (err) {
      this.host.storageFailed(this, 'session load', err);
      throw err;
    }
    const [records, incoming, backlog] = read;
    for (const r of records) {
      const entry = new Inflight(
        this,
        r.packetId,
        r.phase === 'publish' && r.message !== undefined ? fromInboxMessage(r.message) : undefined,
        undefined,
        false,
      );
      entry.phase = r.phase;
      entry.inboxSeq = r.inboxSeq;
      this.inflight.set(r.packetId, entry);
      if (r.packetId >= this.nextPacketId) this.nextPacketId = r.packetId === 65535 ? 1 : r.packetId + 1;
    }
    for (const id of incoming) this.inboundQoS2.add(id);
    if (backlog > 0) this.inbox.restored(backlog);
    let inFlightUpTo = 0;
    for (const r of records) if (r.inboxSeq !== undefined && r.inboxSeq > inFlightUpTo) inFlightUpTo = r.inboxSeq;
    if (inFlightUpTo > 0) this.inbox.skipTo(inFlightUpTo);
    this.loaded = true;
  }

  /**
   * A QoS 1/2 delivery read from the inbox: in flight, then sent; returns its packet id, or
   * undefined when it was too large for the client and discarded as completed [MQTT-3.1.2-25].
   */
  sendFromInbox(d: Delivery, link: SessionLink | undefined, inboxSeq: number): number | undefined {
    const packetId = this.allocatePacketId();
    const entry = new Inflight(this, packetId, d, undefined, false);
    entry.inboxSeq = inboxSeq;
    this.track(packetId, entry);
    if (link !== undefined && !link.sendPublish(d, packetId, false)) {
      this.completeLocally(packetId, d, 'too-large');
      return undefined;
    }
    return packetId;
  }

  unstoredRecord(record: InflightRecord): InflightRecord | undefined {
    const entry = this.inflightMap?.get(record.packetId);
    if (entry === undefined || entry.inboxSeq !== record.inboxSeq) return undefined;
    if (entry.phase === 'publish') return record;
    // PUBREC came while the move was unstored: the commit past this entry must carry its pubrel
    // record, or a crash before storePubrel lands would lose the message.
    return entry.pubrel === 'stored' ? undefined : { packetId: record.packetId, phase: 'pubrel', inboxSeq: record.inboxSeq };
  }

  private track(packetId: number, entry: Inflight): void {
    this.inflight.set(packetId, entry);
    if (!this.resendWatched && this.link?.v5 === false) this.host.watchResends(this);
  }

  /** A delivery in flight that will never be sent (too large, expired, resends exhausted): discarded as if completed [MQTT-3.1.2-25]. */
  private completeLocally(packetId: number, d: Delivery, reason: 'too-large' | 'expired' | 'resends-exhausted'): void {
    const entry = this.inflight.get(packetId);
    this.inflight.delete(packetId);
    if (entry !== undefined && entry.state === 'waiting') {
      entry.state = 'settled';
      entry.waiter?.release();
    } else if (this.persistent)
      this.host.persistence.removeInflight(this, [packetId]).catch((err: unknown) => this.host.storageFailed(this, 'inflight remove', err));
    this.host.dropped(this, d, reason);
  }

  private send(link: SessionLink, d: Delivery): void {
    const packetId = this.allocatePacketId();
    this.track(packetId, new Inflight(this, packetId, d, undefined, false));
    if (!link.sendPublish(d, packetId, false)) this.completeLocally(packetId, d, 'too-large');
  }

  /**
   * MQTT 3 only: resend deliveries unacknowledged for `timeoutMs` with DUP (PUBREL again for
   * QoS 2 in its second phase), at most `maxResends` times, then give them up (dropped, the
   * packet id freed). Returns whether anything is still in flight.
   */
  resendOverdue(scan: number, timeoutScans: number, maxResends: number): boolean {
    const link = this.link;
    if (link === undefined || link.v5) return false;
    let given = 0;
    for (const [packetId, entry] of this.inflight) {
      const sentAt = entry.sentAt;
      if (sentAt === 0) {
        entry.sentAt = scan;
        continue;
      }
      if (scan - sentAt < timeoutScans) continue;
      const resends = entry.resends;
      const d = entry.delivery;
      if (resends >= maxResends) {
        if (d !== undefined) {
          this.completeLocally(packetId, d, 'resends-exhausted');
          given++;
        } else this.complete(packetId);
        continue;
      }
      entry.resends = resends + 1;
      entry.sentAt = scan;
      if (d === undefined) this.releaseAgain(link, packetId, entry);
      else if (!link.sendPublish(d, packetId, true)) this.completeLocally(packetId, d, 'too-large');
    }
    // Given-up messages free their window slots: what waits behind them goes now.
    if (given > 0) this.drain();
    return this.inflight.size > 0;
  }

  private allocatePacketId(): number {
    // Packet ids in use are skipped [MQTT-2.2.1-4]; at most 65535 can be in flight.
    for (let i = 0; i < 65535; i++) {
      const id = this.nextPacketId;
      this.nextPacketId = id === 65535 ? 1 : id + 1;
      if (!this.inflight.has(id)) return id;
    }
    throw new Error('no free packet identifier');
  }
}
