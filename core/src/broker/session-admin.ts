import type { QoS, SubscriptionRecord } from '@bifro/spi';
import { RC } from '../codec/reason-codes';
import { checkSubscription, hasWildcard } from '../routing/topic';
import type { Session } from '../session/session';
import type { Engine } from './engine';
import {
  addSubscription,
  removeSubscription,
  storeRemovals,
  sendRetained,
  storeSubscriptions,
  subscribeLimits,
  wantsRetained,
  type SubscriptionRefusal,
} from './subscriptions';

/**
 * What an operator does to sessions (the admin API, docs/api.md § Sessions): kick a client (with
 * an optional redirect), end sessions, subscribe and unsubscribe on a session's behalf. The
 * session machinery is the broker's own: a kick is a server-side close like any other, a
 * subscription goes through broker/subscriptions.ts like a SUBSCRIBE.
 */

/** Kicked clients closed in one go before yielding to I/O (a tenant kick may close many). */
const KICK_SLICE = 1000;

/** A v5 redirect: DISCONNECT 0x9D (permanent) or 0x9C with the Server Reference. */
export interface KickRedirect {
  readonly permanent: boolean;
  readonly serverReference: string;
}

export interface KickOptions {
  readonly redirect?: KickRedirect;
  /** Also end the session (its subscriptions, inbox and stored record). */
  readonly discard?: boolean;
  /** Who kicked (the API token's name), for the event. */
  readonly by: string;
}

/** What a kick did. */
export interface KickOutcome {
  /** A live connection was closed. */
  readonly disconnected: boolean;
  /** The session is gone (discarded, or transient: it ends with its connection). */
  readonly sessionEnded: boolean;
}

/**
 * A session's live connection as an operator closes it. The connection attached to a session is
 * an MqttConnection, which has these members (like the registry's takeover, which closes it too).
 */
interface KickedConnection {
  readonly state: string;
  closeCause: unknown;
  disconnect(reasonCode: number, reasonString?: string, serverReference?: string): void;
}

/** What the admin API shows of a session's live connection (the MqttConnection attached to it). */
export interface LiveConnectionInfo {
  /** The client's Receive Maximum: most QoS 1/2 deliveries in flight at once. */
  readonly receiveMaximum: number;
  /** Keep alive agreed at CONNECT, seconds. */
  readonly keepAlive: number;
}

export function liveConnectionInfo(session: Session): LiveConnectionInfo | undefined {
  const link = session.link as (LiveConnectionInfo & { readonly keepAlive?: number }) | undefined;
  if (link === undefined) return undefined;
  return { receiveMaximum: link.receiveMaximum, keepAlive: link.keepAlive ?? 0 };
}

/**
 * Kick a session's client: v5 DISCONNECT 0x98 Administrative action, or 0x9C / 0x9D with the
 * Server Reference for a redirect; a v3 client is just closed. The close is abnormal for the
 * client, so its will is published like after a network drop (after its Will Delay, cancelled
 * by a reconnect within it [MQTT-3.1.3-9]); with `discard` the session ends too and a will still
 * pending is published now (as EMQX does on a kick). Without `discard` a persistent session is
 * kept for its expiry, a transient one ends with its connection.
 */
export function kickSession(engine: Engine, session: Session, opts: KickOptions): KickOutcome {
  const conn = session.link as KickedConnection | undefined;
  let disconnected = false;
  if (conn !== undefined && conn.state === 'connected') {
    const redirect = opts.redirect;
    // The close is reported here, once: the connection reports no disconnect event of its own.
    conn.closeCause = 'reported';
    engine.emit('kicked', session.client, {
      remoteAddress: session.client.remoteAddress,
      reason: 'admin api',
      by: opts.by,
      serverReference: redirect?.serverReference,
      permanent: redirect?.permanent,
    });
    if (redirect === undefined) conn.disconnect(RC.AdministrativeAction);
    else conn.disconnect(redirect.permanent ? RC.ServerMoved : RC.UseAnotherServer, undefined, redirect.serverReference);
    disconnected = true;
  }
  if (opts.discard === true) engine.sessions.end(session);
  return { disconnected, sessionEnded: engine.sessions.get(session.key) !== session };
}

/**
 * Kick every connected client of a tenant, or of one user in it: the tenant's sessions are
 * walked once (O(sessions of the tenant)), the connected ones closed KICK_SLICE at a time with a
 * turn of the event loop between slices. Resolves with how many were closed.
 */
export async function kickClients(
  engine: Engine,
  tenantId: string,
  userId: string | undefined,
  opts: Omit<KickOptions, 'discard'>,
): Promise<number> {
  const targets: Session[] = [];
  for (const s of engine.sessions.tenantSessions(tenantId))
    if (s.connected && (userId === undefined || s.client.userId === userId)) targets.push(s);
  let kicked = 0;
  for (let i = 0; i < targets.length; i++) {
    if (kickSession(engine, targets[i]!, opts).disconnected) kicked++;
    if ((i + 1) % KICK_SLICE === 0) await new Promise<void>((resolve) => setImmediate(resolve));
  }
  return kicked;
}

/**
 * End the tenant's sessions whose client has been away for at least `olderThanSeconds`, as if
 * they had expired: subscriptions, inbox and record dropped, a pending will published
 * [MQTT-3.1.3-9]. Returns how many ended.
 */
export function expireSessions(engine: Engine, tenantId: string, olderThanSeconds: number): number {
  const before = engine.now() - olderThanSeconds * 1000;
  const due: Session[] = [];
  // Only disconnected sessions stay after their connection: the persistent ones.
  for (const s of engine.sessions.tenantSessions(tenantId)) if (!s.connected && s.disconnectedAt <= before) due.push(s);
  for (const s of due) engine.sessions.end(s);
  return due.length;
}

/** A subscription an operator adds for a session (the options of a v5 SUBSCRIBE). */
export interface SubscriptionOrder {
  readonly filter: string;
  readonly qos: QoS;
  readonly noLocal?: boolean;
  readonly retainAsPublished?: boolean;
  readonly retainHandling?: 0 | 1 | 2;
  readonly subscriptionId?: number;
}

/**
 * Why a subscription on behalf was refused: the filter (`invalid-filter`, with the reason),
 * what the tenant does not allow (`shared-disabled`, `wildcard-disabled`, `subscription-id-disabled`),
 * what the protocol does not allow (`no-local-shared` [MQTT-3.8.3-4], `subscription-id-v5-only`),
 * a limit ({@link SubscriptionRefusal}), or the session record could not be stored (`storage`).
 */
export type OnBehalfRefusal =
  | { readonly reason: 'invalid-filter'; readonly detail: string }
  | {
      readonly reason:
        | Exclude<SubscriptionRefusal, 'invalid-filter'>
        | 'shared-disabled'
        | 'wildcard-disabled'
        | 'subscription-id-disabled'
        | 'subscription-id-v5-only'
        | 'no-local-shared'
        | 'storage';
    };

/** A subscription made on behalf: the QoS granted (capped by MaximumQoS) and whether it replaced one. */
export interface OnBehalfGrant {
  readonly qos: QoS;
  readonly replaced: boolean;
}

/**
 * Subscribe a session as its client's SUBSCRIBE would, without asking the ACL (an operator's
 * action): the filter checked against the tenant's topic limits and its wildcard, shared and
 * subscription identifier settings (the tenant's current ones), the QoS capped by MaximumQoS
 * [MQTT-3.8.4-8], within MaxTopicFiltersPerInbox and the subscription quota, stored before the
 * answer for a persistent session, then its retained messages by Retain Handling [MQTT-3.3.1-9].
 * Not counted against the tenant's subscribe rate.
 */
export async function subscribeOnBehalf(
  engine: Engine,
  session: Session,
  order: SubscriptionOrder,
): Promise<OnBehalfGrant | OnBehalfRefusal> {
  const tenantId = session.tenantId;
  const check = checkSubscription(order.filter, engine.limits.topicLimits(tenantId));
  if (!check.ok) return { reason: 'invalid-filter', detail: check.reason };
  const shared = check.parsed.shareKind !== 'none';
  if (order.noLocal === true && shared) return { reason: 'no-local-shared' };
  const tenant = engine.limits.connectLimits(tenantId);
  if (shared && !tenant.sharedSubscriptionEnabled) return { reason: 'shared-disabled' };
  if (hasWildcard(check.parsed.topicFilter) && !tenant.wildcardSubscriptionEnabled) return { reason: 'wildcard-disabled' };
  if (order.subscriptionId !== undefined) {
    if (session.protocolVersion !== 5) return { reason: 'subscription-id-v5-only' };
    if (!tenant.subscriptionIdentifierEnabled) return { reason: 'subscription-id-disabled' };
  }
  const record: SubscriptionRecord = {
    filter: order.filter,
    qos: Math.min(order.qos, tenant.maximumQoS) as QoS,
    noLocal: order.noLocal === true,
    retainAsPublished: order.retainAsPublished === true,
    retainHandling: order.retainHandling ?? 0,
    subscriptionId: order.subscriptionId,
  };
  const g = addSubscription(engine, session, record, subscribeLimits(engine, tenantId));
  if (typeof g === 'string') return g === 'invalid-filter' ? { reason: g, detail: 'refused by the index' } : { reason: g };
  if (session.persistent) {
    try {
      await storeSubscriptions(engine, session, [g]);
    } catch {
      return { reason: 'storage' };
    }
  }
  if (wantsRetained(g)) sendRetained(engine, session, g);
  return { qos: record.qos, replaced: !g.isNew };
}

/**
 * Unsubscribe a session from one filter (compared character by character [MQTT-3.10.4-1]), the
 * ACL not asked; a persistent session's record is stored before the answer. `existed: false`
 * when the session had no such subscription; `stored: false` when its record could not be written
 * (the subscription is then back, as the stored record still has it).
 */
export async function unsubscribeOnBehalf(
  engine: Engine,
  session: Session,
  filter: string,
): Promise<{ existed: boolean; stored: boolean }> {
  const record = removeSubscription(engine, session, filter);
  if (record === undefined || !session.persistent) return { existed: record !== undefined, stored: true };
  try {
    await storeRemovals(engine, session, [record]);
    return { existed: true, stored: true };
  } catch {
    return { existed: true, stored: false };
  }
}
