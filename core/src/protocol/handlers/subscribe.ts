import type { ISubackPacket, ISubscribePacket } from 'mqtt-packet';
import type { QoS, SubscriptionRecord } from '@bifro/spi';
import type { ConnectionPort } from '../connection-port';
import { checkSubscription, hasWildcard, isSharedFilter } from '../../routing/topic';
import type { Message } from '../../session/message';
import { FIRST_FAILURE_CODE, RC } from '../../codec/reason-codes';

/** v3.1.1 SUBACK failure (§3.9.3). */
const V3_FAILURE = FIRST_FAILURE_CODE;

interface Granted {
  readonly record: SubscriptionRecord;
  readonly isNew: boolean;
  readonly shared: boolean;
}

/**
 * SUBSCRIBE: validate each filter, check availability (wildcards, shared, subscription ids),
 * limits and permission, add to the tenant's index (same filter replaces [MQTT-3.8.4-3]), answer
 * SUBACK with one code per filter in order [MQTT-3.8.4-6], then send matching retained messages
 * per Retain Handling [MQTT-3.3.1-9], never to shared subscriptions (§4.8.2).
 */
export function handleSubscribe(conn: ConnectionPort, packet: ISubscribePacket): void {
  const engine = conn.engine;
  const client = conn.client!;
  const tenantId = client.tenantId;
  // The decoder refused an empty SUBSCRIBE [MQTT-3.8.3-3] and a subscription identifier of 0.
  const subs = packet.subscriptions;
  const subscriptionId = packet.properties?.subscriptionIdentifier;
  for (const s of subs) {
    // No Local on a shared subscription is a protocol error [MQTT-3.8.3-4].
    if (s.nl === true && isSharedFilter(s.topic)) {
      conn.protocolError(RC.ProtocolError, 'no local on a shared subscription', 'protocolViolation');
      return;
    }
  }
  engine.usage.count(tenantId, 'TotalSubscribePerSecond', subs.length, engine.wheel.now);
  const tooLarge = subs.length > engine.setting(tenantId, 'MaxTopicFiltersPerSub');
  if (tooLarge) engine.emit('tooLargeSubscription', client, { filters: subs.length });
  // Too many filters in one packet, or the tenant's subscribe rate exhausted: every filter gets 0x97.
  const tooMany = tooLarge || !engine.limits.hasResource(client, 'TotalSubscribePerSecond');

  const codes: number[] = new Array<number>(subs.length);
  const checks: (Promise<boolean> | boolean)[] = [];
  const connectLimits = conn.limits;
  const maxQoS = connectLimits.maximumQoS;
  const limits = engine.limits.topicLimits(tenantId);
  for (let i = 0; i < subs.length; i++) {
    const s = subs[i]!;
    const fail = (v5code: number): void => {
      codes[i] = conn.v5 ? v5code : V3_FAILURE;
      checks.push(false);
    };
    if (tooMany) {
      fail(RC.QuotaExceeded);
      continue;
    }
    const check = checkSubscription(s.topic, limits);
    if (!check.ok) {
      engine.emit('invalidTopicFilter', client, { filter: s.topic, reason: check.reason });
      fail(RC.TopicFilterInvalid);
      continue;
    }
    const shared = check.parsed.shareKind !== 'none';
    if (shared && !connectLimits.sharedSubscriptionEnabled) {
      fail(RC.SharedSubscriptionsNotSupported);
      continue;
    }
    if (hasWildcard(check.parsed.topicFilter) && !connectLimits.wildcardSubscriptionEnabled) {
      fail(RC.WildcardSubscriptionsNotSupported);
      continue;
    }
    if (subscriptionId !== undefined && !connectLimits.subscriptionIdentifierEnabled) {
      fail(RC.SubscriptionIdentifiersNotSupported);
      continue;
    }
    // Granted QoS: the requested one, capped by the tenant's Maximum QoS [MQTT-3.8.4-8].
    codes[i] = Math.min(s.qos, maxQoS);
    checks.push(engine.acl.check(client, { type: 'subscribe', filter: s.topic, qos: s.qos }));
  }
  if (checks.some((c) => c instanceof Promise)) {
    conn.hold(Promise.all(checks).then((allowed) => finish(conn, packet, codes, allowed, subscriptionId)));
  } else {
    finish(conn, packet, codes, checks as boolean[], subscriptionId);
  }
}

function finish(
  conn: ConnectionPort,
  packet: ISubscribePacket,
  codes: number[],
  allowed: readonly boolean[],
  subscriptionId: number | undefined,
): void {
  if (conn.state === 'closed') return;
  const engine = conn.engine;
  const client = conn.client!;
  const session = conn.session!;
  const tenantId = client.tenantId;
  const router = engine.router;
  const maxFilters = engine.setting(tenantId, 'MaxTopicFiltersPerInbox');
  const maxGroupMembers = engine.setting(tenantId, 'MaxSharedGroupMembers');
  const granted: Granted[] = [];
  packet.subscriptions.forEach((s, i) => {
    if (codes[i]! >= FIRST_FAILURE_CODE) return;
    if (!allowed[i]) {
      engine.emit('subActionDisallow', client, { filter: s.topic });
      codes[i] = conn.v5 ? RC.NotAuthorized : V3_FAILURE;
      return;
    }
    const isNew = !session.subscriptions.has(s.topic);
    if (isNew && session.subscriptions.size >= maxFilters) {
      codes[i] = conn.v5 ? RC.QuotaExceeded : V3_FAILURE;
      return;
    }
    // The tenant's subscription quota (docs/tenancy.md § Usage and quotas): SUBACK 0x97 / v3 0x80.
    if (isNew && !engine.limits.claimSubscription(session, s.topic)) {
      codes[i] = conn.v5 ? RC.QuotaExceeded : V3_FAILURE;
      return;
    }
    const record: SubscriptionRecord = {
      filter: s.topic,
      qos: codes[i] as QoS,
      noLocal: s.nl === true,
      retainAsPublished: s.rap === true,
      retainHandling: (s.rh ?? 0) as 0 | 1 | 2,
      subscriptionId,
    };
    const result = router.addRoute(
      tenantId,
      { subscriber: session, clientId: client.clientId, filter: s.topic, options: record },
      { maxGroupMembers },
    );
    if (result.rejected !== undefined) {
      if (isNew) engine.limits.releaseSubscription(session, s.topic);
      codes[i] = conn.v5 ? (result.rejected === 'group-full' ? RC.QuotaExceeded : RC.TopicFilterInvalid) : V3_FAILURE;
      return;
    }
    session.subscriptions.set(s.topic, record);
    const g: Granted = { record, isNew, shared: isSharedFilter(s.topic) };
    // Live deliveries wait from now until this subscription's retained messages went out.
    if (wantsRetained(g)) session.holdForRetained();
    granted.push(g);
  });
  const suback: ISubackPacket = { cmd: 'suback', messageId: packet.messageId, granted: codes };
  if (conn.v5) suback.reasonCode = 0;
  const acknowledge = (): void => {
    conn.send(suback);
    engine.emit('subAcked', client, () => ({ filters: packet.subscriptions.map((s) => s.topic).join(',') }));
    for (const g of granted) if (wantsRetained(g)) sendRetained(conn, g);
  };
  // A persistent session's subscriptions are on disk before SUBACK says so; when they cannot be
  // stored they are taken back and SUBACK says so.
  if (session.persistent && granted.length > 0) {
    engine.sessions.save(session).then(acknowledge, () => {
      for (const g of granted) {
        if (wantsRetained(g)) session.releaseRetained([]);
        if (g.isNew) {
          session.subscriptions.delete(g.record.filter);
          router.removeRoute(tenantId, client.clientId, g.record.filter);
          engine.limits.releaseSubscription(session, g.record.filter);
        }
      }
      for (let i = 0; i < codes.length; i++) if (codes[i]! < FIRST_FAILURE_CODE) codes[i] = conn.v5 ? RC.UnspecifiedError : V3_FAILURE;
      conn.send(suback);
    });
  } else {
    acknowledge();
  }
}

/** Retain Handling 2: never; 1: only for a new subscription (v5 §3.8.3.1); shared subscriptions: never (§4.8.2). */
function wantsRetained(g: Granted): boolean {
  const r = g.record;
  return !g.shared && r.retainHandling !== 2 && (r.retainHandling !== 1 || g.isNew);
}

function sendRetained(conn: ConnectionPort, g: Granted): void {
  const r = g.record;
  const engine = conn.engine;
  const client = conn.client!;
  const session = conn.session!;
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
