/** Parameters and helpers several scenarios share. */
import { isMqttVersion, type MqttVersion, type QoS } from '../packets';
import { ParamError, type Metric, type ParamSpec } from '../scenario';

const MILLION = 1_000_000;

export const SPEC = {
  qos: { summary: 'QoS of every PUBLISH and subscription', min: 0, max: 2, choices: [0, 1, 2] },
  payload: { summary: 'payload bytes per message', min: 0, max: 256 * 1024 },
  rate: { summary: 'total messages/s over all publishers; 0 = as fast as the windows allow', min: 0, max: 10 * MILLION },
  batch: { summary: 'QoS 0: messages a publisher writes at once', min: 1, max: 1000 },
  window: { summary: 'messages published but not yet received, over all publishers; 0 = no limit', min: 0, max: 10 * MILLION },
  inflight: { summary: 'QoS 1/2: unacknowledged PUBLISH packets per publisher', min: 1, max: 32767 },
  topicLevels: { summary: 'levels of each topic name (bench/<run>/…/<n>)', min: 3, max: 32 },
  mqtt: { summary: 'protocol: 3 = MQTT 3.1, 4 = 3.1.1, 5 = 5.0', min: 3, max: 5, choices: [3, 4, 5] },
  persistent: { summary: '1: subscribers keep persistent sessions (clean session 0)', min: 0, max: 1, choices: [0, 1] },
} as const satisfies Record<string, ParamSpec>;

export function versionOf(mqtt: number): MqttVersion {
  if (!isMqttVersion(mqtt)) throw new ParamError(`--mqtt must be 3, 4 or 5, got ${mqtt}`);
  return mqtt;
}

export function qosOf(qos: number): QoS {
  if (qos !== 0 && qos !== 1 && qos !== 2) throw new ParamError(`--qos must be 0, 1 or 2, got ${qos}`);
  return qos;
}

/** `bench/<tag><kind>/l3/…` so that a topic with its last level has `levels` levels. */
export function topicPrefix(tag: string, kind: string, levels: number): string {
  const parts = ['bench', `${tag}${kind}`];
  for (let l = 3; l < levels; l++) parts.push(`l${l}`);
  return parts.join('/');
}

/** QoS 0 batches must fit in the flow window, or publishers would wait forever. */
export function checkWindow(name: string, p: { window: number; batch: number; qos: number }): void {
  if (p.qos === 0 && p.window > 0 && p.window < p.batch)
    throw new ParamError(`${name}: --window (${p.window}) must be 0 or at least --batch (${p.batch})`);
}

export function rate(label: string, count: number, seconds: number, unit = 'msg/s'): Metric {
  return { label, value: count / seconds, unit, better: 'higher' };
}

/** "QoS 0", or "QoS 1 persistent" … for labels. */
export function qosLabel(qos: number, persistent: number): string {
  return `QoS${qos}${persistent === 1 ? ' persistent' : ''}`;
}

/** Metrics every publishing scenario reports besides its headline. */
export function publishMetrics(
  m: { seconds: number; window: { sent: number; completed: number; skipped: number }; totals: { lost: number }; stalls: number },
  qos: number,
  paced: boolean,
): { metrics: Record<string, Metric>; notes: string[] } {
  const metrics: Record<string, Metric> = { sent: rate('published', m.window.sent, m.seconds) };
  if (qos > 0) metrics.acked = rate(qos === 1 ? 'acknowledged (PUBACK)' : 'completed (PUBCOMP)', m.window.completed, m.seconds);
  if (paced) metrics.skipped = rate('behind the rate (not sent)', m.window.skipped, m.seconds);
  metrics.lost = { label: 'written off after stalls', value: m.totals.lost, unit: 'msg', better: 'lower' };
  const notes = m.stalls > 0 ? [`${m.stalls} stall(s): ${m.totals.lost} messages never arrived and were written off`] : [];
  return { metrics, notes };
}

/**
 * The parameters every publishing scenario shares (their meaning per scenario is in its specs):
 * QoS, payload bytes, total rate (0 = as fast as possible), QoS 0 batch, flow window, QoS 1/2
 * inflight per publisher, topic levels, MQTT version, persistent sessions.
 */
export type PublishLoadParams = {
  qos: number;
  payload: number;
  rate: number;
  batch: number;
  window: number;
  inflight: number;
  topicLevels: number;
  mqtt: number;
  persistent: number;
};
