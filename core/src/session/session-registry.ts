import type { ClientInfo, ProtocolVersion, SessionRecord } from '@bifro/spi';
import { sessionListKey } from '@bifro/spi';
import type { EmitEvent } from '../base/broker-events';
import { describeError } from '../base/errors';
import type { AclManager, SettingsManager } from '../plugin-host/managers';
import { RC } from '../codec/reason-codes';
import type { Router } from '../routing/router';
import type { Logger } from '../base/logger';
import { isReservedTopic } from '../security/secure-defaults';
import type { TenantLimits } from '../tenancy/tenant-limits';
import { subscriptionResource } from '../tenancy/tenant-limits';
import { COUNTER, type TenantUsage } from '../tenancy/tenant-usage';
import { Message } from './message';
import { Session, type SessionHost, type SessionLink, type SessionWill } from './session';
import { willFromRecord } from './session-persistence';
import { SortedIds } from './sorted-ids';
import type { TimerWheel } from './timer-wheel';

/** How often a handed-over session checks whether its routes may go ({@link SessionRegistry.forget}). */
const MOVED_CHECK_MS = 50;

/** Session Expiry Interval meaning "never" (§3.1.2). */
export const NEVER_EXPIRES = 0xffffffff;

/** What the registry needs of the broker: the host its sessions report to, and the publish path for wills. */
export interface SessionRegistryHost extends SessionHost {
  /** Set when the broker is shutting down (NoLWTWhenServerShuttingDown). */
  readonly shuttingDown: boolean;
  readonly emit: EmitEvent;
  /** Deliver to the tenant's matching subscriptions (a will). */
  publish(tenantId: string, msg: Message): number;
  /** Store or clear a retained message (a retained will); resolves when done. */
  retainMessage(client: ClientInfo, msg: Message): Promise<unknown>;
}

/**
 * Told of the moments a session's cluster-wide registry entry changes (cluster mode only): its
 * connection went away, its delayed will fired, it ended.
 */
export interface SessionObserver {
  disconnected(session: Session): void;
  /** A will is about to be published (any path: at disconnect, after its delay, at the end). */
  willPublished(session: Session): void;
  willFired(session: Session): void;
  ended(session: Session): void;
}

/** A connection as the registry takes its session away (the connection, seen from the session). */
interface TakenConnection extends SessionLink {
  closeCause: unknown;
  readonly origin: { readonly remoteAddress: string };
  disconnect(reasonCode: number): void;
}

/** The session a CONNECT gets ({@link SessionRegistry.open}). */
export interface OpenedSession {
  readonly session: Session;
  /** The stored session it resumed (Session Present), undefined for a new one. */
  readonly existing: Session | undefined;
  /** The Session Expiry Interval the client asked for (v3: 0 or never, from its clean session flag). */
  readonly requested: number;
  /** The interval granted (MinSessionExpirySeconds, MaxSessionExpirySeconds, ForceTransient). */
  readonly expiry: number;
}

/**
 * Every session of the broker, by sessionListKey(tenantId, clientId) from @bifro/spi (the same
 * client id in two tenants is two sessions, and the key sorts like the storage listing): takeover
 * and resume at CONNECT, wills and expiry after a disconnect (deadlines on the timer wheel), the
 * end of a session, and the stored sessions brought back at boot.
 */
export class SessionRegistry {
  private readonly byKey = new Map<string, Session>();
  /**
   * Each tenant's client ids in order, kept as sessions start and end (not per message): what
   * the admin API pages through, without sorting the broker's sessions for every page.
   */
  private readonly byTenant = new Map<string, SortedIds>();
  /** Cluster mode: the registry entries of the cluster follow the sessions of this one. */
  observer: SessionObserver | undefined;
  /** Sessions handed to another node whose routes are kept a moment ({@link forget}). */
  private readonly moving = new Map<string, { session: Session; timer: NodeJS.Timeout }>();
  /**
   * Ended sessions whose stored data is being deleted (resolves true), or could not be (false): a
   * session with the same key that becomes persistent waits for the delete, or repeats it, so it
   * never inherits the old one's queue.
   */
  private readonly deleting = new Map<string, Promise<boolean>>();

  constructor(
    private readonly host: SessionRegistryHost,
    private readonly router: Router<Session>,
    private readonly settings: SettingsManager,
    private readonly acl: AclManager,
    private readonly limits: TenantLimits,
    private readonly usage: TenantUsage,
    private readonly wheel: TimerWheel,
    private readonly logger: Logger,
  ) {}

  get(key: string): Session | undefined {
    return this.byKey.get(key);
  }

  get size(): number {
    return this.byKey.size;
  }

  /** Every session (do not start or end sessions while iterating). */
  all(): IterableIterator<Session> {
    return this.byKey.values();
  }

  /**
   * The tenant's sessions in client id order (UTF-16 code units), after `fromClientId` when given
   * (or from it, `inclusive`): a binary search to the start, then one step per session. Do not
   * start or end sessions while iterating (take what you need first).
   */
  *tenantSessions(tenantId: string, fromClientId?: string, inclusive = false): Generator<Session, void, undefined> {
    const ids = this.byTenant.get(tenantId);
    if (ids === undefined) return;
    for (const clientId of ids.from(fromClientId, inclusive)) {
      const session = this.byKey.get(sessionListKey(tenantId, clientId));
      if (session !== undefined) yield session;
    }
  }

  private indexSession(session: Session): void {
    let ids = this.byTenant.get(session.tenantId);
    if (ids === undefined) this.byTenant.set(session.tenantId, (ids = new SortedIds()));
    ids.add(session.clientId);
  }

  /**
   * The session of a CONNECT: take over a live connection [MQTT-3.1.4-3], end or resume the
   * stored session [MQTT-3.1.2-4], [MQTT-3.1.2-5], with the expiry the tenant allows and the
   * connection's will. `v5Expiry` is the v5 Session Expiry Interval (undefined for v3).
   */
  open(
    conn: object,
    client: ClientInfo,
    clean: boolean,
    v5Expiry: number | undefined,
    will: SessionWill | undefined,
    resumableFrom?: string,
  ): OpenedSession {
    const tenantId = client.tenantId;
    const key = sessionListKey(tenantId, client.clientId);
    this.takeOver(key, conn);
    const forceTransient = this.settings.get(tenantId, 'ForceTransient');
    let existing = this.byKey.get(key);
    // A session is bound to the user who made it (docs/security.md § Sessions belong to their user).
    const otherUser = existing !== undefined && existing.client.userId !== client.userId;
    // Another user may resume it only as the caller checked (ResumeSessionsOfOtherUsers): every
    // stored subscription allowed for `client`, judged against the user who holds it now.
    const fresh = otherUser && existing!.client.userId !== resumableFrom;
    if (existing !== undefined && otherUser) {
      // Not its client coming back: the previous user's pending will is published, not cancelled.
      if (existing.willAt !== 0) this.fireWill(existing);
    }
    const cleanStart = clean || forceTransient;
    if (existing !== undefined && (cleanStart || fresh)) {
      // A new connection inside the will delay cancels the will, clean start or not [MQTT-3.1.2-8].
      this.resumed(existing);
      this.end(existing);
      existing = undefined;
    }
    const maxExpiry = this.settings.get(tenantId, 'MaxSessionExpirySeconds');
    const minExpiry = this.settings.get(tenantId, 'MinSessionExpirySeconds');
    const requested = v5Expiry ?? (cleanStart ? 0 : NEVER_EXPIRES);
    const expiry = requested === 0 || forceTransient ? 0 : Math.min(Math.max(requested, minExpiry), maxExpiry);
    let session = existing;
    if (session !== undefined) {
      this.resumed(session);
      session.client = client;
      session.protocolVersion = client.protocolVersion;
      session.expirySeconds = expiry;
    } else {
      session = this.create(client, expiry);
    }
    session.will = will;
    return { session, existing, requested, expiry };
  }

  /** A live connection of the session other than `conn` is disconnected: Session taken over (0x8E). */
  private takeOver(key: string, conn: object): void {
    const session = this.byKey.get(key);
    const live = session?.link;
    if (live === undefined || live === conn) return;
    this.disconnectTaken(session!, 'session taken over');
  }

  /** Closes the session's connection with 0x8E Session taken over [MQTT-3.1.4-3] (v3: closed), reported as a kick. */
  disconnectTaken(session: Session, reason: string): void {
    this.kick(session, session.link as TakenConnection | undefined, reason, RC.SessionTakenOver);
  }

  /**
   * Closes the session's connection with 0x89 Server busy (v3: closed), without the session's
   * disconnect: no will, nothing written, since another node may own the session now.
   */
  cutOff(session: Session, reason: string): void {
    const taken = session.link as TakenConnection | undefined;
    session.detach();
    this.kick(session, taken, reason, RC.ServerBusy);
  }

  /** Closes `taken` with `reasonCode`, reported as a kick (no disconnect event of its own). */
  private kick(session: Session, taken: TakenConnection | undefined, reason: string, reasonCode: number): void {
    if (taken === undefined) return;
    taken.closeCause = 'reported';
    this.host.emit('kicked', session.client, { remoteAddress: taken.origin.remoteAddress, reason });
    taken.disconnect(reasonCode);
  }

  create(client: ClientInfo, expirySeconds: number): Session {
    // The session comes back here before the grace of its hand-over ended: the old routes go first.
    const moved = this.moving.get(sessionListKey(client.tenantId, client.clientId));
    if (moved !== undefined) this.dropMoved(moved.session);
    const session = new Session(
      sessionListKey(client.tenantId, client.clientId),
      client,
      client.protocolVersion,
      expirySeconds,
      this.wheel.clock(),
      this.host,
    );
    this.byKey.set(session.key, session);
    this.indexSession(session);
    this.usage.bump(client.tenantId, COUNTER.sessions, 1);
    this.host.emit('sessionStarted', client, {});
    return session;
  }

  /** A connection takes the session back: cancel a pending will [MQTT-3.1.3-9] and the expiry. */
  resumed(session: Session): void {
    session.willAt = 0;
    session.expireAt = 0;
    this.wheel.cancel(session);
  }

  /**
   * Write a persistent session through storage before CONNACK says it exists (its record: will,
   * expiry); a restored session is read back first, and a resumed session that was transient
   * until now writes its state first.
   */
  async store(session: Session, existing: Session | undefined): Promise<void> {
    // A restored session's state is read back before CONNACK says it is present.
    await session.load();
    if (!session.stored) await this.deletedBefore(session);
    if (!session.stored && existing !== undefined) await session.persist();
    await this.save(session);
  }

  /** The stored data of an ended session with this key is gone (deleted again if that failed); throws when it cannot be. */
  private async deletedBefore(session: Session): Promise<void> {
    const pending = this.deleting.get(session.key);
    if (pending === undefined) return;
    if (!(await pending))
      await this.host.persistence.deleteSession(session).catch((err: unknown) => {
        this.host.storageFailed(session, 'session delete', err);
        throw err;
      });
    if (this.deleting.get(session.key) === pending) this.deleting.delete(session.key);
  }

  /**
   * The CONNECT that opened `session` was refused after all (storage failed): a new session ends,
   * a resumed one is offline again, as if the refused connection had dropped at once, without its will.
   */
  refused(session: Session, existing: Session | undefined): void {
    if (existing === undefined) {
      this.end(session);
      return;
    }
    session.will = undefined;
    this.disconnected(session, false);
  }

  /** Write a persistent session's record (subscriptions, will, expiry); `disconnectedAt` when it is offline. */
  save(session: Session, disconnectedAt?: number): Promise<void> {
    if (!session.stored) this.usage.add(session.tenantId, 'TotalPersistentSessions', 1);
    session.stored = true;
    return this.host.persistence.saveRecord(session, disconnectedAt).then(
      () => this.host.storageSucceeded(),
      (err: unknown) => {
        this.host.storageFailed(session, 'session save', err);
        throw err;
      },
    );
  }

  /**
   * The session's connection went away. A will is published now, later (will delay) or not at all
   * (normal DISCONNECT [MQTT-3.1.2-10]); a session with expiry 0 ends now, others are kept until
   * their expiry [MQTT-3.1.2-23].
   */
  disconnected(session: Session, publishWill: boolean): void {
    session.detach();
    if (!publishWill) session.will = undefined;
    const now = this.wheel.clock();
    session.disconnectedAt = now;
    if (session.will !== undefined) {
      const delay = Math.min(session.will.delaySeconds, session.expirySeconds);
      if (delay === 0) this.fireWill(session);
      else session.willAt = now + delay * 1000;
    }
    // Saved after a will without delay went out (it is then no longer in the record).
    if (session.stored && session.expirySeconds > 0) this.save(session, now).catch(() => undefined);
    if (session.expirySeconds === 0) {
      this.end(session);
      return;
    }
    session.expireAt = session.expirySeconds === NEVER_EXPIRES ? 0 : now + session.expirySeconds * 1000;
    const next = nextDeadline(session);
    if (next > 0) this.wheel.schedule(session, next);
    this.observer?.disconnected(session);
  }

  /** End a session: subscriptions removed, state dropped, a pending will published [MQTT-3.1.3-9]. */
  end(session: Session): void {
    if (!this.unindex(session)) return;
    if (session.willAt !== 0) this.fireWill(session);
    session.clearState();
    if (this.unroute(session)) this.deleteStored(session);
    this.observer?.ended(session);
    this.host.emit('sessionStopped', session.client, {});
  }

  private deleteStored(session: Session): void {
    const key = session.key;
    const done: Promise<boolean> = this.host.persistence.deleteSession(session).then(
      () => {
        if (this.deleting.get(key) === done) this.deleting.delete(key);
        return true;
      },
      (err: unknown) => {
        this.host.storageFailed(session, 'session delete', err);
        return false;
      },
    );
    this.deleting.set(key, done);
  }

  /** Out of the index, the session count and the timer wheel; false when it was not (or no longer) this registry's. */
  private unindex(session: Session): boolean {
    if (this.byKey.get(session.key) !== session) return false;
    this.byKey.delete(session.key);
    const ids = this.byTenant.get(session.tenantId);
    if (ids !== undefined && ids.delete(session.clientId) && ids.size === 0) this.byTenant.delete(session.tenantId);
    this.usage.bump(session.tenantId, COUNTER.sessions, -1);
    this.wheel.cancel(session);
    return true;
  }

  /**
   * Stop serving a session another node serves now (cluster mode): out of the index at once,
   * nothing published, nothing deleted from storage. Its routes stay for `graceMs`, so the other
   * nodes see the new owner's routes before this node's go; meanwhile a QoS 1/2 message matching
   * them is refused (the publisher sends it again) rather than acknowledged and lost.
   */
  forget(session: Session, graceMs: number, replaced?: (session: Session) => boolean): void {
    if (!this.unindex(session)) return;
    session.will = undefined;
    session.willAt = 0;
    session.forgotten = true;
    session.clearState();
    this.awaitReplacement(session, graceMs, replaced);
  }

  /**
   * A forgotten session's routes go once `replaced` says the new owner's routes are seen here
   * (the routes bucket is one ordered stream, so a node that sees these go has seen those come),
   * or after `graceMs`. Called again for a session already forgotten, it sets a new condition.
   */
  awaitReplacement(session: Session, graceMs: number, replaced?: (session: Session) => boolean): void {
    const previous = this.moving.get(session.key);
    if (previous !== undefined) clearInterval(previous.timer);
    const deadline = Date.now() + graceMs;
    const timer = setInterval(() => {
      if (Date.now() >= deadline || replaced?.(session) === true) this.dropMoved(session);
    }, MOVED_CHECK_MS);
    timer.unref();
    this.moving.set(session.key, { session, timer });
  }

  /** A session forgotten here whose routes still wait for its new owner's. */
  movedSession(key: string): Session | undefined {
    return this.moving.get(key)?.session;
  }

  /** The end of a forgotten session's grace: its routes and subscriptions go. */
  private dropMoved(session: Session): void {
    const moving = this.moving.get(session.key);
    if (moving?.session !== session) return;
    clearInterval(moving.timer);
    this.moving.delete(session.key);
    this.unroute(session);
  }

  /** Its routes and subscriptions go, and it no longer counts as persistent; returns whether it was stored. */
  private unroute(session: Session): boolean {
    this.router.removeAll(session.tenantId, session.clientId);
    for (const filter of session.countedFilters()) this.limits.releaseSubscription(session, filter);
    session.dropSubscriptions();
    if (!session.stored) return false;
    session.stored = false;
    this.usage.add(session.tenantId, 'TotalPersistentSessions', -1);
    return true;
  }

  fireWill(session: Session): void {
    const will = session.will;
    session.will = undefined;
    session.willAt = 0;
    if (will === undefined) return;
    this.observer?.willPublished(session);
    this.publishWill(session.client, will);
  }

  /** Publish a will now, with the client's publish permission at this time (a session's, or one of a node that left). */
  publishWill(client: ClientInfo, will: SessionWill): void {
    if (this.host.shuttingDown && this.settings.get(client.tenantId, 'NoLWTWhenServerShuttingDown')) return;
    // The will's Message Expiry Interval counts from its publication.
    const w = will.message;
    const now = this.wheel.clock();
    const interval = w.properties?.messageExpiryInterval;
    const msg = new Message(
      w.topic,
      w.payload,
      w.qos,
      w.retain,
      w.properties,
      now,
      interval === undefined ? 0 : now + interval * 1000,
      w.publisherClientId,
    );
    // The will is published with the client's publish permission at the time it fires.
    const allowed = this.acl.check(client, { type: 'publish', topic: msg.topic, qos: msg.qos, retain: msg.retain });
    if (allowed instanceof Promise) void allowed.then((ok) => this.distributeWill(client, msg, ok));
    else this.distributeWill(client, msg, allowed);
  }

  private distributeWill(client: ClientInfo, msg: Message, allowed: boolean): void {
    const host = this.host;
    if (!allowed || isReservedTopic(msg.topic)) {
      host.emit('pubActionDisallow', client, { topic: msg.topic, qos: msg.qos, will: true });
      return;
    }
    try {
      if (msg.retain) host.retainMessage(client, msg).catch(() => undefined);
      host.publish(client.tenantId, msg);
      host.emit('willDistributed', client, { topic: msg.topic });
    } catch (err) {
      this.logger.error({ clientId: client.clientId, err: describeError(err) }, 'will not distributed');
      host.emit('willDistError', client, { topic: msg.topic });
    }
  }

  /** The timer wheel callback of a disconnected session: fire a due will, end an expired session. */
  onDeadline(session: Session, now: number): number {
    if (session.connected) return 0;
    if (session.willAt !== 0 && now >= session.willAt) {
      this.fireWill(session);
      // The will is gone from the record too, so a restart does not publish it again.
      if (session.stored && this.byKey.get(session.key) === session) this.save(session, session.disconnectedAt).catch(() => undefined);
      if (this.byKey.get(session.key) === session) this.observer?.willFired(session);
    }
    if (session.expireAt !== 0 && now >= session.expireAt) {
      this.end(session);
      return 0;
    }
    return nextDeadline(session);
  }

  /**
   * Bring back every stored session at boot: subscriptions into the index, will and expiry
   * deadlines from the record. A session that was connected when the broker stopped counts as
   * disconnected abnormally now (its will is due after its delay). Wills and expiries already due
   * are handled after every session is back, so a will reaches every restored subscriber.
   */
  async restore(): Promise<number> {
    const now = this.wheel.clock();
    const restored: Session[] = [];
    let after: string | undefined;
    for (;;) {
      const page: SessionRecord[] = await this.host.persistence.storage.sessions.list({ after, limit: 1000 });
      if (page.length === 0) break;
      for (const record of page) restored.push(this.restoreSession(record, now));
      const last = page[page.length - 1]!;
      after = sessionListKey(last.tenantId, last.clientId);
      if (page.length < 1000) break;
    }
    for (const session of restored) this.scheduleRestored(session, now);
    return restored.length;
  }

  /**
   * Bring back one stored session another node served (cluster mode, shared storage): like a
   * restored one at boot, its will and expiry deadlines from the record.
   */
  adopt(record: SessionRecord, at?: number): Session {
    // `at`: when the CONNECT that brings it here arrived (its expiry is judged then, not after the claim's wait).
    const now = at ?? this.wheel.clock();
    const session = this.restoreSession(record, now);
    this.scheduleRestored(session, now);
    return session;
  }

  private scheduleRestored(session: Session, now: number): void {
    const next = this.onDeadline(session, now);
    if (next > 0) this.wheel.schedule(session, next);
  }

  private restoreSession(r: SessionRecord, now: number): Session {
    const moved = this.moving.get(sessionListKey(r.tenantId, r.clientId));
    if (moved !== undefined) this.dropMoved(moved.session);
    const client = offlineClient(r.tenantId, r.clientId, r.userId, r.protocolVersion);
    const session = new Session(sessionListKey(r.tenantId, r.clientId), client, r.protocolVersion, r.expirySeconds, r.createdAt, this.host);
    session.stored = true;
    session.loaded = false;
    this.usage.add(r.tenantId, 'TotalPersistentSessions', 1);
    for (const sub of r.subscriptions) {
      session.subscriptions.set(sub.filter, sub);
      this.router.addRoute(r.tenantId, { subscriber: session, clientId: r.clientId, filter: sub.filter, options: sub });
      const resource = subscriptionResource(sub.filter, true);
      this.usage.add(r.tenantId, resource, 1);
      session.countedSubscriptions.set(sub.filter, resource);
    }
    const wasConnected = r.disconnectedAt === undefined;
    const since = r.disconnectedAt ?? now;
    session.disconnectedAt = since;
    if (r.will !== undefined) {
      session.will = willFromRecord(r.will, r.clientId, now);
      session.willAt = since + Math.min(r.will.delaySeconds, r.expirySeconds) * 1000;
    }
    session.expireAt = r.expirySeconds === NEVER_EXPIRES ? 0 : since + r.expirySeconds * 1000;
    this.byKey.set(session.key, session);
    this.indexSession(session);
    this.usage.bump(r.tenantId, COUNTER.sessions, 1);
    if (wasConnected) this.save(session, now).catch(() => undefined);
    return session;
  }

  /** Drop every session from the wheel and the registry (broker stop). */
  close(): void {
    for (const { timer } of this.moving.values()) clearInterval(timer);
    this.moving.clear();
    for (const session of this.byKey.values()) this.wheel.cancel(session);
    this.byKey.clear();
    this.byTenant.clear();
  }
}

/** The client of a session no connection serves (restored, or of a node that left): no address, no listener. */
export function offlineClient(tenantId: string, clientId: string, userId: string, protocolVersion: ProtocolVersion): ClientInfo {
  return { tenantId, userId, clientId, protocolVersion, remoteAddress: '', remotePort: 0, listener: '', attrs: {} };
}

function nextDeadline(session: Session): number {
  const a = session.willAt;
  const b = session.expireAt;
  if (a === 0) return b;
  if (b === 0) return a;
  return Math.min(a, b);
}
