/**
 * Match sets: what one topic's subscribers get, aggregated per non-shared subscriber
 * [MQTT-3.3.4-2], [MQTT-3.3.4-3], with the live shared groups beside them.
 */
import type { QoS } from '@bifro/spi';

import type { DistSubscription, SharedGroupMatch } from './shared-group';

/**
 * What one non-shared subscriber gets for a topic, aggregated over all its matching subscriptions
 * [MQTT-3.3.4-2].
 */
export interface DirectMatch<S> {
  readonly subscriber: S;
  readonly clientId: string;
  /** Highest granted QoS of the matching subscriptions; deliver with min(message QoS, this). */
  readonly qos: QoS;
  /** True when any matching subscription has Retain As Published. */
  readonly retainAsPublished: boolean;
  /** Distinct Subscription Identifiers of the matching subscriptions [MQTT-3.3.4-3]; empty when none. */
  readonly subscriptionIds: readonly number[];
  /**
   * The same aggregation over only the matching subscriptions without No Local: use it when the
   * publisher is this subscriber, and deliver nothing when it is undefined [MQTT-3.8.3-3]. It is
   * this very object when none of the matching subscriptions has No Local.
   */
  readonly localAllowed: DirectMatch<S> | undefined;
}

/** Who receives a message published on one topic. Frozen, shared between calls: do not keep it past a subscription change if you need a snapshot. */
export interface MatchSet<S> {
  /** Non-shared subscribers, one entry per client id. */
  readonly direct: readonly DirectMatch<S>[];
  /** Shared groups with a matching filter, one per (share kind, group, topic filter). */
  readonly groups: readonly SharedGroupMatch<S>[];
}

const NO_IDS: readonly number[] = Object.freeze([]);
const EMPTY_MATCH: MatchSet<never> = Object.freeze({ direct: Object.freeze([]), groups: Object.freeze([]) });

interface MutableDirectMatch<S> {
  subscriber: S;
  clientId: string;
  qos: QoS;
  retainAsPublished: boolean;
  subscriptionIds: readonly number[];
  localAllowed: DirectMatch<S> | undefined;
}

/** The match of one subscription. */
export function single<S>(sub: DistSubscription<S>): DirectMatch<S> {
  const o = sub.options;
  const m: MutableDirectMatch<S> = {
    subscriber: sub.subscriber,
    clientId: sub.clientId,
    qos: o.qos,
    retainAsPublished: o.retainAsPublished,
    subscriptionIds: o.subscriptionId !== undefined ? Object.freeze([o.subscriptionId]) : NO_IDS,
    localAllowed: undefined,
  };
  if (!o.noLocal) m.localAllowed = m;
  return Object.freeze(m);
}

/** Aggregates several subscriptions of one client [MQTT-3.3.4-2], [MQTT-3.3.4-3]. */
export function aggregate<S>(subs: readonly DistSubscription<S>[]): DirectMatch<S> {
  const all = combine(subs, false)!;
  if (subs.some((s) => s.options.noLocal)) {
    (all as MutableDirectMatch<S>).localAllowed = combine(subs, true);
  } else {
    (all as MutableDirectMatch<S>).localAllowed = all;
  }
  return Object.freeze(all);
}

function combine<S>(subs: readonly DistSubscription<S>[], localOnly: boolean): DirectMatch<S> | undefined {
  let m: MutableDirectMatch<S> | undefined;
  let ids: number[] | undefined;
  for (const sub of subs) {
    const o = sub.options;
    if (localOnly && o.noLocal) continue;
    if (m === undefined) {
      m = {
        subscriber: sub.subscriber,
        clientId: sub.clientId,
        qos: o.qos,
        retainAsPublished: o.retainAsPublished,
        subscriptionIds: NO_IDS,
        localAllowed: undefined,
      };
    } else {
      if (o.qos > m.qos) m.qos = o.qos;
      if (o.retainAsPublished) m.retainAsPublished = true;
    }
    if (o.subscriptionId !== undefined) {
      ids ??= [];
      if (!ids.includes(o.subscriptionId)) ids.push(o.subscriptionId);
    }
  }
  if (m === undefined) return undefined;
  if (ids !== undefined) m.subscriptionIds = Object.freeze(ids);
  if (localOnly) {
    m.localAllowed = m;
    return Object.freeze(m);
  }
  return m;
}

/** A match set with nothing in it. */
export function emptyMatchSet<S>(): MatchSet<S> {
  return EMPTY_MATCH;
}
