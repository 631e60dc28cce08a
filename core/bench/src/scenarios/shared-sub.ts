/** Shared subscription: P publishers on one topic, C consumers in one `$share/bench/<topic>` group. */
import type { Metric, Scenario } from '../scenario';
import { SPEC, checkWindow, publishMetrics, qosOf, rate, topicPrefix, versionOf, type PublishLoadParams } from './common';

export type SharedSubParams = PublishLoadParams & {
  /** Publishing connections, all on the same topic. */
  publishers: number;
  /** Consumers in the share group. */
  consumers: number;
};

/** Consumed more than published by this share: the broker delivered copies instead of sharing. */
const DUPLICATES = 1.05;

export const sharedSub: Scenario<SharedSubParams> = {
  name: 'shared-sub',
  summary: 'P publishers → C consumers of one $share/<group>/<topic> subscription; msg/s consumed and the spread across consumers',
  defaults: {
    publishers: 4,
    consumers: 4,
    qos: 0,
    payload: 64,
    rate: 0,
    batch: 16,
    window: 5000,
    inflight: 64,
    topicLevels: 4,
    mqtt: 4,
    persistent: 0,
  },
  quick: {},
  specs: {
    publishers: { summary: 'publishing connections, all on the one topic', min: 1, max: 100000 },
    consumers: { summary: 'subscribers sharing $share/bench/<topic>', min: 1, max: 100000 },
    ...SPEC,
    window: { ...SPEC.window, summary: 'messages published but not yet consumed; 0 = no limit' },
    persistent: { ...SPEC.persistent, summary: '1: consumers keep persistent sessions (clean session 0)' },
  },
  extraMs: (p) => (p.publishers + p.consumers) * 2,
  validate(p) {
    checkWindow(this.name, p);
  },
  plan(p, { tag }) {
    const topic = `${topicPrefix(tag, 'sh', p.topicLevels)}/0`;
    const qos = qosOf(p.qos);
    return {
      version: versionOf(p.mqtt),
      keepalive: 0,
      concurrency: 50,
      subscribers: Array.from({ length: p.consumers }, (_v, i) => ({
        id: `${tag}c${i}`,
        filter: `$share/bench/${topic}`,
        qos,
        clean: p.persistent === 0,
      })),
      publishers: Array.from({ length: p.publishers }, (_v, i) => ({ id: `${tag}p${i}`, topic })),
      publish: { qos, payload: p.payload, batch: p.batch, inflight: p.inflight },
      idle: null,
      rate: p.rate,
      window: p.window > 0 ? { size: p.window, completion: 'sum' } : null,
      latency: false,
    };
  },
  summarize(m) {
    const p = m.params;
    if (m.window.received === 0)
      throw new Error('no consumer received a message in the measured window (does the broker support $share subscriptions?)');
    const per = m.window.perSubscriber.map((n) => n / m.seconds);
    const mean = per.reduce((a, b) => a + b, 0) / per.length;
    const min = per.reduce((a, b) => (b < a ? b : a));
    const max = per.reduce((a, b) => (b > a ? b : a));
    const idle = per.filter((r) => r === 0).length;
    const extra = publishMetrics(m, p.qos, p.rate > 0);
    const metrics: Record<string, Metric> = {
      consumed: rate(`shared ${p.publishers}→$share×${p.consumers} QoS${p.qos} consumed`, m.window.received, m.seconds),
      spread: {
        label: 'consumer spread (max − min) / mean',
        value: mean === 0 ? 0 : ((max - min) / mean) * 100,
        unit: '%',
        better: 'lower',
      },
      consumerMin: rate('slowest consumer', min * m.seconds, m.seconds),
      consumerMax: rate('fastest consumer', max * m.seconds, m.seconds),
      ...extra.metrics,
    };
    const notes = [...extra.notes];
    if (idle > 0) notes.push(`${idle} of ${p.consumers} consumers received nothing in the measured window`);
    if (m.totals.received > m.totals.sent * DUPLICATES)
      notes.push(
        `consumers received ${m.totals.received} messages for ${m.totals.sent} published: the broker delivered copies ` +
          '(it may not support shared subscriptions)',
      );
    return { metrics, headline: ['consumed', 'spread'], notes };
  },
};
