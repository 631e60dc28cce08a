/**
 * Idle connections: C clients connect (keepalive 0) and stay idle. Measures the connect rate, the
 * CONNACK latency and, when the broker's pid is known, its resident memory per connection.
 */
import { performance } from 'node:perf_hooks';
import { encodeConnect } from '../packets';
import { readOpenFileLimit, readRssBytes } from '../proc-stats';
import { openMany, type Metric, type Scenario } from '../scenario';
import { quantile } from '../stats';

export type IdleConnectionsParams = {
  /** Connections to open (capped by the open-file limits of generator and broker). */
  connections: number;
  /** Handshakes in progress at a time. */
  concurrency: number;
  /** Keepalive (s) sent in CONNECT; 0 = none. */
  keepalive: number;
  /** Pause (ms) after connecting before memory is read, so the broker settles. */
  settle: number;
};

/** File descriptors left for everything else when capping by the open-file limit. */
const FD_HEADROOM = 256;

/** How many connections the open-file limits of this process and the broker allow. */
export function connectionCap(brokerPid: number | undefined): number {
  const own = readOpenFileLimit('self') ?? Number.MAX_SAFE_INTEGER;
  const broker = brokerPid === undefined ? Number.MAX_SAFE_INTEGER : (readOpenFileLimit(brokerPid) ?? Number.MAX_SAFE_INTEGER);
  return Math.max(1, Math.min(own, broker) - FD_HEADROOM);
}

export const idleConnections: Scenario<IdleConnectionsParams> = {
  name: 'idle-connections',
  summary: 'C idle connections (keepalive 0): connect rate, CONNACK latency p50/p99, broker RSS per connection',
  defaults: { connections: 2000, concurrency: 100, keepalive: 0, settle: 1000 },
  quick: { settle: 500 },
  extraMs: (p) => p.settle + Math.max(10000, p.connections * 5),
  async run(ctx, p) {
    const notes: string[] = [];
    const cap = connectionCap(ctx.target.pid);
    const count = Math.min(p.connections, cap);
    if (count < p.connections) notes.push(`capped at ${count} connections by the open-file limit (ulimit -n)`);
    const ids = Array.from({ length: count }, (_v, i) => `${ctx.tag}-c${i}`);
    const connects = ids.map((id) => encodeConnect(id, p.keepalive));
    const pid = ctx.target.pid;
    const rssBefore = pid === undefined ? null : readRssBytes(pid);

    const t0 = performance.now();
    const clients = await openMany(ctx, ids, connects, p.concurrency);
    const connectSeconds = (performance.now() - t0) / 1000;
    const latencies = clients.map((c) => c.connackMs);

    await ctx.sleep(p.settle);
    await ctx.sleep(ctx.timing.measureMs);
    const stillOpen = clients.filter((c) => !c.closed).length;
    if (stillOpen !== count) throw new Error(`${count - stillOpen} of ${count} idle connections were closed by the broker`);
    const rssAfter = pid === undefined ? null : readRssBytes(pid);

    const metrics: Record<string, Metric> = {
      connectRate: { label: `connect rate (${count} conns)`, value: count / connectSeconds, unit: 'conn/s', better: 'higher' },
      connackP50: { label: 'CONNACK latency p50', value: quantile(latencies, 0.5), unit: 'ms', better: 'lower' },
      connackP99: { label: 'CONNACK latency p99', value: quantile(latencies, 0.99), unit: 'ms', better: 'lower' },
      connections: { label: 'idle connections held', value: count, unit: 'conn', better: 'higher' },
    };
    const headline = ['connectRate', 'connackP50', 'connackP99'];
    if (rssBefore !== null && rssAfter !== null) {
      metrics.rssBefore = { label: 'broker RSS before', value: rssBefore / 1048576, unit: 'MiB', better: 'lower' };
      metrics.rssAfter = { label: 'broker RSS with idle conns', value: rssAfter / 1048576, unit: 'MiB', better: 'lower' };
      metrics.bytesPerConnection = {
        label: `broker memory per idle conn`,
        value: (rssAfter - rssBefore) / count,
        unit: 'bytes/conn',
        better: 'lower',
      };
      headline.unshift('bytesPerConnection');
    } else {
      notes.push('broker memory not measured (no readable /proc/<pid>/status for the broker)');
    }
    return { scenario: this.name, params: { ...p, connections: count }, metrics, headline, notes };
  },
};
