/** Fan-out: one publisher, M subscribers on the same topic. */
import type { Scenario } from '../scenario';
import { SPEC, checkWindow, publishMetrics, qosLabel, qosOf, rate, topicPrefix, versionOf, type PublishLoadParams } from './common';

export type FanOutParams = PublishLoadParams & {
  /** Subscribing connections. */
  subscribers: number;
};

export const fanOut: Scenario<FanOutParams> = {
  name: 'fan-out',
  summary: '1 publisher → M subscribers on the same topic; deliveries/s summed over the subscribers',
  defaults: {
    subscribers: 50,
    qos: 0,
    payload: 64,
    rate: 0,
    batch: 16,
    window: 1000,
    inflight: 64,
    topicLevels: 4,
    mqtt: 4,
    persistent: 0,
  },
  quick: {},
  specs: {
    subscribers: { summary: 'subscribing connections, all on the one topic', min: 1, max: 100000 },
    ...SPEC,
    window: { ...SPEC.window, summary: 'messages published ahead of the slowest subscriber; 0 = no limit' },
  },
  extraMs: (p) => p.subscribers * 2,
  validate(p) {
    checkWindow(this.name, p);
  },
  plan(p, { tag }) {
    const topic = `${topicPrefix(tag, 'out', p.topicLevels)}/0`;
    const qos = qosOf(p.qos);
    return {
      version: versionOf(p.mqtt),
      keepalive: 0,
      concurrency: 50,
      subscribers: Array.from({ length: p.subscribers }, (_v, i) => ({ id: `${tag}s${i}`, filter: topic, qos, clean: p.persistent === 0 })),
      publishers: [{ id: `${tag}p`, topic }],
      publish: { qos, payload: p.payload, batch: p.batch, inflight: p.inflight },
      idle: null,
      rate: p.rate,
      window: p.window > 0 ? { size: p.window, completion: 'min' } : null,
      latency: false,
    };
  },
  summarize(m) {
    const p = m.params;
    if (m.window.received === 0) throw new Error('no subscriber received a message in the measured window');
    const extra = publishMetrics(m, p.qos, p.rate > 0);
    return {
      metrics: {
        delivered: rate(`fan-out ${qosLabel(p.qos, p.persistent)} 1→${p.subscribers}`, m.window.received, m.seconds, 'deliveries/s'),
        ...extra.metrics,
      },
      headline: ['delivered'],
      notes: extra.notes,
    };
  },
};
