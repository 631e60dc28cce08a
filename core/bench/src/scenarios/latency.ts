/**
 * Fixed-rate latency: publishers send at a fixed total rate with the send time in each payload;
 * subscribers on a wildcard filter record publish → deliver latency (one process clock, so the
 * figures hold across worker threads).
 */
import { TIMESTAMP_BYTES } from '../packets';
import { ParamError, type Metric, type Scenario } from '../scenario';
import { SPEC, qosLabel, qosOf, rate, topicPrefix, versionOf } from './common';

export type LatencyParams = {
  publishers: number;
  /** Each receives every message (unless `paired`). */
  subscribers: number;
  /** 1: each publisher has a subscriber of its own on its own topic instead (`subscribers` is ignored). */
  paired: number;
  /** Total messages/s over all publishers. */
  rate: number;
  qos: number;
  payload: number;
  inflight: number;
  topicLevels: number;
  mqtt: number;
  persistent: number;
};

/** Achieved below this share of the asked rate: say so. */
const SHORTFALL = 0.95;

export const latency: Scenario<LatencyParams> = {
  name: 'latency',
  summary: 'publishers at a fixed total rate, timestamps in the payload; publish → deliver latency p50/p99/max and the achieved rate',
  defaults: {
    publishers: 10,
    subscribers: 1,
    paired: 0,
    rate: 10000,
    qos: 0,
    payload: 64,
    inflight: 64,
    topicLevels: 4,
    mqtt: 4,
    persistent: 0,
  },
  quick: {},
  specs: {
    publishers: { summary: 'publishing connections, each on its own topic', min: 1, max: 100000 },
    subscribers: { summary: 'subscribers on the wildcard filter (each gets every message)', min: 1, max: 10000 },
    paired: {
      summary: "1: one subscriber per publisher, on that publisher's topic (N pairs, --subscribers ignored)",
      min: 0,
      max: 1,
      choices: [0, 1],
    },
    rate: { ...SPEC.rate, summary: 'total messages/s over all publishers', min: 1 },
    qos: SPEC.qos,
    payload: { ...SPEC.payload, summary: `payload bytes per message (at least ${TIMESTAMP_BYTES}: the send time)`, min: TIMESTAMP_BYTES },
    inflight: SPEC.inflight,
    topicLevels: SPEC.topicLevels,
    mqtt: SPEC.mqtt,
    persistent: SPEC.persistent,
  },
  extraMs: (p) => (p.publishers + (p.paired === 1 ? p.publishers : p.subscribers)) * 2,
  validate(p) {
    if (p.rate < p.publishers / 10)
      throw new ParamError(
        `latency: --rate ${p.rate} is too low for ${p.publishers} publishers (at least one message per publisher every 10 s)`,
      );
  },
  plan(p, { tag }) {
    const prefix = topicPrefix(tag, 'lat', p.topicLevels);
    const qos = qosOf(p.qos);
    return {
      version: versionOf(p.mqtt),
      keepalive: 0,
      concurrency: 50,
      subscribers: Array.from({ length: p.paired === 1 ? p.publishers : p.subscribers }, (_v, i) => ({
        id: `${tag}s${i}`,
        filter: p.paired === 1 ? `${prefix}/${i}` : `${prefix}/+`,
        qos,
        clean: p.persistent === 0,
      })),
      publishers: Array.from({ length: p.publishers }, (_v, i) => ({ id: `${tag}p${i}`, topic: `${prefix}/${i}` })),
      publish: { qos, payload: p.payload, batch: 16, inflight: p.inflight },
      idle: null,
      rate: p.rate,
      // Bounds what is in flight when the broker falls behind: publishers then skip (and say so).
      window: { size: Math.max(1000, Math.ceil(p.rate / 2)), completion: 'min' },
      latency: true,
    };
  },
  summarize(m) {
    const p = m.params;
    const l = m.latency;
    if (l === null || l.count === 0) throw new Error('no message was delivered in the measured window');
    const what = `latency ${qosLabel(p.qos, p.persistent)} @ ${p.rate} msg/s`;
    const ms = (label: string, value: number): Metric => ({ label, value, unit: 'ms', better: 'lower' });
    const achieved = m.window.sent / m.seconds;
    const metrics: Record<string, Metric> = {
      p50: ms(`${what} p50`, l.p50Ms),
      p99: ms(`${what} p99`, l.p99Ms),
      max: ms(`${what} max`, l.maxMs),
      p90: ms('latency p90', l.p90Ms),
      p999: ms('latency p99.9', l.p999Ms),
      mean: ms('latency mean', l.meanMs),
      achieved: rate('achieved publish rate', m.window.sent, m.seconds),
      received: rate('deliveries', m.window.received, m.seconds, 'deliveries/s'),
      samples: { label: 'latency samples', value: l.count, unit: 'msg', better: 'higher' },
      skipped: rate('behind the rate (not sent)', m.window.skipped, m.seconds),
    };
    const notes: string[] = [];
    if (achieved < p.rate * SHORTFALL)
      notes.push(`achieved ${Math.round(achieved)} of ${p.rate} msg/s: the broker (or the generator) did not keep up`);
    return { metrics, headline: ['p50', 'p99', 'max', 'achieved'], notes };
  },
};
