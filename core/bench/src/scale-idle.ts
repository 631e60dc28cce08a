#!/usr/bin/env node
/**
 * `npm run bench:scale-idle`: many idle connections on one machine (docs/performance.md § How to
 * measure). For each broker (Bifro and the bare Node `node-net` reference by default), freshly
 * started, alternating `--runs` times:
 *   1. N MQTT connections open (CONNECT → CONNACK, keepalive 0) and stay idle, spread round robin
 *      over loopback source addresses 127.0.0.2, 127.0.0.3, … so that N is not bounded by the
 *      ephemeral ports of one address; then a settle pause;
 *   2. the broker's memory per connection: resident set growth ÷ N, as idle-connections reports it;
 *   3. while they sit idle, a few active clients each publish QoS 1 to their own topic, subscribed
 *      at QoS 1, one message at a time: the round trip (PUBLISH written → the same message
 *      delivered back) p50/p99, and the broker's CPU over that window. `node-net` answers CONNACK
 *      only, so it has no round trips.
 *
 * Each connection holds a descriptor here and one in the broker. Node.js raises its soft open-file
 * limit to the hard one as it starts, and the brokers inherit it (mosquitto too); N is capped to
 * fit the lower of this process's and the broker's limit, and the output says so.
 */
import { readFileSync } from 'node:fs';
import path from 'node:path';
import { performance } from 'node:perf_hooks';
import { parseArgs } from 'node:util';
import { setTimeout as sleep } from 'node:timers/promises';
import { BenchClient, type Endpoint } from './bench-client';
import { launchBroker, runBrokerCommand, stopAllBrokers, type BrokerName, type BrokerProcess } from './broker-process';
import { encodeConnect, encodePublish, makePayload } from './packets';
import { readCpuSeconds, readOpenFileLimit, readRssBytes } from './proc-stats';
import { bytesPerConnection, connectionCap } from './scenarios/idle-connections';
import { quantile } from './stats';

const REPO = path.resolve(__dirname, '..', '..', '..');
/** Share of an address's ephemeral ports used: the rest stays for other connections and TIME_WAIT. */
const PORT_SHARE = 0.8;
/**
 * Connections per source address at most: bind() with port 0 searches the address's ports for a
 * free one, a search that grows as they fill; loopback addresses cost nothing.
 */
const PER_ADDRESS = 1000;
/** Round trips in the first part of the window are not counted (connections and JIT warm up). */
const RTT_WARMUP_MS = 500;

export interface ScaleIdleOptions {
  /** Idle connections asked for (capped by the open-file limits). */
  readonly connections: number;
  /** Handshakes in progress at a time. */
  readonly concurrency: number;
  /** Source addresses to spread the connections over; 0 = as many as the ephemeral ports need. */
  readonly addresses: number;
  /** Clients measuring QoS 1 round trips while the others sit idle. */
  readonly active: number;
  /** The round-trip window (ms), after a settle pause of `settleMs`. */
  readonly measureMs: number;
  readonly settleMs: number;
  /** Give up on opening the connections after this many ms. */
  readonly timeoutMs: number;
}

export interface ScaleIdleResult {
  readonly broker: BrokerName;
  readonly asked: number;
  /** Connections attempted: `asked`, or less when capped. */
  readonly connections: number;
  /** The open-file limit that capped N (the lower of this process's and the broker's), or null. */
  readonly cappedBy: number | null;
  readonly addresses: readonly string[];
  /** Connections that got their CONNACK. */
  readonly connected: number;
  readonly failed: number;
  /** The first failure's reason, when some failed. */
  readonly firstFailure: string | null;
  readonly connectSeconds: number;
  readonly rssBefore: number;
  readonly rssAfter: number;
  /** Broker memory per idle connection (bytes): RSS growth ÷ connections held. */
  readonly bytesPerConnection: number;
  /** Null for a server that does not forward (node-net). */
  readonly roundTrips: { readonly count: number; readonly p50Ms: number; readonly p99Ms: number; readonly maxMs: number } | null;
  /** Broker CPU over the round-trip window (N idle + the active clients), % of one core. */
  readonly brokerCpuPercent: number;
}

/** [soft, hard] open-file limits of this process, or null when unreadable. */
export function ownOpenFileLimits(): [number, number] | null {
  try {
    const m = /^Max open files\s+(\d+|unlimited)\s+(\d+|unlimited)\s/m.exec(readFileSync('/proc/self/limits', 'utf8'));
    if (m === null) return null;
    const n = (s: string): number => (s === 'unlimited' ? Number.MAX_SAFE_INTEGER : Number(s));
    return [n(m[1]!), n(m[2]!)];
  } catch {
    return null;
  }
}

/** Ephemeral ports of one source address (net.ipv4.ip_local_port_range), or a cautious default. */
export function ephemeralPorts(): number {
  try {
    const [lo, hi] = readFileSync('/proc/sys/net/ipv4/ip_local_port_range', 'utf8').trim().split(/\s+/).map(Number);
    if (lo !== undefined && hi !== undefined && hi >= lo) return hi - lo + 1;
  } catch {
    // not Linux
  }
  return 16384;
}

/** The n-th loopback source address: 127.0.0.2, 127.0.0.3, …, 127.0.0.254, 127.0.1.2, … */
export function loopbackAddress(n: number): string {
  return `127.0.${Math.floor(n / 253)}.${(n % 253) + 2}`;
}

/** The source addresses for `connections`: `asked`, or as many as the ephemeral ports need. */
export function sourceAddresses(connections: number, asked: number): string[] {
  const perAddress = Math.min(PER_ADDRESS, Math.floor(ephemeralPorts() * PORT_SHARE));
  const count = asked > 0 ? asked : Math.max(1, Math.ceil(connections / perAddress));
  return Array.from({ length: count }, (_v, i) => loopbackAddress(i));
}

/** How many connections fit, and the limit that capped them (null when none did). */
export function capConnections(asked: number, brokerPid: number): { count: number; limit: number | null } {
  const count = Math.min(asked, connectionCap(brokerPid));
  if (count >= asked) return { count, limit: null };
  const own = readOpenFileLimit('self') ?? Number.MAX_SAFE_INTEGER;
  const broker = readOpenFileLimit(brokerPid) ?? Number.MAX_SAFE_INTEGER;
  return { count, limit: Math.min(own, broker) };
}

/** Opens `count` connections, `concurrency` at a time; failures are counted, not thrown. */
async function openIdle(
  endpoints: readonly Endpoint[],
  count: number,
  concurrency: number,
  idOf: (i: number) => string,
  deadline: number,
): Promise<{ clients: BenchClient[]; failed: number; firstFailure: string | null }> {
  const clients: BenchClient[] = [];
  let failed = 0;
  let firstFailure: string | null = null;
  let next = 0;
  const worker = async (): Promise<void> => {
    while (next < count && performance.now() < deadline) {
      const i = next++;
      const id = idOf(i);
      try {
        clients.push(await BenchClient.open(endpoints[i % endpoints.length]!, id, encodeConnect(id, 0, true, 4), 10_000));
      } catch (err) {
        failed++;
        firstFailure ??= (err as Error).message;
      }
    }
  };
  await Promise.all(Array.from({ length: Math.min(concurrency, count) }, worker));
  failed += count - next;
  if (next < count) firstFailure ??= `${count - next} not attempted: the time bound was reached`;
  return { clients, failed, firstFailure };
}

/** QoS 1 round trips of `active` clients for `ms`, one message in flight per client. */
async function roundTrips(endpoint: Endpoint, run: string, active: number, ms: number): Promise<number[]> {
  const samples: number[] = [];
  const clients: BenchClient[] = [];
  const payload = makePayload(64);
  try {
    for (let k = 0; k < active; k++) {
      const id = `rtt-${run}-${k}`;
      const c = await BenchClient.open(endpoint, id, encodeConnect(id, 0, true, 4), 10_000);
      clients.push(c);
      await c.subscribe(`scale/${run}/${k}`, 1, 10_000);
    }
    const start = performance.now();
    const end = start + RTT_WARMUP_MS + ms;
    let stopped = false;
    await Promise.all(
      clients.map(
        (c, k) =>
          new Promise<void>((resolve) => {
            const topic = `scale/${run}/${k}`;
            let packetId = 0;
            let sentAt = 0;
            const send = (): void => {
              packetId = packetId === 65535 ? 1 : packetId + 1;
              sentAt = performance.now();
              c.socket.write(encodePublish(topic, payload, 1, packetId));
            };
            c.autoAck = true;
            c.splitter.inspectPublishes = true;
            c.onPublish = () => {
              const now = performance.now();
              if (now - start >= RTT_WARMUP_MS) samples.push(now - sentAt);
              if (now < end && !stopped) send();
              else resolve();
            };
            c.onLost = () => resolve();
            // Bounded even if a message never comes back.
            setTimeout(resolve, end - start + 5000).unref();
            send();
          }),
      ),
    ).finally(() => {
      stopped = true;
    });
    return samples;
  } finally {
    for (const c of clients) c.close();
  }
}

/** One measurement against a freshly started broker. */
export async function runScaleIdle(broker: BrokerProcess, opts: ScaleIdleOptions): Promise<ScaleIdleResult> {
  const run = `${process.pid.toString(36)}${Date.now().toString(36)}`;
  const cap = capConnections(opts.connections, broker.pid);
  const addresses = sourceAddresses(cap.count, opts.addresses);
  const endpoints = addresses.map((a) => ({ host: broker.host, port: broker.port, localAddress: a }));
  const rssBefore = readRssBytes(broker.pid);
  if (rssBefore === null) throw new Error(`${broker.name}: cannot read /proc/${broker.pid}/status (memory is measured on Linux only)`);
  const t0 = performance.now();
  const idle = await openIdle(endpoints, cap.count, opts.concurrency, (i) => `idle-${run}-${i}`, t0 + opts.timeoutMs);
  const connectSeconds = (performance.now() - t0) / 1000;
  try {
    if (idle.clients.length === 0) throw new Error(`${broker.name}: no connection opened: ${idle.firstFailure ?? 'unknown reason'}`);
    await sleep(opts.settleMs);
    const rssAfter = readRssBytes(broker.pid) ?? Number.NaN;
    const cpu0 = readCpuSeconds(broker.pid);
    const tA = performance.now();
    const samples =
      broker.name === 'node-net' ? null : await roundTrips({ host: broker.host, port: broker.port }, run, opts.active, opts.measureMs);
    if (samples === null) await sleep(opts.measureMs);
    const cpu1 = readCpuSeconds(broker.pid);
    const seconds = (performance.now() - tA) / 1000;
    const lost = idle.clients.filter((c) => c.lostReason !== null).length;
    if (lost > 0)
      throw new Error(
        `${broker.name}: ${lost} idle connections were closed while idle (${idle.clients.find((c) => c.lostReason !== null)!.lostReason})`,
      );
    return {
      broker: broker.name,
      asked: opts.connections,
      connections: cap.count,
      cappedBy: cap.limit,
      addresses,
      connected: idle.clients.length,
      failed: idle.failed,
      firstFailure: idle.firstFailure,
      connectSeconds,
      rssBefore,
      rssAfter,
      bytesPerConnection: bytesPerConnection(rssBefore, rssAfter, idle.clients.length),
      roundTrips:
        samples === null
          ? null
          : { count: samples.length, p50Ms: quantile(samples, 0.5), p99Ms: quantile(samples, 0.99), maxMs: quantile(samples, 1) },
      brokerCpuPercent: cpu0 === null || cpu1 === null ? Number.NaN : ((cpu1 - cpu0) / seconds) * 100,
    };
  } finally {
    for (const c of idle.clients) c.close();
  }
}

const USAGE = `Usage: npm run bench:scale-idle -- [options]

Opens N idle MQTT connections against each broker (freshly started) from loopback source
addresses 127.0.0.2, 127.0.0.3, …, reports the broker's memory per connection, and while they sit
idle the QoS 1 round trip p50/p99 of a few active clients. N is capped by the open-file limits.

Options:
  --connections <n>   idle connections (default 250000)
  --brokers a,b       bifro, mosquitto, node-net, node-forward (default bifro,node-net)
  --runs <n>          measurements per broker, alternating (default 1)
  --active <n>        clients measuring round trips (default 10)
  --duration <s>      round-trip window (default 10)
  --settle <ms>       pause after connecting, before reading the memory (default 2000)
  --concurrency <n>   handshakes in progress at a time (default 200)
  --addresses <n>     source addresses (default: as many as the ephemeral ports need)
  --timeout <s>       bound on opening the connections (default 600)
  -h, --help          this help`;

const SCALE_BROKERS: readonly BrokerName[] = ['bifro', 'mosquitto', 'node-net', 'node-forward'];

function positive(name: string, text: string, min = 1): number {
  const n = Number(text);
  if (!Number.isInteger(n) || n < min) throw new Error(`--${name} must be an integer ≥ ${min}, got "${text}"`);
  return n;
}

function fmt(n: number, digits = 0): string {
  return Number.isFinite(n) ? n.toLocaleString('en-US', { maximumFractionDigits: digits, minimumFractionDigits: digits }) : 'n/a';
}

async function main(): Promise<number> {
  const { values } = parseArgs({
    options: {
      connections: { type: 'string', default: '250000' },
      brokers: { type: 'string', default: 'bifro,node-net' },
      runs: { type: 'string', default: '1' },
      active: { type: 'string', default: '10' },
      duration: { type: 'string', default: '10' },
      settle: { type: 'string', default: '2000' },
      concurrency: { type: 'string', default: '200' },
      addresses: { type: 'string', default: '0' },
      timeout: { type: 'string', default: '600' },
      help: { type: 'boolean', short: 'h' },
    },
  });
  if (values.help === true) {
    process.stdout.write(`${USAGE}\n`);
    return 0;
  }
  // Node.js raises its soft open-file limit to the hard one as it starts; what is left is the hard limit.
  const limits = ownOpenFileLimits();
  const brokers = values.brokers.split(',').map((b) => b.trim());
  for (const b of brokers)
    if (!(SCALE_BROKERS as readonly string[]).includes(b)) throw new Error(`unknown broker "${b}" (known: ${SCALE_BROKERS.join(', ')})`);
  const opts: ScaleIdleOptions = {
    connections: positive('connections', values.connections),
    concurrency: positive('concurrency', values.concurrency),
    addresses: positive('addresses', values.addresses, 0),
    active: positive('active', values.active),
    measureMs: Number(values.duration) * 1000,
    settleMs: positive('settle', values.settle, 0),
    timeoutMs: positive('timeout', values.timeout) * 1000,
  };
  if (!(opts.measureMs > 0)) throw new Error(`--duration must be a positive number, got "${values.duration}"`);
  const runs = positive('runs', values.runs);
  if (limits !== null) {
    const text = (n: number): string => (n === Number.MAX_SAFE_INTEGER ? 'unlimited' : String(n));
    process.stderr.write(
      `bench:scale-idle: open-file limit (ulimit -n) ${text(limits[0])}, hard ${text(limits[1])} (only root raises the hard one); brokers inherit it\n`,
    );
  }
  const results: ScaleIdleResult[] = [];
  try {
    for (let r = 0; r < runs; r++) {
      for (const name of (r % 2 === 0 ? brokers : [...brokers].reverse()) as BrokerName[]) {
        const broker = await launchBroker(name, { repoRoot: REPO, cpus: null, readyTimeoutMs: 20_000 });
        try {
          const x = await runScaleIdle(broker, opts);
          results.push(x);
          if (x.cappedBy !== null && r === 0)
            process.stderr.write(
              `  N capped at ${fmt(x.connections)} by the open-file limit ${fmt(x.cappedBy)} (ulimit -n of this process and ${name})\n`,
            );
          process.stderr.write(
            `  ${name} [${r + 1}]: ${fmt(x.connected)} connected in ${x.connectSeconds.toFixed(1)} s from ${x.addresses.length} address(es), ` +
              `${fmt(x.bytesPerConnection)} bytes/conn` +
              `${x.roundTrips === null ? '' : `, QoS 1 round trip p50 ${x.roundTrips.p50Ms.toFixed(2)} / p99 ${x.roundTrips.p99Ms.toFixed(2)} ms`}` +
              `${x.failed > 0 ? `, ${x.failed} failed (${x.firstFailure ?? ''})` : ''}\n`,
          );
        } finally {
          await broker.stop();
        }
      }
    }
  } finally {
    await stopAllBrokers();
  }
  const median = (xs: number[]): number => [...xs].sort((a, b) => a - b)[Math.floor((xs.length - 1) / 2)]!;
  const first = results[0];
  if (first === undefined) return 1;
  const capNote =
    first.cappedBy === null
      ? ''
      : `N capped at ${fmt(first.connections)} by the open-file limit ${fmt(first.cappedBy)} (asked ${fmt(first.asked)}; ulimit -n of this process and the broker)\n`;
  process.stdout.write(
    `\n${capNote}idle connections: ${fmt(first.connections)} from ${first.addresses.length} loopback address(es) (${first.addresses[0]}…), ` +
      `${opts.active} active clients measuring QoS 1 round trips for ${opts.measureMs / 1000} s (median of ${runs})\n`,
  );
  const bifro = results.filter((x) => x.broker === 'bifro');
  const ref = results.filter((x) => x.broker === 'node-net');
  for (const name of brokers) {
    const mine = results.filter((x) => x.broker === name);
    if (mine.length === 0) continue;
    const m = (f: (x: ScaleIdleResult) => number): number => median(mine.map(f));
    const rt = mine.every((x) => x.roundTrips !== null)
      ? `QoS 1 round trip p50 ${m((x) => x.roundTrips!.p50Ms).toFixed(2)} / p99 ${m((x) => x.roundTrips!.p99Ms).toFixed(2)} ms (${fmt(m((x) => x.roundTrips!.count))} samples)`
      : 'no round trips (answers CONNACK only)';
    process.stdout.write(
      `${name.padEnd(12)} ${fmt(m((x) => x.connected))} connected in ${m((x) => x.connectSeconds).toFixed(1)} s   ` +
        `memory ${fmt(m((x) => x.bytesPerConnection))} bytes/conn (RSS ${fmt(m((x) => x.rssBefore) / 1048576, 1)} → ${fmt(m((x) => x.rssAfter) / 1048576, 1)} MiB)   ` +
        `${rt}   broker CPU in that window ${fmt(
          m((x) => x.brokerCpuPercent),
          1,
        )} %` +
        `${Math.max(...mine.map((x) => x.failed)) > 0 ? `   failed ${fmt(Math.max(...mine.map((x) => x.failed)))}` : ''}\n`,
    );
  }
  if (bifro.length > 0 && ref.length > 0) {
    const b = median(bifro.map((x) => x.bytesPerConnection));
    const n = median(ref.map((x) => x.bytesPerConnection));
    process.stdout.write(`memory per idle connection, bifro/node-net: ${(b / n).toFixed(2)}×\n`);
  }
  return 0;
}

if (require.main === module) runBrokerCommand('bench:scale-idle', main);
