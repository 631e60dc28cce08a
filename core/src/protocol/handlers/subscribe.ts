import type { ISubackPacket, ISubscribePacket } from 'mqtt-packet';
import type { QoS, SubscriptionRecord } from '@bifro/spi';
import type { ConnectionPort } from '../connection-port';
import { checkSubscription, hasWildcard, isSharedFilter } from '../../routing/topic';
import { FIRST_FAILURE_CODE, RC } from '../../codec/reason-codes';
import {
  addSubscription,
  sendRetained,
  storeSubscriptions,
  subscribeLimits,
  wantsRetained,
  type GrantedSubscription,
} from '../../broker/subscriptions';

/** v3.1.1 SUBACK failure (§3.9.3). */
const V3_FAILURE = FIRST_FAILURE_CODE;

/**
 * SUBSCRIBE: validate each filter, check availability (wildcards, shared, subscription ids),
 * limits and permission, add to the tenant's index (same filter replaces [MQTT-3.8.4-3]), answer
 * SUBACK with one code per filter in order [MQTT-3.8.4-6], then send matching retained messages
 * per Retain Handling [MQTT-3.3.1-9], never to shared subscriptions (§4.8.2). Adding, storing and
 * the retained messages are shared with the admin API (broker/subscriptions.ts).
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
  const limits = subscribeLimits(engine, client.tenantId);
  const granted: GrantedSubscription[] = [];
  packet.subscriptions.forEach((s, i) => {
    if (codes[i]! >= FIRST_FAILURE_CODE) return;
    if (!allowed[i]) {
      engine.emit('subActionDisallow', client, { filter: s.topic });
      codes[i] = conn.v5 ? RC.NotAuthorized : V3_FAILURE;
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
    const g = addSubscription(engine, session, record, limits);
    if (typeof g === 'string') {
      // MaxTopicFiltersPerInbox, the tenant's subscription quota and a full shared group: 0x97; v3 0x80.
      codes[i] = conn.v5 ? (g === 'invalid-filter' ? RC.TopicFilterInvalid : RC.QuotaExceeded) : V3_FAILURE;
      return;
    }
    granted.push(g);
  });
  const suback: ISubackPacket = { cmd: 'suback', messageId: packet.messageId, granted: codes };
  if (conn.v5) suback.reasonCode = 0;
  const acknowledge = (): void => {
    conn.send(suback);
    engine.emit('subAcked', client, () => ({ filters: packet.subscriptions.map((s) => s.topic).join(',') }));
    for (const g of granted) if (wantsRetained(g)) sendRetained(engine, session, g);
  };
  // A cluster node's SUBACK waits for the routes to be written, so the other nodes route to them (2 s at most).
  const announced = granted.length > 0 ? engine.topology.announced() : undefined;
  // A persistent session's subscriptions are on disk before SUBACK says so; when they cannot be
  // stored they are taken back and SUBACK says so.
  if (session.persistent && granted.length > 0) {
    const stored = storeSubscriptions(engine, session, granted);
    (announced === undefined ? stored : Promise.all([stored, announced])).then(acknowledge, () => {
      for (let i = 0; i < codes.length; i++) if (codes[i]! < FIRST_FAILURE_CODE) codes[i] = conn.v5 ? RC.UnspecifiedError : V3_FAILURE;
      conn.send(suback);
    });
  } else if (announced !== undefined) {
    void announced.then(() => {
      if (conn.state !== 'closed') acknowledge();
    });
  } else {
    acknowledge();
  }
}
