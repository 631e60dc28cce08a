import type { QoS, SubscriptionRecord } from '@bifro/spi';
import { isSharedFilter } from '../routing/topic';
import type { Message } from '../session/message';
import type { Session } from '../session/session';
import type { Engine } from './engine';

/**
 * Adding and removing a session's subscriptions, once the filter was validated and allowed: what
 * the SUBSCRIBE and UNSUBSCRIBE handlers (protocol/handlers) and the admin API's subscribe on
 * behalf of a session share. The limits of the inbox and the tenant, the index, the usage
 * counted, the record stored and the retained messages sent by Retain Handling live here once.
 */

/** A subscription added to a session (see {@link addSubscription}). */
export interface GrantedSubscription {
  readonly record: SubscriptionRecord;
  /** No subscription with this filter existed (one that did is replaced [MQTT-3.8.4-3]). */
  readonly isNew: boolean;
  readonly shared: boolean;
}

/**
 * Why a subscription was not added: `inbox-full` (MaxTopicFiltersPerInbox), `quota` (the
 * tenant's subscription quota), `group-full` (MaxSharedGroupMembers), `invalid-filter` (the
 * index refused the filter).
 */
export type SubscriptionRefusal = 'inbox-full' | 'quota' | 'group-full' | 'invalid-filter';

/** The tenant settings one SUBSCRIBE reads once for all its filters. */
export interface SubscribeLimits {
  /** MaxTopicFiltersPerInbox. */
  readonly maxFilters: number;
  /** MaxSharedGroupMembers. */
  readonly maxGroupMembers: number;
}

export function subscribeLimits(engine: Engine, tenantId: string): SubscribeLimits {
  return {
    maxFilters: engine.setting(tenantId, 'MaxTopicFiltersPerInbox'),
    maxGroupMembers: engine.setting(tenantId, 'MaxSharedGroupMembers'),
  };
}

/**
 * Add (or replace) a subscription of `session`: within the inbox's filter limit and the tenant's
 * subscription quota, into the tenant's index, then into the session. Live deliveries to the
 * session wait from now until the subscription's retained messages went out ({@link sendRetained})
 * when it wants them. Nothing is left behind when it is refused.
 */
export function addSubscription(
  engine: Engine,
  session: Session,
  record: SubscriptionRecord,
  limits: SubscribeLimits,
): GrantedSubscription | SubscriptionRefusal {
  const filter = record.filter;
  const isNew = !session.subscriptions.has(filter);
  if (isNew && session.subscriptions.size >= limits.maxFilters) return 'inbox-full';
  // The tenant's subscription quota (docs/tenancy.md § Usage and quotas).
  if (isNew && !engine.limits.claimSubscription(session, filter)) return 'quota';
  const result = engine.router.addRoute(
    session.tenantId,
    { subscriber: session, clientId: session.clientId, filter, options: record },
    { maxGroupMembers: limits.maxGroupMembers },
  );
  if (result.rejected !== undefined) {
    if (isNew) engine.limits.releaseSubscription(session, filter);
    return result.rejected === 'group-full' ? 'group-full' : 'invalid-filter';
  }
  session.subscriptions.set(filter, record);
  const g: GrantedSubscription = { record, isNew, shared: isSharedFilter(filter) };
  if (wantsRetained(g)) session.holdForRetained();
  return g;
}

/**
 * A persistent session's subscriptions are on disk before the client (or the API caller) is told
 * so: store the record; when it cannot be stored, take the new subscriptions back (the held
 * retained lookups released) and reject.
 */
export function storeSubscriptions(engine: Engine, session: Session, granted: readonly GrantedSubscription[]): Promise<void> {
  return engine.sessions.save(session).catch((err: unknown) => {
    for (const g of granted) {
      if (wantsRetained(g)) session.releaseRetained([]);
      if (g.isNew) {
        session.subscriptions.delete(g.record.filter);
        engine.router.removeRoute(session.tenantId, session.clientId, g.record.filter);
        engine.limits.releaseSubscription(session, g.record.filter);
      }
    }
    throw err;
  });
}

/** Retain Handling 2: never; 1: only for a new subscription (v5 §3.8.3.1); shared subscriptions: never (§4.8.2). */
export function wantsRetained(g: GrantedSubscription): boolean {
  const r = g.record;
  return !g.shared && r.retainHandling !== 2 && (r.retainHandling !== 1 || g.isNew);
}

/**
 * Send a subscription's matching retained messages [MQTT-3.3.1-9] (call only when
 * {@link wantsRetained}: the session holds its live deliveries for them), at most
 * RetainMessageMatchLimit, within TotalRetainMatchPerSecond.
 */
export function sendRetained(engine: Engine, session: Session, g: GrantedSubscription): void {
  const r = g.record;
  const client = session.client;
  const limit = engine.setting(client.tenantId, 'RetainMessageMatchLimit');
  // TotalRetainMatchPerSecond: past it the subscription is made, its retained messages are not sent.
  if (!engine.limits.hasResource(client, 'TotalRetainMatchPerSecond')) {
    session.releaseRetained([]);
    return;
  }
  engine.usage.count(client.tenantId, 'TotalRetainMatchPerSecond', 1, engine.wheel.now);
  engine.retain.match(client.tenantId, r.filter, limit).then(
    (messages: Message[]) => {
      if (messages.length > 0) engine.emit('retainMsgMatched', client, { filter: r.filter, count: messages.length });
      const ids = r.subscriptionId === undefined ? undefined : [r.subscriptionId];
      // Retained messages sent on subscribe carry RETAIN 1 [MQTT-3.3.1-8].
      session.releaseRetained(
        messages.map((msg) => ({ msg, qos: (r.qos < msg.qos ? r.qos : msg.qos) as QoS, retain: true, subscriptionIds: ids })),
      );
    },
    (err: unknown) => {
      engine.logger.error({ filter: r.filter, err: String(err) }, 'retained match failed');
      session.releaseRetained([]);
    },
  );
}

/**
 * Remove one subscription of `session` (the filter compared character by character
 * [MQTT-3.10.4-1]): out of the index and the tenant's usage. Returns the record it had, undefined
 * when none existed. The caller stores a persistent session's record ({@link storeRemovals}).
 */
export function removeSubscription(engine: Engine, session: Session, filter: string): SubscriptionRecord | undefined {
  const record = session.subscriptions.get(filter);
  session.subscriptions.delete(filter);
  engine.router.removeRoute(session.tenantId, session.clientId, filter);
  engine.limits.releaseSubscription(session, filter);
  return record;
}

/**
 * A persistent session's removed subscriptions are gone from disk before the client is told so:
 * store the record; when it cannot be stored, put the subscriptions back (index, usage, session),
 * so memory keeps matching the stored record, and reject.
 */
export function storeRemovals(engine: Engine, session: Session, removed: readonly SubscriptionRecord[]): Promise<void> {
  return engine.sessions.save(session).catch((err: unknown) => {
    for (const record of removed) {
      if (session.subscriptions.has(record.filter)) continue; // subscribed again meanwhile
      engine.router.addRoute(session.tenantId, { subscriber: session, clientId: session.clientId, filter: record.filter, options: record });
      engine.limits.restoreSubscription(session, record.filter);
      session.subscriptions.set(record.filter, record);
    }
    throw err;
  });
}
