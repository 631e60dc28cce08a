/**
 * Idle connections: C clients connect and stay idle. Measures the connect rate, the CONNACK
 * latency and, when the broker's pid is known, its resident memory per connection.
 */
import { readOpenFileLimit } from '../proc-stats';
import type { Metric, Scenario } from '../scenario';
import { quantile } from '../stats';
import { SPEC, versionOf } from './common';

export type IdleConnectionsParams = {
  /** Connections to open (capped by the open-file limits of generator and broker). */
  connections: number;
  /** Handshakes in progress at a time. */
  concurrency: number;
  /** Keepalive (s) sent in CONNECT; 0 = none. With > 0 the clients send PINGREQ at half that interval. */
  keepalive: number;
  /** Pause (ms) after connecting before the measured window, so the broker settles. */
  settle: number;
  mqtt: number;
  persistent: number;
};

/** File descriptors left for everything else when capping by the open-file limit. */
const FD_HEADROOM = 256;

/** How many connections the open-file limits of this process and the broker allow. */
export function connectionCap(brokerPid: number | undefined): number {
  const own = readOpenFileLimit('self') ?? Number.MAX_SAFE_INTEGER;
  const broker = brokerPid === undefined ? Number.MAX_SAFE_INTEGER : (readOpenFileLimit(brokerPid) ?? Number.MAX_SAFE_INTEGER);
  return Math.max(1, Math.min(own, broker) - FD_HEADROOM);
}

/** The broker's memory per connection: its resident set growth over the connections held. */
export function bytesPerConnection(rssBefore: number, rssAfter: number, connections: number): number {
  return (rssAfter - rssBefore) / connections;
}

export const idleConnections: Scenario<IdleConnectionsParams> = {
  name: 'idle-connections',
  summary: 'C idle connections: connect rate, CONNACK latency p50/p99, broker memory per connection (with --pid)',
  defaults: { connections: 2000, concurrency: 100, keepalive: 0, settle: 1000, mqtt: 4, persistent: 0 },
  quick: { connections: 1000, settle: 300 },
  specs: {
    connections: { summary: 'connections to open (capped by ulimit -n of generator and broker)', min: 1, max: 1_000_000 },
    concurrency: { summary: 'handshakes in progress at a time', min: 1, max: 100000 },
    keepalive: { summary: 'keepalive (s) in CONNECT, 0 = none; > 0: PINGREQ every keepalive/2', min: 0, max: 65535 },
    settle: { summary: 'ms to wait after connecting, before the measured window', min: 0, max: 600000 },
    mqtt: SPEC.mqtt,
    persistent: { ...SPEC.persistent, summary: '1: persistent sessions (clean session 0)' },
  },
  freshBroker: true,
  extraMs: (p) => Math.max(10000, p.connections * 5),
  warmupMs: (p) => p.settle,
  plan(p, { tag, target }) {
    const count = Math.min(p.connections, connectionCap(target.pid));
    return {
      version: versionOf(p.mqtt),
      keepalive: p.keepalive,
      concurrency: p.concurrency,
      subscribers: [],
      publishers: [],
      publish: { qos: 0, payload: 0, batch: 1, inflight: 1 },
      idle: { prefix: `${tag}c`, count, clean: p.persistent === 0 },
      rate: 0,
      window: null,
      latency: false,
    };
  },
  summarize(m) {
    const count = m.plan.idle?.count ?? 0;
    const notes: string[] = [];
    if (count < m.params.connections) notes.push(`capped at ${count} connections by the open-file limit (ulimit -n)`);
    const latencies = m.connect.connackMs;
    const metrics: Record<string, Metric> = {
      connectRate: { label: `connect rate (${count} conns)`, value: count / m.connect.seconds, unit: 'conn/s', better: 'higher' },
      connackP50: { label: 'CONNACK latency p50', value: quantile(latencies, 0.5), unit: 'ms', better: 'lower' },
      connackP99: { label: 'CONNACK latency p99', value: quantile(latencies, 0.99), unit: 'ms', better: 'lower' },
      connackMax: { label: 'CONNACK latency max', value: quantile(latencies, 1), unit: 'ms', better: 'lower' },
      connections: { label: 'idle connections held', value: count, unit: 'conn', better: 'higher' },
    };
    const headline = ['connectRate', 'connackP50', 'connackP99'];
    if (m.rss !== null) {
      metrics.rssBefore = { label: 'broker RSS before', value: m.rss.before / 1048576, unit: 'MiB', better: 'lower' };
      metrics.rssAfter = { label: 'broker RSS with idle conns', value: m.rss.after / 1048576, unit: 'MiB', better: 'lower' };
      metrics.bytesPerConnection = {
        label: 'broker memory per idle conn',
        value: bytesPerConnection(m.rss.before, m.rss.after, count),
        unit: 'bytes/conn',
        better: 'lower',
      };
      headline.unshift('bytesPerConnection');
    } else {
      notes.push('broker memory not measured (give the broker pid with --pid; needs /proc/<pid>/status)');
    }
    return { metrics, headline, notes };
  },
};
