/** Fan-in: N publishers, each on its own topic, one subscriber on a wildcard filter. */
import type { Scenario } from '../scenario';
import { SPEC, checkWindow, publishMetrics, qosLabel, qosOf, rate, topicPrefix, versionOf, type PublishLoadParams } from './common';

export type FanInParams = PublishLoadParams & {
  /** Publishing connections. */
  publishers: number;
};

export const fanIn: Scenario<FanInParams> = {
  name: 'fan-in',
  summary: 'N publishers → 1 subscriber on a wildcard filter; messages/s received by the subscriber',
  defaults: {
    publishers: 20,
    qos: 0,
    payload: 64,
    rate: 0,
    batch: 32,
    window: 10000,
    inflight: 64,
    topicLevels: 4,
    mqtt: 4,
    persistent: 0,
  },
  quick: {},
  specs: {
    publishers: { summary: 'publishing connections, each on its own topic', min: 1, max: 100000 },
    ...SPEC,
  },
  extraMs: (p) => p.publishers * 2,
  validate(p) {
    checkWindow(this.name, p);
  },
  plan(p, { tag }) {
    const prefix = topicPrefix(tag, 'in', p.topicLevels);
    const qos = qosOf(p.qos);
    return {
      version: versionOf(p.mqtt),
      keepalive: 0,
      concurrency: 50,
      subscribers: [{ id: `${tag}s`, filter: `${prefix}/+`, qos, clean: p.persistent === 0 }],
      publishers: Array.from({ length: p.publishers }, (_v, i) => ({ id: `${tag}p${i}`, topic: `${prefix}/${i}` })),
      publish: { qos, payload: p.payload, batch: p.batch, inflight: p.inflight },
      idle: null,
      rate: p.rate,
      window: p.window > 0 ? { size: p.window, completion: 'sum' } : null,
      latency: false,
    };
  },
  summarize(m) {
    const p = m.params;
    if (m.window.received === 0) throw new Error('the subscriber received no message in the measured window');
    const extra = publishMetrics(m, p.qos, p.rate > 0);
    return {
      metrics: {
        received: rate(`fan-in ${qosLabel(p.qos, p.persistent)} ${p.publishers}→1`, m.window.received, m.seconds),
        ...extra.metrics,
      },
      headline: ['received'],
      notes: extra.notes,
    };
  },
};
