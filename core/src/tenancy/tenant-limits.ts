import type { ClientInfo, ResourceType } from '@bifro/spi';
import type { EmitEvent } from '../base/broker-events';
import type { SettingsManager, ThrottlerManager } from '../plugin-host/managers';
import { isSharedFilter, type TopicLimits } from '../routing/topic';
import type { TenantUsage } from './tenant-usage';

/** A tenant's queue policy. */
export interface QueueLimit {
  /** SessionInboxSize: most deliveries queued for one session. */
  readonly maxSize: number;
  /** QoS0DropOldest: drop the oldest queued delivery (true) or the new one (false). */
  readonly dropOldest: boolean;
  /** MaxTenantQueuedBytes: most message bytes queued in memory for the tenant's sessions together (0: no bound). */
  readonly maxTenantBytes: number;
}

/** What subscription accounting reads of a session (the `Session` class, without importing it). */
export interface CountedSubscriber {
  readonly client: ClientInfo;
  readonly tenantId: string;
  readonly expirySeconds: number;
  /** How each subscription was counted in the tenant's usage. */
  readonly countedSubscriptions: Map<string, ResourceType>;
}

/** Settings fixed for a connection at CONNECT (see {@link TenantLimits.connectLimits}). */
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

/** Live per-connection limits (see {@link TenantLimits.liveLimits}). */
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

/**
 * A tenant's limits as the data path reads them: the settings a connection keeps from CONNECT,
 * the live limits (topic, queue, rates) cached per tenant until its settings change, and the
 * throttler's quotas with the subscriptions counted against them. One per broker.
 */
export class TenantLimits {
  private readonly connectLimitsCache = new Map<string, ConnectLimits>();
  private readonly liveLimitsCache = new Map<string, LiveLimits>();
  private readonly unwatchSettings: () => void;

  constructor(
    private readonly settings: SettingsManager,
    private readonly throttler: ThrottlerManager,
    private readonly usage: TenantUsage,
    private readonly emit: EmitEvent,
  ) {
    this.unwatchSettings = settings.onChange((tenantId) => this.invalidate(tenantId));
    // Every negative throttler answer, wherever it was asked (CONNECT, SUBSCRIBE, retain, flow control), is a quota refusal.
    throttler.onRefusal((tenantId, resource) => usage.refused(tenantId, resource));
  }

  /** The tenant's settings changed (all tenants when undefined): live limits go stale, caches are dropped. */
  private invalidate(tenantId: string | undefined): void {
    for (const [tenant, live] of this.liveLimitsCache) if (tenantId === undefined || tenant === tenantId) live.stale = true;
    if (tenantId === undefined) {
      this.connectLimitsCache.clear();
      this.liveLimitsCache.clear();
    } else {
      this.connectLimitsCache.delete(tenantId);
      this.liveLimitsCache.delete(tenantId);
    }
  }

  /** The tenant's topic limits (part of its live limits, cached until its settings change). */
  topicLimits(tenantId: string): TopicLimits {
    return this.liveLimits(tenantId).topic;
  }

  /** The tenant's queue policy: part of its live limits (no allocation per call). */
  queueLimit(tenantId: string): QueueLimit {
    return this.liveLimits(tenantId).queue;
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

  /** Whether the tenant still has a resource; reports `resourceExhausted` when not. */
  hasResource(client: ClientInfo, resource: ResourceType): boolean {
    if (this.throttler.hasResource(client.tenantId, resource)) return true;
    this.emit('resourceExhausted', client, { resource });
    return false;
  }

  /**
   * Count a new subscription in the tenant's usage (shared, persistent or transient) if the
   * throttler still has room for it; false when the quota is exhausted (SUBACK 0x97 / v3 0x80).
   */
  claimSubscription(session: CountedSubscriber, filter: string): boolean {
    const resource = subscriptionResource(filter, session.expirySeconds > 0);
    if (!this.hasResource(session.client, resource)) return false;
    this.usage.add(session.tenantId, resource, 1);
    session.countedSubscriptions.set(filter, resource);
    return true;
  }

  /** A subscription taken out a moment ago comes back (its removal could not be stored): counted again, whatever the quota says now. */
  restoreSubscription(session: CountedSubscriber, filter: string): void {
    if (session.countedSubscriptions.has(filter)) return;
    const resource = subscriptionResource(filter, session.expirySeconds > 0);
    this.usage.add(session.tenantId, resource, 1);
    session.countedSubscriptions.set(filter, resource);
  }

  /** A subscription is gone: take it out of the tenant's usage. */
  releaseSubscription(session: CountedSubscriber, filter: string): void {
    const resource = session.countedSubscriptions.get(filter);
    if (resource === undefined) return;
    session.countedSubscriptions.delete(filter);
    this.usage.add(session.tenantId, resource, -1);
  }

  /** Stop following settings changes (broker stop). */
  close(): void {
    this.unwatchSettings();
  }
}

/** The usage resource a subscription counts against. */
export function subscriptionResource(filter: string, persistent: boolean): ResourceType {
  if (isSharedFilter(filter)) return 'TotalSharedSubscriptions';
  return persistent ? 'TotalPersistentSubscriptions' : 'TotalTransientSubscriptions';
}
