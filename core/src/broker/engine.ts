import { inject, injectable } from 'tsyringe';
import type { BrokerEvent, ClientInfo, EventType, InflightRecord, QoS, SettingName, SettingValue } from '@bifro/spi';
import { EVENT_TYPES } from '@bifro/spi';
import type { BrokerConfig } from '../base/config-types';
import type { Logger } from '../base/logger';
import { ConnectionGate } from '../security/connection-gate';
import { BanList } from '../security/ban-list';
import { RUNTIME_TOKENS } from '../base/tokens';
import { PLUGIN_TOKENS } from '../plugin-host/tokens';
import type { AclManager, AuthManager, BalancerManager, EventManager, SettingsManager, ThrottlerManager } from '../plugin-host/managers';
import type { Router } from '../routing/router';
import { pickMember, type SharedGroupRef } from '../routing/shared-group';
import { RetainQuotas } from '../retain/retain-quotas';
import { RetainService } from '../retain/retain-service';
import type { Message } from '../session/message';
import type { DeferredWrite, Delivery, DropReason, QueueLimit, Session, WriteWaiter } from '../session/session';
import { SessionPersistence, toInboxMessage } from '../session/session-persistence';
import { SessionRegistry, type SessionRegistryHost } from '../session/session-registry';
import type { TimerWheel } from '../session/timer-wheel';
import { TenantLimits, type LiveLimits } from '../tenancy/tenant-limits';
import { COUNTER, resourceIndex, type TenantUsage } from '../tenancy/tenant-usage';
import { describeError } from '../base/errors';
import type { EmitEvent, EventClient, EventDetail } from '../base/broker-events';
import { RedirectSweep, type RedirectTarget } from './redirect-sweep';
import { StorageHealthMonitor } from './storage-health';
import type { Topology } from './topology';

export type { ConnectLimits, LiveLimits } from '../tenancy/tenant-limits';
export { NEVER_EXPIRES } from '../session/session-registry';

/** Index of TotalSessionMemoryBytes in a tenant's usage values. */
const SESSION_MEMORY = resourceIndex('TotalSessionMemoryBytes');

const GROUP_OF = new Map<EventType, BrokerEvent['group']>();
for (const [group, types] of Object.entries(EVENT_TYPES)) for (const t of types) GROUP_OF.set(t, group as BrokerEvent['group']);

/** How long a QoS 1 inflight record of a connected persistent session waits for the client's PUBACK before it is written. */
const DEFER_INFLIGHT_MS = 25;

/** How often MQTT 3 deliveries are checked for resends (ResendTimeoutSeconds is at least 1 s). */
const RESEND_SCAN_MS = 1000;

/** What the broker needs of an open connection: the redirect sweep's view and a way to close it. */
export interface OpenConnection extends RedirectTarget {
  /** Close from the server's side (v5: DISCONNECT with the reason code first). */
  disconnect(reasonCode: number): void;
}

/**
 * The broker's engine: the composition of its services (sessions, tenant limits, retained
 * messages and their quotas, the redirect sweep), the per-tenant subscription index with the
 * publish path (match → per-subscriber delivery), events, and the host the sessions report to.
 * One per broker, built by the container at boot with every service it composes; connections
 * reach it through their services.
 */
@injectable()
export class Engine implements SessionRegistryHost {
  /** Open connections (the server closes them at shutdown; the redirect sweep asks the balancer about them). */
  readonly connections = new Set<OpenConnection>();
  /** Every session: takeover, resume, wills, expiry, restore. */
  readonly sessions: SessionRegistry;
  /** Per-tenant limits cached until the tenant's settings change, and its quotas. */
  readonly limits: TenantLimits;
  readonly retainQuotas: RetainQuotas;
  /** The periodic client balancer check (mqtt.redirectCheckIntervalMs). */
  readonly redirects: RedirectSweep;
  /** Set when the broker is shutting down: connections closing now are the server's doing. */
  shuttingDown = false;
  /** Per-address connection rate and flapping bans (security.connectionRate, security.flapping). */
  readonly gate: ConnectionGate;
  /** Operator bans (client ids, users, tenants, addresses), loaded from `storage.bans` at boot; asked at CONNECT. */
  readonly bans: BanList;
  /** Episodes of failing storage calls: logged once each, counted, and behind `/ready`. */
  readonly storageHealth: StorageHealthMonitor;
  /** Whether some collector wants qos0Pushed, qos1Pushed or qos2Pushed (collectors are fixed at boot). */
  readonly pushWanted: boolean;
  /** Inflight records waiting to be written, by session (see deferInflight), and the timer that writes them. */
  private deferred = new Map<Session, DeferredWrite[]>();
  private deferTimer: NodeJS.Timeout | undefined;
  /** Sessions of MQTT 3 connections with deliveries in flight, scanned for resends. */
  private readonly resendWatch = new Set<Session>();
  private resendTimer: NodeJS.Timeout | undefined;
  /** Resend scans so far: inflight entries remember a scan number, never a time. */
  private resendScans = 0;

  constructor(
    @inject(RUNTIME_TOKENS.Config) readonly config: BrokerConfig,
    @inject(RUNTIME_TOKENS.Logger) readonly logger: Logger,
    @inject(RUNTIME_TOKENS.TimerWheel) readonly wheel: TimerWheel,
    @inject(RUNTIME_TOKENS.TenantUsage) readonly usage: TenantUsage,
    @inject(PLUGIN_TOKENS.Auth) readonly auth: AuthManager,
    @inject(PLUGIN_TOKENS.Acl) readonly acl: AclManager,
    @inject(PLUGIN_TOKENS.Balancer) readonly balancer: BalancerManager,
    @inject(PLUGIN_TOKENS.Events) readonly events: EventManager,
    @inject(PLUGIN_TOKENS.Settings) readonly settings: SettingsManager,
    @inject(PLUGIN_TOKENS.Throttler) readonly throttler: ThrottlerManager,
    /** Routes and matching (the routing seam, `routing/router.ts`). */
    @inject(RUNTIME_TOKENS.Router) readonly router: Router<Session>,
    @inject(RetainService) readonly retain: RetainService,
    @inject(SessionPersistence) readonly persistence: SessionPersistence,
    /** Standalone, worker or cluster node: the few points where they differ (D37). */
    @inject(RUNTIME_TOKENS.Topology) readonly topology: Topology,
  ) {
    const emit: EmitEvent = (type, client, detail) => this.emit(type, client, detail);
    this.gate = new ConnectionGate(config.security, logger, emit, wheel.clock);
    this.bans = new BanList(persistence.storage.bans, logger, emit, wheel.clock);
    this.storageHealth = new StorageHealthMonitor(persistence.storage, logger, emit, wheel.clock);
    this.pushWanted = this.events.wants('qos0Pushed') || this.events.wants('qos1Pushed') || this.events.wants('qos2Pushed');
    this.limits = new TenantLimits(settings, throttler, usage, emit);
    this.retainQuotas = new RetainQuotas(this.retain, usage, wheel, this.limits, throttler, logger, emit);
    this.sessions = new SessionRegistry(this, this.router, settings, acl, this.limits, usage, wheel, logger);
    this.redirects = new RedirectSweep(config.mqtt.redirectCheckIntervalMs, this.connections, balancer, logger);
  }

  /** The broker's clock (ms since the epoch): the timer wheel's, `Date.now` unless started with another. */
  now(): number {
    return this.wheel.clock();
  }

  /** A tenant setting (cached by the settings manager). */
  setting<S extends SettingName>(tenantId: string, name: S): SettingValue<S> {
    return this.settings.get(tenantId, name);
  }

  /** The tenant's live limits ({@link TenantLimits.liveLimits}). */
  liveLimits(tenantId: string): LiveLimits {
    return this.limits.liveLimits(tenantId);
  }

  /**
   * Report an event if some collector wants its type. Build `detail` lazily: pass a function on
   * hot paths. `client` is who the event is about (a ClientInfo, or what is known of the client).
   */
  emit(type: EventType, client: EventClient | undefined, detail: EventDetail = {}): void {
    if (!this.events.wants(type)) return;
    this.events.report({
      type,
      group: GROUP_OF.get(type)!,
      time: this.wheel.clock(),
      tenantId: client?.tenantId,
      clientId: client?.clientId,
      userId: client?.userId,
      detail: typeof detail === 'function' ? detail() : detail,
    });
  }

  /**
   * Deliver a message to every matching subscription of the tenant: one delivery per session for
   * overlapping subscriptions at the highest QoS with all subscription ids [MQTT-3.3.4-2],
   * [MQTT-3.3.4-3]; one member per shared group. In cluster mode the message also goes to every
   * other node with a matching route (each counts as one delivery), and each shared group is
   * served by one node cluster-wide; unless `fromNode` (it came from another node: delivered here
   * only, to the shared groups its sender named). Returns how many deliveries were made.
   */
  publish(tenantId: string, msg: Message, waiter?: WriteWaiter, fromNode?: readonly SharedGroupRef[]): number {
    const match = this.router.match(tenantId, msg.topic);
    let count = 0;
    const publisher = msg.publisherClientId;
    // Offline persistent sessions this message is queued for, against MaxPersistentFanout(Bytes),
    // read only when the first offline persistent subscriber comes up.
    let offline = 0;
    let maxOffline = -1;
    for (const d of match.direct) {
      let m = d;
      if (d.clientId === publisher) {
        // No Local: never back to the publisher's own subscriptions that ask so [MQTT-3.8.3-3].
        const local = d.localAllowed;
        if (local === undefined) continue;
        m = local;
      }
      const subscriber = m.subscriber;
      if (!subscriber.connected && subscriber.persistent) {
        if (maxOffline < 0) maxOffline = this.persistentFanoutLimit(tenantId, msg);
        if (++offline > maxOffline) {
          if (offline === maxOffline + 1)
            this.emit('pubDropped', { tenantId, clientId: publisher }, () => ({
              topic: msg.topic,
              qos: msg.qos,
              reason: 'MaxPersistentFanout',
            }));
          this.usage.bump(tenantId, COUNTER.messagesDropped, 1);
          continue;
        }
      }
      const qos = (m.qos < msg.qos ? m.qos : msg.qos) as QoS;
      // Live deliveries carry RETAIN 0 unless Retain As Published [MQTT-3.3.1-12], [MQTT-3.3.1-13].
      const ids = m.subscriptionIds.length === 0 ? undefined : m.subscriptionIds;
      m.subscriber.deliver({ msg, qos, retain: m.retainAsPublished && msg.retain, subscriptionIds: ids }, waiter);
      count++;
    }
    // Which local groups this broker serves (a cluster node: docs/cluster.md § Shared subscriptions), and the rest of the topology.
    const here = match.groups.length === 0 ? undefined : this.topology.groupsHere(match.groups, fromNode);
    if (fromNode === undefined) count += this.topology.forward(tenantId, msg, waiter, match.groups, here);
    const maxGroups = match.groups.length === 0 ? 0 : this.settings.get(tenantId, 'MaxGroupFanout');
    for (let i = 0; i < match.groups.length && i < maxGroups; i++) {
      if (here !== undefined && !here[i]) continue;
      // No Local is refused on shared subscriptions [MQTT-3.8.3-4]: the publisher may be the member.
      const member = pickMember(match.groups[i]!, publisher, msg.topic, isOnline);
      if (member === undefined) continue;
      const o = member.options;
      const qos = (o.qos < msg.qos ? o.qos : msg.qos) as QoS;
      const ids = o.subscriptionId === undefined ? undefined : [o.subscriptionId];
      member.subscriber.deliver({ msg, qos, retain: o.retainAsPublished && msg.retain, subscriptionIds: ids }, waiter);
      count++;
    }
    if (match.groups.length > maxGroups)
      this.emit('pubDropped', { tenantId, clientId: publisher }, () => ({ topic: msg.topic, qos: msg.qos, reason: 'MaxGroupFanout' }));
    return count;
  }

  /**
   * A message for some local sessions only, those `only` accepts, through their non-shared
   * subscriptions (the highest QoS of the ones that match, like {@link publish}); shared groups,
   * fan-out limits and the other nodes are left out. For a will a cluster node delivers to the
   * sessions it adopted from a node that did not take its copy. Returns how many sessions.
   */
  publishOnly(tenantId: string, msg: Message, only: (session: Session) => boolean): number {
    let count = 0;
    for (const d of this.router.match(tenantId, msg.topic).direct) {
      const m = d.clientId === msg.publisherClientId ? d.localAllowed : d;
      if (m === undefined || !only(m.subscriber)) continue;
      const qos = (m.qos < msg.qos ? m.qos : msg.qos) as QoS;
      const ids = m.subscriptionIds.length === 0 ? undefined : m.subscriptionIds;
      m.subscriber.deliver({ msg, qos, retain: m.retainAsPublished && msg.retain, subscriptionIds: ids });
      count++;
    }
    return count;
  }

  /** How many offline persistent sessions one message may be queued for (MaxPersistentFanout and MaxPersistentFanoutBytes). */
  private persistentFanoutLimit(tenantId: string, msg: Message): number {
    const bySize = Math.floor(this.settings.get(tenantId, 'MaxPersistentFanoutBytes') / Math.max(1, msg.size));
    return Math.min(this.settings.get(tenantId, 'MaxPersistentFanout'), bySize);
  }

  /**
   * Store or clear a retained message; failures are logged and reported, the live delivery is
   * unaffected. Resolves when stored: true, or false when a retained quota refused it.
   */
  retainMessage(client: ClientInfo, msg: Message): Promise<boolean> {
    const allowed = msg.payload.length === 0 || this.retainQuotas.allowed(client, msg);
    if (allowed === true) return this.storeRetained(client, msg);
    if (allowed === false) return Promise.resolve(false);
    // Decided asynchronously (a quota lookup): subscriptions made meanwhile still wait for it.
    const decided = allowed.then((ok) => (ok ? this.storeRetained(client, msg) : false));
    this.retain.track(client.tenantId, decided);
    return decided;
  }

  private storeRetained(client: ClientInfo, msg: Message): Promise<boolean> {
    const tenantId = client.tenantId;
    return this.retain.apply(tenantId, msg).then(
      (what) => {
        this.storageHealth.succeeded();
        this.emit(what === 'retained' ? 'msgRetained' : 'retainMsgCleared', client, { topic: msg.topic, size: msg.payload.length });
        this.retainQuotas.refresh(tenantId);
        return true;
      },
      (err: unknown) => {
        this.storageHealth.failed('retained put', err, client);
        this.emit('msgRetainedError', client, { topic: msg.topic, error: describeError(err) });
        throw err;
      },
    );
  }

  /** The session's connection went away ({@link SessionRegistry.disconnected}). */
  sessionDisconnected(session: Session, publishWill: boolean): void {
    this.sessions.disconnected(session, publishWill);
  }

  // ---- SessionHost ----

  /** The tenant's queue policy: part of its live limits (no allocation per call). */
  queueLimit(tenantId: string): QueueLimit {
    return this.limits.liveLimits(tenantId).queue;
  }

  tenantQueuedBytes(session: Session): number {
    return this.usage.state(session.tenantId).values[SESSION_MEMORY]!;
  }

  dropped(session: Session, delivery: Delivery, reason: DropReason): void {
    const counters = this.usage.state(session.tenantId).counters;
    counters[COUNTER.messagesDropped]++;
    counters[COUNTER.bytesDropped]! += delivery.msg.size;
    const type = delivery.qos === 0 ? 'qos0Dropped' : delivery.qos === 1 ? 'qos1Dropped' : 'qos2Dropped';
    this.emit(type, session.client, () => ({ topic: delivery.msg.topic, reason }));
    if (reason === 'queue-full') {
      this.emit('inboxOverflowed', session.client, () => ({ topic: delivery.msg.topic }));
      session.link?.queueOverflowed();
    } else if (reason === 'queue-bytes' || reason === 'tenant-queue-bytes') {
      // A queued-bytes bound [SEC-MEM-3]: counted apart, and a stall check (MinSendPerSec) like a full queue.
      counters[COUNTER.queueBytesDropped]++;
      session.link?.queueOverflowed();
    }
    if (reason === 'too-large')
      this.emit('oversizePacketDropped', session.client, () => ({ topic: delivery.msg.topic, size: delivery.msg.payload.length }));
  }

  hasRoom(session: Session, resource: 'TotalSessionMemoryBytes' | 'TotalPersistentSessionSpaceBytes'): boolean {
    return this.limits.hasResource(session.client, resource);
  }

  adjustUsage(session: Session, resource: 'TotalSessionMemoryBytes' | 'TotalPersistentSessionSpaceBytes', delta: number): void {
    this.usage.add(session.tenantId, resource, delta);
  }

  watchResends(session: Session): void {
    session.resendWatched = true;
    this.resendWatch.add(session);
    this.resendTimer ??= setInterval(() => this.scanResends(), RESEND_SCAN_MS).unref();
  }

  /**
   * MQTT 3 connections: resend what waited ResendTimeoutSeconds for its acknowledgement, at most
   * MaxResendTimes (then it is given up). A session leaves the watch when nothing is in flight.
   */
  private scanResends(): void {
    const scan = ++this.resendScans;
    for (const session of this.resendWatch) {
      const live = this.limits.liveLimits(session.tenantId);
      if (!session.resendOverdue(scan, Math.ceil(live.resendTimeoutMs / RESEND_SCAN_MS), live.maxResendTimes)) {
        session.resendWatched = false;
        this.resendWatch.delete(session);
      }
    }
    if (this.resendWatch.size === 0 && this.resendTimer !== undefined) {
      clearInterval(this.resendTimer);
      this.resendTimer = undefined;
    }
  }

  confirmed(session: Session, delivery: Delivery | undefined, qos: QoS): void {
    const type = qos === 1 ? 'qos1Confirmed' : 'qos2Confirmed';
    if (!this.events.wants(type)) return;
    if (!this.settings.get(session.tenantId, 'DebugModeEnabled')) return;
    this.emit(type, session.client, { topic: delivery?.msg.topic });
  }

  /**
   * A PUBLISH was written to a subscriber: qos0Pushed/qos1Pushed/qos2Pushed, only for tenants
   * with DebugModeEnabled (like qos1Confirmed). Called only when {@link pushWanted}.
   */
  pushed(client: ClientInfo, d: Delivery, packetId: number, dup: boolean): void {
    const type = d.qos === 0 ? 'qos0Pushed' : d.qos === 1 ? 'qos1Pushed' : 'qos2Pushed';
    if (!this.events.wants(type)) return;
    if (!this.settings.get(client.tenantId, 'DebugModeEnabled')) return;
    this.emit(type, client, {
      topic: d.msg.topic,
      size: d.msg.payload.length,
      packetId: d.qos === 0 ? undefined : packetId,
      dup,
      retain: d.retain,
    });
  }

  deferInflight(write: DeferredWrite): void {
    const list = this.deferred.get(write.session);
    if (list === undefined) this.deferred.set(write.session, [write]);
    else list.push(write);
    this.deferTimer ??= setTimeout(() => this.writeDeferred(), DEFER_INFLIGHT_MS);
  }

  flushDeferred(session: Session): void {
    const list = this.deferred.get(session);
    if (list === undefined) return;
    this.deferred.delete(session);
    this.issueDeferred(session, list);
  }

  /** Write the deferred records the clients have not acknowledged meanwhile, one call per session. */
  private writeDeferred(): void {
    this.deferTimer = undefined;
    const due = this.deferred;
    this.deferred = new Map();
    for (const [session, list] of due) this.issueDeferred(session, list);
  }

  private issueDeferred(session: Session, list: readonly DeferredWrite[]): void {
    const records: InflightRecord[] = [];
    const writes: DeferredWrite[] = [];
    for (const d of list) {
      if (d.state !== 'waiting') continue;
      d.state = 'issued';
      // The stored form is built only for the records that are written.
      records.push({ packetId: d.packetId, phase: 'publish', message: toInboxMessage(d.delivery!) });
      writes.push(d);
    }
    if (records.length === 0) return;
    this.persistence.putInflight(session, records).then(
      () => settleAll(writes, undefined),
      (err: unknown) => {
        this.storageFailed(session, 'inflight put', err);
        settleAll(writes, err);
      },
    );
  }

  /** A storage call of a session failed: counted in the current episode (logged once per episode), reported as `distError`. */
  storageFailed(session: Session, what: string, err: unknown): void {
    this.storageHealth.failed(what, err, session.client);
    this.logger.debug(
      { tenantId: session.tenantId, clientId: session.clientId, what, err: describeError(err) },
      'session storage call failed',
    );
    this.emit('distError', session.client, { what, error: describeError(err) });
  }

  /** A storage call succeeded: how an episode of a storage without `health()` ends. */
  storageSucceeded(): void {
    this.storageHealth.succeeded();
  }

  /** The timer wheel callback of a disconnected session ({@link SessionRegistry.onDeadline}). */
  onDeadline(session: Session, now: number): number {
    // A cluster node whose lease ran out fires no will and ends no session: they are the next owner's.
    if (!this.topology.serving()) return 0;
    return this.sessions.onDeadline(session, now);
  }

  served(key: string): Session | undefined {
    return this.sessions.get(key);
  }

  /** Drop every session and timer (broker stop). */
  close(): void {
    this.gate.close();
    this.storageHealth.close();
    this.limits.close();
    this.redirects.stop();
    if (this.resendTimer !== undefined) clearInterval(this.resendTimer);
    this.resendWatch.clear();
    if (this.deferTimer !== undefined) {
      clearTimeout(this.deferTimer);
      this.writeDeferred();
    }
    this.sessions.close();
  }
}

/** Settle deferred writes that are still issued: resolved, or rejected with `err`. */
function settleAll(writes: readonly DeferredWrite[], err: unknown): void {
  for (const w of writes) {
    if (w.state !== 'issued') continue;
    w.state = 'settled';
    if (err === undefined) w.waiter?.release();
    else w.waiter?.fail(err);
  }
}

function isOnline(session: Session): boolean {
  return session.connected;
}
