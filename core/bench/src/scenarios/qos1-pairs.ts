/** QoS 1 (or 2) pairs: K publisher → subscriber pairs, each on its own topic, with an inflight window. */
import type { Scenario } from '../scenario';
import { SPEC, publishMetrics, qosOf, rate, topicPrefix, versionOf } from './common';

export type Qos1PairsParams = {
  /** Publisher/subscriber pairs. */
  pairs: number;
  /** 1 or 2. */
  qos: number;
  /** Unacknowledged PUBLISH packets allowed per publisher. */
  inflight: number;
  /** Payload bytes per message. */
  payload: number;
  /** Total messages/s; 0 = as fast as the inflight windows allow. */
  rate: number;
  topicLevels: number;
  mqtt: number;
  /** 1: subscribers keep persistent sessions (clean session 0), so every message goes through the broker's storage before PUBACK. */
  persistent: number;
};

export const qos1Pairs: Scenario<Qos1PairsParams> = {
  name: 'qos1-pairs',
  summary: 'K publisher → subscriber pairs, QoS 1 both ways with an inflight window per publisher; acked publishes/s and deliveries/s',
  defaults: { pairs: 10, qos: 1, inflight: 64, payload: 64, rate: 0, topicLevels: 4, mqtt: 4, persistent: 0 },
  quick: {},
  specs: {
    pairs: { summary: 'publisher → subscriber pairs, each on its own topic', min: 1, max: 50000 },
    qos: { summary: 'QoS of every PUBLISH and subscription', min: 1, max: 2, choices: [1, 2] },
    inflight: SPEC.inflight,
    payload: SPEC.payload,
    rate: SPEC.rate,
    topicLevels: SPEC.topicLevels,
    mqtt: SPEC.mqtt,
    persistent: SPEC.persistent,
  },
  extraMs: (p) => p.pairs * 4,
  plan(p, { tag }) {
    const prefix = topicPrefix(tag, 'q', p.topicLevels);
    const qos = qosOf(p.qos);
    return {
      version: versionOf(p.mqtt),
      keepalive: 0,
      concurrency: 50,
      subscribers: Array.from({ length: p.pairs }, (_v, i) => ({
        id: `${tag}s${i}`,
        filter: `${prefix}/${i}`,
        qos,
        clean: p.persistent === 0,
      })),
      publishers: Array.from({ length: p.pairs }, (_v, i) => ({ id: `${tag}p${i}`, topic: `${prefix}/${i}` })),
      publish: { qos, payload: p.payload, batch: 1, inflight: p.inflight },
      idle: null,
      rate: p.rate,
      window: null,
      latency: false,
    };
  },
  summarize(m) {
    const p = m.params;
    if (m.window.completed === 0) throw new Error(`no ${p.qos === 1 ? 'PUBACK' : 'PUBCOMP'} received in the measured window`);
    if (m.window.received === 0) throw new Error('no subscriber received a message in the measured window');
    const what = `QoS${p.qos} ${p.pairs} pairs${p.persistent ? ' persistent' : ''}`;
    const extra = publishMetrics(m, p.qos, p.rate > 0);
    delete extra.metrics.acked;
    delete extra.metrics.lost;
    return {
      metrics: {
        acked: rate(`${what} acked`, m.window.completed, m.seconds),
        delivered: rate(`${what} delivered`, m.window.received, m.seconds),
        ...extra.metrics,
      },
      headline: ['acked', 'delivered'],
      notes: [],
    };
  },
};

/** The same pairs with persistent subscriber sessions: QoS 1 through the broker's storage (level by default in Bifro). */
export const qos1Persistent: Scenario<Qos1PairsParams> = {
  ...qos1Pairs,
  name: 'qos1-persistent',
  summary: 'qos1-pairs with persistent subscriber sessions (clean session 0): every message is stored before PUBACK',
  defaults: { ...qos1Pairs.defaults, persistent: 1 },
};
