import { inject, injectable } from 'tsyringe';
import type {
  BrokerEvent,
  ClientInfo,
  EventDetailValue,
  EventType,
  InflightRecord,
  QoS,
  ResourceType,
  SessionRecord,
  SettingName,
  SettingValue,
} from '@bifro/spi';
import { EVENT_TYPES, sessionListKey } from '@bifro/spi';
import type { BrokerConfig } from '../runtime/config-types';
import type { Logger } from '../runtime/logger';
import { ConnectionGate } from '../security/connection-gate';
import { isReservedTopic } from '../security/secure-defaults';
import { RUNTIME_TOKENS } from '../runtime/tokens';
import { PLUGIN_TOKENS } from '../plugin-host/tokens';
import type { PluginHost } from '../plugin-host/managers';
import { Dist } from '../routing/dist';
import { pickMember } from '../routing/tenant-dist';
import { isSharedFilter, type TopicLimits } from '../routing/topic';
import { RetainService } from '../retain/retain-service';
import { Message } from '../session/message';
import type { MqttConnection } from './connection';
import {
  Session,
  type DeferredWrite,
  type Delivery,
  type DropReason,
  type QueueLimit,
  type SessionHost,
  type WriteWaiter,
} from '../session/session';
import { SessionPersistence, toInboxMessage, willFromRecord } from '../session/session-persistence';
import type { TimerWheel } from '../session/timer-wheel';
import { COUNTER, resourceIndex, type TenantUsage } from '../tenancy/tenant-usage';
import { describeError } from '../errors';

/** Index of TotalSessionMemoryBytes in a tenant's usage values. */
const SESSION_MEMORY = resourceIndex('TotalSessionMemoryBytes');

const GROUP_OF = new Map<EventType, BrokerEvent['group']>();
for (const [group, types] of Object.entries(EVENT_TYPES)) for (const t of types) GROUP_OF.set(t, group as BrokerEvent['group']);

/** How long a QoS 1 inflight record of a connected persistent session waits for the client's PUBACK before it is written. */
const DEFER_INFLIGHT_MS = 25;

/** Session Expiry Interval meaning "never" (§3.1.2). */
export const NEVER_EXPIRES = 0xffffffff;

// Sessions are keyed by sessionListKey(tenantId, clientId) from @bifro/spi: the same client id in
// two tenants is two sessions, and the key sorts like the storage listing.

/** Settings fixed for a connection at CONNECT (see {@link Engine.connectLimits}). */
export interface ConnectLimits {
  readonly maximumQoS: number;
  readonly retainEnabled: boolean;
  readonly receivingMaximum: number;
  readonly maxUserPayloadBytes: number;
  readonly wildcardSubscriptionEnabled: boolean;
  readonly subscriptionIdentifierEnabled: boolean;
  readonly sharedSubscriptionEnabled: boolean;
  readonly maxTopicAlias: number;
}

/** Live per-connection limits (see {@link Engine.liveLimits}). */
export interface LiveLimits {
  /** Set when the tenant's settings changed: fetch a fresh object. */
  stale: boolean;
  readonly msgPubPerSec: number;
  readonly inBoundBandWidth: number;
  readonly outBoundBandWidth: number;
  readonly maxResendTimes: number;
  readonly resendTimeoutMs: number;
  /** MaxTopicLength, MaxTopicLevels, MaxTopicLevelLength. */
  readonly topic: TopicLimits;
  /** SessionInboxSize, QoS0DropOldest, MaxTenantQueuedBytes. */
  readonly queue: QueueLimit;
}

/** Connected clients asked about in one go by the periodic redirect check before it yields to I/O. */
const REDIRECT_CHECK_SLICE = 1000;

/** How often MQTT 3 deliveries are checked for resends (ResendTimeoutSeconds is at least 1 s). */
const RESEND_SCAN_MS = 1000;

/**
 * The broker's engine: sessions, the per-tenant subscription index, retained messages and the
 * publish path (match → per-subscriber delivery), with the plugin guards it consults. One per
 * broker, built by the container at boot; connections reach it through their services.
 */
@injectable()
export class Engine implements SessionHost {
  readonly sessions = new Map<string, Session>();
  /** Open connections (the server closes them at shutdown). */
  readonly connections = new Set<MqttConnection>();
  readonly dist = new Dist<Session>();
  readonly retain: RetainService;
  readonly persistence: SessionPersistence;
  readonly auth: PluginHost['auth'];
  readonly acl: PluginHost['acl'];
  readonly balancer: PluginHost['balancer'];
  readonly events: PluginHost['events'];
  readonly settings: PluginHost['settings'];
  readonly throttler: PluginHost['throttler'];
  /** Set when the broker is shutting down: connections closing now are the server's doing. */
  shuttingDown = false;
  /** Per-address connection rate and flapping bans (security.connectionRate, security.flapping). */
  readonly gate: ConnectionGate;
  /** Whether some collector wants qos0Pushed, qos1Pushed or qos2Pushed (collectors are fixed at boot). */
  readonly pushWanted: boolean;
  private readonly connectLimitsCache = new Map<string, ConnectLimits>();
  private readonly liveLimitsCache = new Map<string, LiveLimits>();
  /** Tenants whose retained totals were read from storage into their usage. */
  private readonly retainedTotalsLoaded = new Set<string>();
  /** Inflight records waiting to be written (see deferInflight), and the timer that writes them. */
  private deferred: DeferredWrite[] = [];
  private deferTimer: NodeJS.Timeout | undefined;
  /** Sessions of MQTT 3 connections with deliveries in flight, scanned for resends. */
  private readonly resendWatch = new Set<Session>();
  private resendTimer: NodeJS.Timeout | undefined;
  /** The periodic redirect check (mqtt.redirectCheckIntervalMs), and whether a sweep is running. */
  private redirectTimer: NodeJS.Timeout | undefined;
  private redirectSweep = false;
  /** Resend scans so far: inflight entries remember a scan number, never a time. */
  private resendScans = 0;
  private readonly unwatchSettings: () => void;

  constructor(
    @inject(RUNTIME_TOKENS.Config) readonly config: BrokerConfig,
    @inject(RUNTIME_TOKENS.Logger) readonly logger: Logger,
    @inject(RUNTIME_TOKENS.TimerWheel) readonly wheel: TimerWheel,
    @inject(RUNTIME_TOKENS.TenantUsage) readonly usage: TenantUsage,
    @inject(PLUGIN_TOKENS.Host) host: PluginHost,
  ) {
    this.auth = host.auth;
    this.acl = host.acl;
    this.balancer = host.balancer;
    this.events = host.events;
    this.settings = host.settings;
    this.throttler = host.throttler;
    this.gate = new ConnectionGate(config.security, logger, (type, client, detail) => this.emit(type, client, detail));
    this.pushWanted = this.events.wants('qos0Pushed') || this.events.wants('qos1Pushed') || this.events.wants('qos2Pushed');
    this.retain = new RetainService(host.storage);
    this.persistence = new SessionPersistence(host.storage);
    this.unwatchSettings = this.settings.onChange((tenantId) => {
      for (const [tenant, live] of this.liveLimitsCache) if (tenantId === undefined || tenant === tenantId) live.stale = true;
      if (tenantId === undefined) {
        this.connectLimitsCache.clear();
        this.liveLimitsCache.clear();
      } else {
        this.connectLimitsCache.delete(tenantId);
        this.liveLimitsCache.delete(tenantId);
      }
    });
  }

  /** A tenant setting (cached by the settings manager). */
  setting<S extends SettingName>(tenantId: string, name: S): SettingValue<S> {
    return this.settings.get(tenantId, name);
  }

  /** The tenant's topic limits (part of its live limits, cached until its settings change). */
  topicLimits(tenantId: string): TopicLimits {
    return this.liveLimits(tenantId).topic;
  }

  /**
   * The settings a connection takes at CONNECT and keeps (D21): what CONNACK announced must hold
   * for the whole connection, or a compliant client would be disconnected for using it. One
   * shared object per tenant and settings version.
   */
  connectLimits(tenantId: string): ConnectLimits {
    let limits = this.connectLimitsCache.get(tenantId);
    if (limits === undefined) {
      const s = this.settings;
      limits = {
        maximumQoS: s.get(tenantId, 'MaximumQoS'),
        retainEnabled: s.get(tenantId, 'RetainEnabled'),
        receivingMaximum: s.get(tenantId, 'ReceivingMaximum'),
        maxUserPayloadBytes: s.get(tenantId, 'MaxUserPayloadBytes'),
        wildcardSubscriptionEnabled: s.get(tenantId, 'WildcardSubscriptionEnabled'),
        subscriptionIdentifierEnabled: s.get(tenantId, 'SubscriptionIdentifierEnabled'),
        sharedSubscriptionEnabled: s.get(tenantId, 'SharedSubscriptionEnabled'),
        maxTopicAlias: s.get(tenantId, 'MaxTopicAlias'),
      };
      this.connectLimitsCache.set(tenantId, limits);
    }
    return limits;
  }

  /**
   * Per-connection limits that apply to live connections: a connection keeps the object and
   * fetches a fresh one when `stale` is set by a settings change, so hot paths read fields, not
   * the settings cache.
   */
  liveLimits(tenantId: string): LiveLimits {
    let limits = this.liveLimitsCache.get(tenantId);
    if (limits === undefined) {
      const s = this.settings;
      limits = {
        stale: false,
        msgPubPerSec: s.get(tenantId, 'MsgPubPerSec'),
        inBoundBandWidth: s.get(tenantId, 'InBoundBandWidth'),
        outBoundBandWidth: s.get(tenantId, 'OutBoundBandWidth'),
        maxResendTimes: s.get(tenantId, 'MaxResendTimes'),
        resendTimeoutMs: s.get(tenantId, 'ResendTimeoutSeconds') * 1000,
        topic: {
          maxLength: s.get(tenantId, 'MaxTopicLength'),
          maxLevels: s.get(tenantId, 'MaxTopicLevels'),
          maxLevelLength: s.get(tenantId, 'MaxTopicLevelLength'),
        },
        queue: {
          maxSize: s.get(tenantId, 'SessionInboxSize'),
          dropOldest: s.get(tenantId, 'QoS0DropOldest'),
          maxTenantBytes: s.get(tenantId, 'MaxTenantQueuedBytes'),
        },
      };
      this.liveLimitsCache.set(tenantId, limits);
    }
    return limits;
  }

  /**
   * Report an event if some collector wants its type. Build `detail` lazily: pass a function on
   * hot paths. `client` is who the event is about (a ClientInfo, or what is known of the client).
   */
  emit(
    type: EventType,
    client: { readonly tenantId: string; readonly clientId?: string; readonly userId?: string } | undefined,
    detail: Readonly<Record<string, EventDetailValue>> | (() => Readonly<Record<string, EventDetailValue>>) = {},
  ): void {
    if (!this.events.wants(type)) return;
    this.events.report({
      type,
      group: GROUP_OF.get(type)!,
      time: Date.now(),
      tenantId: client?.tenantId,
      clientId: client?.clientId,
      userId: client?.userId,
      detail: typeof detail === 'function' ? detail() : detail,
    });
  }

  /**
   * Deliver a message to every matching subscription of the tenant: one delivery per session for
   * overlapping subscriptions at the highest QoS with all subscription ids [MQTT-3.3.4-2],
   * [MQTT-3.3.4-3]; one member per shared group. Returns how many deliveries were made.
   */
  publish(tenantId: string, msg: Message, waiter?: WriteWaiter): number {
    const tenant = this.dist.peek(tenantId);
    if (tenant === undefined) return 0;
    const match = tenant.match(msg.topic);
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
    const maxGroups = match.groups.length === 0 ? 0 : this.settings.get(tenantId, 'MaxGroupFanout');
    for (let i = 0; i < match.groups.length && i < maxGroups; i++) {
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

  /** How many offline persistent sessions one message may be queued for (MaxPersistentFanout and MaxPersistentFanoutBytes). */
  private persistentFanoutLimit(tenantId: string, msg: Message): number {
    const bySize = Math.floor(this.settings.get(tenantId, 'MaxPersistentFanoutBytes') / Math.max(1, msg.size));
    return Math.min(this.settings.get(tenantId, 'MaxPersistentFanout'), bySize);
  }

  /** Store or clear a retained message; failures are logged and reported, the live delivery is unaffected. Resolves when stored. */
  retainMessage(client: ClientInfo, msg: Message): Promise<void> {
    const allowed = msg.payload.length === 0 || this.retainAllowed(client, msg);
    if (allowed === true) return this.storeRetained(client, msg);
    if (allowed === false) return Promise.resolve();
    // Decided asynchronously (a quota lookup): subscriptions made meanwhile still wait for it.
    const decided = allowed.then((ok) => (ok ? this.storeRetained(client, msg) : undefined));
    this.retain.track(client.tenantId, decided);
    return decided;
  }

  private storeRetained(client: ClientInfo, msg: Message): Promise<void> {
    const tenantId = client.tenantId;
    return this.retain.apply(tenantId, msg).then(
      (what) => {
        this.emit(what === 'retained' ? 'msgRetained' : 'retainMsgCleared', client, { topic: msg.topic, size: msg.payload.length });
        this.refreshRetainedTotals(tenantId);
      },
      (err: unknown) => {
        this.logger.error({ tenantId, topic: msg.topic, err: describeError(err) }, 'retained message not stored');
        this.emit('msgRetainedError', client, { topic: msg.topic, error: describeError(err) });
        throw err;
      },
    );
  }

  /**
   * The tenant's retained quotas (docs/tenancy.md § Usage and quotas): over them the message is not retained but
   * still delivered. The rates are checked at once; when the topics or bytes gauge is at its
   * quota, replacing a topic that already has a retained message stays allowed for the topics
   * quota (a lookup decides), not for the bytes quota.
   */
  private retainAllowed(client: ClientInfo, msg: Message): boolean | Promise<boolean> {
    const tenantId = client.tenantId;
    const now = this.wheel.now;
    this.usage.count(tenantId, 'TotalRetainMessagesPerSecond', 1, now);
    this.usage.count(tenantId, 'TotalRetainBytesPerSecond', msg.size, now);
    if (!this.hasResource(client, 'TotalRetainMessagesPerSecond') || !this.hasResource(client, 'TotalRetainBytesPerSecond')) return false;
    if (!this.retainedTotalsLoaded.has(tenantId)) {
      return this.loadRetainedTotals(tenantId).then(() => this.retainGaugesAllow(client, msg));
    }
    return this.retainGaugesAllow(client, msg);
  }

  private retainGaugesAllow(client: ClientInfo, msg: Message): boolean | Promise<boolean> {
    if (!this.hasResource(client, 'TotalRetainedBytes')) return false;
    if (this.throttler.hasResource(client.tenantId, 'TotalRetainTopics')) return true;
    return this.retain.has(client.tenantId, msg.topic).then((replacing) => {
      if (!replacing) this.emit('resourceExhausted', client, { resource: 'TotalRetainTopics' });
      return replacing;
    });
  }

  private loadRetainedTotals(tenantId: string): Promise<void> {
    return this.retain.totals(tenantId).then(
      (t) => {
        this.retainedTotalsLoaded.add(tenantId);
        this.usage.set(tenantId, 'TotalRetainTopics', t.topics);
        this.usage.set(tenantId, 'TotalRetainedBytes', t.bytes);
      },
      (err: unknown) => this.logger.warn({ tenantId, err: describeError(err) }, 'retained totals not read'),
    );
  }

  private refreshRetainedTotals(tenantId: string): void {
    void this.loadRetainedTotals(tenantId);
  }

  // ---- tenant usage and quotas ----

  /**
   * Count a new subscription in the tenant's usage (shared, persistent or transient) if the
   * throttler still has room for it; false when the quota is exhausted (SUBACK 0x97 / v3 0x80).
   */
  claimSubscription(session: Session, filter: string): boolean {
    const resource = subscriptionResource(filter, session.expirySeconds > 0);
    if (!this.hasResource(session.client, resource)) return false;
    this.usage.add(session.tenantId, resource, 1);
    session.countedSubscriptions.set(filter, resource);
    return true;
  }

  /** A subscription is gone: take it out of the tenant's usage. */
  releaseSubscription(session: Session, filter: string): void {
    const resource = session.countedSubscriptions.get(filter);
    if (resource === undefined) return;
    session.countedSubscriptions.delete(filter);
    this.usage.add(session.tenantId, resource, -1);
  }

  /** Whether the tenant still has a resource; reports `resourceExhausted` when not. */
  hasResource(client: ClientInfo, resource: ResourceType): boolean {
    if (this.throttler.hasResource(client.tenantId, resource)) return true;
    this.emit('resourceExhausted', client, { resource });
    return false;
  }

  // ---- sessions ----

  createSession(client: ClientInfo, expirySeconds: number): Session {
    const session = new Session(
      sessionListKey(client.tenantId, client.clientId),
      client,
      client.protocolVersion,
      expirySeconds,
      Date.now(),
      this,
    );
    this.sessions.set(session.key, session);
    this.usage.bump(client.tenantId, COUNTER.sessions, 1);
    this.emit('sessionStarted', client, {});
    return session;
  }

  /**
   * The session's connection went away. A will is published now, later (will delay) or not at all
   * (normal DISCONNECT [MQTT-3.1.2-10]); a session with expiry 0 ends now, others are kept until
   * their expiry [MQTT-3.1.2-23].
   */
  sessionDisconnected(session: Session, publishWill: boolean): void {
    session.detach();
    if (!publishWill) session.will = undefined;
    const now = Date.now();
    session.disconnectedAt = now;
    if (session.will !== undefined) {
      const delay = Math.min(session.will.delaySeconds, session.expirySeconds);
      if (delay === 0) this.fireWill(session);
      else session.willAt = now + delay * 1000;
    }
    // Saved after a will without delay went out (it is then no longer in the record).
    if (session.stored && session.expirySeconds > 0) this.saveSession(session, now).catch(() => undefined);
    if (session.expirySeconds === 0) {
      this.endSession(session);
      return;
    }
    session.expireAt = session.expirySeconds === NEVER_EXPIRES ? 0 : now + session.expirySeconds * 1000;
    this.scheduleDeadline(session);
  }

  /** A connection takes the session back: cancel a pending will [MQTT-3.1.3-9] and the expiry. */
  sessionResumed(session: Session): void {
    session.willAt = 0;
    session.expireAt = 0;
    this.wheel.cancel(session);
  }

  /** End a session: subscriptions removed, state dropped, a pending will published [MQTT-3.1.3-9]. */
  endSession(session: Session): void {
    if (this.sessions.get(session.key) !== session) return;
    this.sessions.delete(session.key);
    this.usage.bump(session.tenantId, COUNTER.sessions, -1);
    this.wheel.cancel(session);
    if (session.willAt !== 0) this.fireWill(session);
    const tenant = this.dist.peek(session.tenantId);
    if (tenant !== undefined) {
      tenant.unsubscribeAll(session.clientId);
      this.dist.dropIfEmpty(session.tenantId);
    }
    for (const filter of session.countedFilters()) this.releaseSubscription(session, filter);
    session.dropSubscriptions();
    session.clearState();
    if (session.stored) {
      session.stored = false;
      this.usage.add(session.tenantId, 'TotalPersistentSessions', -1);
      this.persistence.deleteSession(session).catch((err: unknown) => this.storageFailed(session, 'session delete', err));
    }
    this.emit('sessionStopped', session.client, {});
  }

  fireWill(session: Session): void {
    const will = session.will;
    session.will = undefined;
    session.willAt = 0;
    if (will === undefined) return;
    if (this.shuttingDown && this.settings.get(session.tenantId, 'NoLWTWhenServerShuttingDown')) return;
    // The will's Message Expiry Interval counts from its publication.
    const w = will.message;
    const now = Date.now();
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
    const allowed = this.acl.check(session.client, { type: 'publish', topic: msg.topic, qos: msg.qos, retain: msg.retain });
    if (allowed instanceof Promise) void allowed.then((ok) => this.distributeWill(session, msg, ok));
    else this.distributeWill(session, msg, allowed);
  }

  private distributeWill(session: Session, msg: Message, allowed: boolean): void {
    if (!allowed || isReservedTopic(msg.topic)) {
      this.emit('pubActionDisallow', session.client, { topic: msg.topic, qos: msg.qos, will: true });
      return;
    }
    try {
      if (msg.retain) this.retainMessage(session.client, msg).catch(() => undefined);
      this.publish(session.tenantId, msg);
      this.emit('willDistributed', session.client, { topic: msg.topic });
    } catch (err) {
      this.logger.error({ clientId: session.clientId, err: describeError(err) }, 'will not distributed');
      this.emit('willDistError', session.client, { topic: msg.topic });
    }
  }

  private scheduleDeadline(session: Session): void {
    const next = nextDeadline(session);
    if (next > 0) this.wheel.schedule(session, next);
  }

  // ---- SessionHost ----

  /** The tenant's queue policy: part of its live limits (no allocation per call). */
  queueLimit(tenantId: string): QueueLimit {
    return this.liveLimits(tenantId).queue;
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
    return this.hasResource(session.client, resource);
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
      const live = this.liveLimits(session.tenantId);
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
    this.deferred.push(write);
    this.deferTimer ??= setTimeout(() => this.writeDeferred(), DEFER_INFLIGHT_MS);
  }

  /** Write the deferred records the clients have not acknowledged meanwhile, one call per session. */
  private writeDeferred(): void {
    this.deferTimer = undefined;
    const due = this.deferred;
    this.deferred = [];
    const bySession = new Map<Session, { records: InflightRecord[]; writes: DeferredWrite[] }>();
    for (const d of due) {
      if (d.state !== 'waiting') continue;
      d.state = 'issued';
      let group = bySession.get(d.session);
      if (group === undefined) bySession.set(d.session, (group = { records: [], writes: [] }));
      // The stored form is built only for the records that are written.
      group.records.push({ packetId: d.packetId, phase: 'publish', message: toInboxMessage(d.delivery!) });
      group.writes.push(d);
    }
    for (const [session, group] of bySession) {
      this.persistence.putInflight(session, group.records).then(
        () => settleAll(group.writes, undefined),
        (err: unknown) => {
          this.storageFailed(session, 'inflight put', err);
          settleAll(group.writes, err);
        },
      );
    }
  }

  storageFailed(session: Session, what: string, err: unknown): void {
    this.logger.error({ tenantId: session.tenantId, clientId: session.clientId, what, err: describeError(err) }, 'session storage failed');
    this.emit('distError', session.client, { what, error: describeError(err) });
  }

  /** Write a persistent session's record (subscriptions, will, expiry); `disconnectedAt` when it is offline. */
  saveSession(session: Session, disconnectedAt?: number): Promise<void> {
    if (!session.stored) this.usage.add(session.tenantId, 'TotalPersistentSessions', 1);
    session.stored = true;
    return this.persistence.saveRecord(session, disconnectedAt).catch((err: unknown) => {
      this.storageFailed(session, 'session save', err);
      throw err;
    });
  }

  /**
   * Bring back every stored session at boot: subscriptions into the index, will and expiry
   * deadlines from the record. A session that was connected when the broker stopped counts as
   * disconnected abnormally now (its will is due after its delay). Wills and expiries already due
   * are handled after every session is back, so a will reaches every restored subscriber.
   */
  async restore(): Promise<number> {
    const now = Date.now();
    const restored: Session[] = [];
    let after: string | undefined;
    for (;;) {
      const page: SessionRecord[] = await this.persistence.storage.sessions.list({ after, limit: 1000 });
      if (page.length === 0) break;
      for (const record of page) restored.push(this.restoreSession(record, now));
      const last = page[page.length - 1]!;
      after = sessionListKey(last.tenantId, last.clientId);
      if (page.length < 1000) break;
    }
    for (const session of restored) {
      const next = this.onDeadline(session, now);
      if (next > 0) this.wheel.schedule(session, next);
    }
    return restored.length;
  }

  private restoreSession(r: SessionRecord, now: number): Session {
    const client: ClientInfo = {
      tenantId: r.tenantId,
      userId: r.userId,
      clientId: r.clientId,
      protocolVersion: r.protocolVersion,
      remoteAddress: '',
      remotePort: 0,
      listener: '',
      attrs: {},
    };
    const session = new Session(sessionListKey(r.tenantId, r.clientId), client, r.protocolVersion, r.expirySeconds, r.createdAt, this);
    session.stored = true;
    session.loaded = false;
    const tenant = this.dist.tenant(r.tenantId);
    this.usage.add(r.tenantId, 'TotalPersistentSessions', 1);
    for (const sub of r.subscriptions) {
      session.subscriptions.set(sub.filter, sub);
      tenant.subscribe({ subscriber: session, clientId: r.clientId, filter: sub.filter, options: sub });
      const resource = subscriptionResource(sub.filter, true);
      this.usage.add(r.tenantId, resource, 1);
      session.countedSubscriptions.set(sub.filter, resource);
    }
    const wasConnected = r.disconnectedAt === undefined;
    const since = r.disconnectedAt ?? now;
    session.disconnectedAt = since;
    if (r.will !== undefined) {
      session.will = willFromRecord(r.will, r.clientId);
      session.willAt = since + Math.min(r.will.delaySeconds, r.expirySeconds) * 1000;
    }
    session.expireAt = r.expirySeconds === NEVER_EXPIRES ? 0 : since + r.expirySeconds * 1000;
    this.sessions.set(session.key, session);
    this.usage.bump(r.tenantId, COUNTER.sessions, 1);
    if (wasConnected) this.saveSession(session, now).catch(() => undefined);
    return session;
  }

  /**
   * Ask the client balancer about every connected client every `mqtt.redirectCheckIntervalMs`
   * (docs/mqtt.md § Enhanced authentication and redirect); a client it moves is disconnected with v5
   * 0x9C / 0x9D and the server reference (a v3 client is just disconnected).
   */
  startRedirectChecks(): void {
    const every = this.config.mqtt.redirectCheckIntervalMs;
    if (every === 0 || this.redirectTimer !== undefined) return;
    this.redirectTimer = setInterval(() => void this.checkRedirects(), every);
    this.redirectTimer.unref();
  }

  /** One sweep over the connected clients; yields to I/O every REDIRECT_CHECK_SLICE clients. */
  private async checkRedirects(): Promise<void> {
    if (this.redirectSweep) return;
    this.redirectSweep = true;
    try {
      let checked = 0;
      for (const conn of [...this.connections]) {
        const client = conn.client;
        if (conn.state !== 'connected' || client === undefined) continue;
        const answer = this.balancer.needRedirect(client);
        const decision = answer instanceof Promise ? await answer : answer;
        if (decision.type === 'redirect') conn.redirect(decision.permanent, decision.serverReference);
        if (++checked % REDIRECT_CHECK_SLICE === 0) await new Promise<void>((resolve) => setImmediate(resolve));
      }
    } catch (err) {
      this.logger.warn({ err: describeError(err) }, 'redirect check failed');
    } finally {
      this.redirectSweep = false;
    }
  }

  /** Drop every session and timer (broker stop). */
  close(): void {
    this.unwatchSettings();
    if (this.redirectTimer !== undefined) clearInterval(this.redirectTimer);
    if (this.resendTimer !== undefined) clearInterval(this.resendTimer);
    this.resendWatch.clear();
    if (this.deferTimer !== undefined) {
      clearTimeout(this.deferTimer);
      this.writeDeferred();
    }
    for (const session of this.sessions.values()) this.wheel.cancel(session);
    this.sessions.clear();
  }

  /** The timer wheel callback of a disconnected session: fire a due will, end an expired session. */
  onDeadline(session: Session, now: number): number {
    if (session.connected) return 0;
    if (session.willAt !== 0 && now >= session.willAt) {
      this.fireWill(session);
      // The will is gone from the record too, so a restart does not publish it again.
      if (session.stored && this.sessions.get(session.key) === session)
        this.saveSession(session, session.disconnectedAt).catch(() => undefined);
    }
    if (session.expireAt !== 0 && now >= session.expireAt) {
      this.endSession(session);
      return 0;
    }
    return nextDeadline(session);
  }
}

function nextDeadline(session: Session): number {
  const a = session.willAt;
  const b = session.expireAt;
  if (a === 0) return b;
  if (b === 0) return a;
  return Math.min(a, b);
}

/** The usage resource a subscription counts against. */
function subscriptionResource(filter: string, persistent: boolean): ResourceType {
  if (isSharedFilter(filter)) return 'TotalSharedSubscriptions';
  return persistent ? 'TotalPersistentSubscriptions' : 'TotalTransientSubscriptions';
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
