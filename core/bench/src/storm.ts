/**
 * `npm run bench:storm`: a fleet reconnecting at once (docs/performance.md § Fleet reconnect storm).
 *
 * For each broker (Bifro, mosquitto when installed), alternating `--runs` times:
 *   1. N devices connect with persistent sessions (clean session 0) and subscribe, at QoS 1, to
 *      one announcement topic; then they all drop (sockets closed, no DISCONNECT: an outage);
 *   2. a publisher sends M QoS 1 messages to that topic and waits for every PUBACK: each device
 *      now has M messages queued in its session;
 *   3. every device reconnects within `--spread` ms (spread evenly), acknowledging what it gets.
 * Measured from the first reconnect: the time until every device has its CONNACK, and until every
 * queued message is delivered and acknowledged; CONNACK p50/p99; refusals, lost messages and
 * duplicates (QoS 1 allows duplicates, never a loss).
 *
 * mosquitto runs with `persistence true` by default (`--mosquitto-persistence false` for its
 * in-memory mode): its state is still served from memory, and written out as a snapshot every
 * `autosave_interval` (1800 s by default) and at exit, not fsynced per message.
 *
 * `--flood N` measures something else: N clean connections from 127.0.0.1 opened at once (a fleet
 * behind one NAT address reconnecting), against each broker's default configuration: the connect
 * rate and how many were refused (docs/performance.md § Connect flood from one address).
 *
 * The connections of one machine are bounded by the open-file limit of this process and of the
 * broker (`ulimit -n`): N is capped below it, and the cap is printed.
 */
import path from 'node:path';
import { performance } from 'node:perf_hooks';
import { parseArgs } from 'node:util';
import { setTimeout as sleep } from 'node:timers/promises';
import { BenchClient } from './bench-client';
import { findMosquitto, launchBroker, runBrokerCommand, stopAllBrokers, type BrokerName, type BrokerProcess } from './broker-process';
import { encodeConnect, encodePublish, makePayload } from './packets';
import { readOpenFileLimit } from './proc-stats';
import { quantile } from './stats';

const REPO = path.resolve(__dirname, '..', '..', '..');
const TOPIC = 'fleet/announce';
/** How mosquitto stores with `persistence true`, as printed with the figures. */
export const MOSQUITTO_PERSISTENT =
  'persistence true (a snapshot of its in-memory state every autosave_interval, 1800 s by default, and at exit; no per-message fsync)';
/** Handshakes in flight while the fleet first connects (phase 1 is set-up, not measured). */
const SETUP_CONCURRENCY = 64;

/** What one storm measured. */
export interface StormResult {
  readonly broker: BrokerName;
  readonly devices: number;
  readonly messages: number;
  /** ms from the first reconnect until the last CONNACK. */
  readonly allConnackedMs: number;
  /** ms from the first reconnect until every queued message was received (and acknowledged). */
  readonly allDeliveredMs: number;
  readonly connackP50Ms: number;
  readonly connackP99Ms: number;
  /** Reconnects refused or failed. */
  readonly refused: number;
  /** Queued messages never received (devices × messages − distinct messages received). */
  readonly lost: number;
  /** Messages received more than once. */
  readonly duplicates: number;
  /** Devices whose CONNACK said the session was not present (their queue was lost). */
  readonly sessionsLost: number;
}

export interface StormOptions {
  readonly devices: number;
  readonly messages: number;
  /** The reconnects are spread evenly over this many ms. */
  readonly spreadMs: number;
  /** Give up waiting for deliveries after this many ms. */
  readonly timeoutMs: number;
}

/** Opens `count` connections, `SETUP_CONCURRENCY` at a time. */
async function inBatches<T>(count: number, open: (i: number) => Promise<T>): Promise<T[]> {
  const out: T[] = new Array<T>(count);
  let next = 0;
  const worker = async (): Promise<void> => {
    while (next < count) {
      const i = next++;
      out[i] = await open(i);
    }
  };
  await Promise.all(Array.from({ length: Math.min(SETUP_CONCURRENCY, count) }, worker));
  return out;
}

/** One storm against a running broker. */
export async function runStorm(broker: BrokerProcess, opts: StormOptions): Promise<StormResult> {
  const endpoint = { host: broker.host, port: broker.port };
  const run = `${process.pid}-${Date.now().toString(36)}`;
  const idOf = (i: number): string => `dev-${run}-${i}`;
  const connectOf = (i: number): Buffer => encodeConnect(idOf(i), 0, false, 4);

  // 1. The fleet subscribes with persistent sessions, then drops.
  const first = await inBatches(opts.devices, async (i) => {
    const c = await BenchClient.open(endpoint, idOf(i), connectOf(i), 10_000);
    await c.subscribe(TOPIC, 1, 10_000);
    return c;
  });
  for (const c of first) c.close();
  await sleep(500);

  // 2. The announcements, each acknowledged (stored for every offline session) before the storm.
  const publisher = await BenchClient.open(endpoint, `pub-${run}`, encodeConnect(`pub-${run}`, 0, true, 4), 10_000);
  const payload = makePayload(64);
  for (let m = 0; m < opts.messages; m++) {
    payload.writeUInt32BE(m, 0);
    publisher.socket.write(encodePublish(TOPIC, payload, 1, m + 1));
  }
  const ackDeadline = performance.now() + opts.timeoutMs;
  while (publisher.splitter.pubacks < opts.messages && performance.now() < ackDeadline) await sleep(10);
  publisher.close();
  if (publisher.splitter.pubacks < opts.messages)
    throw new Error(`${broker.name}: only ${publisher.splitter.pubacks}/${opts.messages} PUBACKs`);

  // 3. The storm: every device reconnects within spreadMs and acknowledges what it receives.
  const seen: Set<number>[] = Array.from({ length: opts.devices }, () => new Set<number>());
  let duplicates = 0;
  let distinct = 0;
  const expected = opts.devices * opts.messages;
  let refused = 0;
  let sessionsLost = 0;
  let connacked = 0;
  let lastConnack = 0;
  let lastDelivery = 0;
  const connackMs: number[] = [];
  const clients: BenchClient[] = [];
  const start = performance.now();
  const reconnects: Promise<void>[] = [];
  for (let i = 0; i < opts.devices; i++) {
    const at = (i * opts.spreadMs) / opts.devices;
    const wait = at - (performance.now() - start);
    if (wait >= 1) await sleep(wait);
    // Handlers are set before CONNECT: queued messages may come in CONNACK's chunk.
    const setup = (c: BenchClient): void => {
      c.autoAck = true;
      c.splitter.inspectPublishes = true;
      c.onPublish = (_first, buf, bodyStart) => {
        // Topic, packet id, then the payload: its first 4 bytes number the message.
        const topicLength = buf.readUInt16BE(bodyStart);
        const m = buf.readUInt32BE(bodyStart + 2 + topicLength + 2);
        const set = seen[i]!;
        if (set.has(m)) duplicates++;
        else {
          set.add(m);
          if (++distinct === expected) lastDelivery = performance.now();
        }
      };
    };
    reconnects.push(
      BenchClient.open(endpoint, idOf(i), connectOf(i), opts.timeoutMs, 4, setup).then(
        (c) => {
          clients.push(c);
          connacked++;
          lastConnack = performance.now();
          connackMs.push(c.connackMs);
          if (!c.sessionPresent) sessionsLost++;
        },
        () => {
          refused++;
        },
      ),
    );
  }
  await Promise.all(reconnects);
  const deadline = start + opts.timeoutMs;
  while (distinct < expected && performance.now() < deadline) await sleep(5);
  // Acknowledgements of the last chunk are written after it is read: let them leave.
  await sleep(100);
  for (const c of clients) c.close();
  return {
    broker: broker.name,
    devices: opts.devices,
    messages: opts.messages,
    allConnackedMs: connacked === 0 ? Number.NaN : lastConnack - start,
    allDeliveredMs: distinct === expected ? lastDelivery - start : Number.NaN,
    connackP50Ms: quantile(connackMs, 0.5),
    connackP99Ms: quantile(connackMs, 0.99),
    refused,
    lost: expected - distinct,
    duplicates,
    sessionsLost,
  };
}

/** What a connect flood from one address measured. */
export interface FloodResult {
  readonly broker: BrokerName;
  readonly connections: number;
  /** Connections that got CONNACK 0. */
  readonly accepted: number;
  /** Connections refused or closed before CONNACK (or not answered within the timeout). */
  readonly refused: number;
  /** ms from the first connect until the last CONNACK. */
  readonly allConnackedMs: number;
  /** accepted ÷ allConnackedMs, in connections per second. */
  readonly rate: number;
}

/**
 * `connections` clean MQTT 3.1.1 clients from 127.0.0.1, all opened at once (no pacing, no cap on
 * handshakes in flight): a fleet behind one NAT address or load balancer reconnecting after an
 * outage. Every connection is held until the end, then closed.
 */
export async function runFlood(broker: BrokerProcess, connections: number, timeoutMs: number): Promise<FloodResult> {
  const endpoint = { host: broker.host, port: broker.port };
  const run = `${process.pid}-${Date.now().toString(36)}`;
  const clients: BenchClient[] = [];
  let refused = 0;
  let lastConnack = 0;
  const start = performance.now();
  const opens = Array.from({ length: connections }, (_, i) =>
    BenchClient.open(endpoint, `flood-${run}-${i}`, encodeConnect(`flood-${run}-${i}`, 0, true, 4), timeoutMs).then(
      (c) => {
        clients.push(c);
        lastConnack = performance.now();
      },
      () => {
        refused++;
      },
    ),
  );
  await Promise.all(opens);
  for (const c of clients) c.close();
  const allConnackedMs = clients.length === 0 ? Number.NaN : lastConnack - start;
  return {
    broker: broker.name,
    connections,
    accepted: clients.length,
    refused,
    allConnackedMs,
    rate: (clients.length * 1000) / allConnackedMs,
  };
}

async function main(): Promise<void> {
  const { values } = parseArgs({
    options: {
      devices: { type: 'string', default: '5000' },
      messages: { type: 'string', default: '10' },
      spread: { type: 'string', default: '1000' },
      runs: { type: 'string', default: '3' },
      brokers: { type: 'string', default: 'bifro,mosquitto' },
      timeout: { type: 'string', default: '120' },
      'mosquitto-persistence': { type: 'string', default: 'true' },
      flood: { type: 'string' },
    },
  });
  if (values.flood !== undefined) return flood(Number(values.flood), Number(values.runs), values.brokers, Number(values.timeout) * 1000);
  const persistenceText = values['mosquitto-persistence'];
  if (persistenceText !== 'true' && persistenceText !== 'false')
    throw new Error(`--mosquitto-persistence must be true or false, got "${persistenceText}"`);
  const mosquittoPersistence = persistenceText === 'true';
  // Each device holds one descriptor here and one in the broker; keep room for everything else.
  const limit = Math.min(readOpenFileLimit('self') ?? 1024, 1_000_000) - 256;
  const devices = Math.min(Number(values.devices), limit);
  if (devices < Number(values.devices))
    process.stderr.write(`bench:storm: ${values.devices} devices asked, ${devices} fit under this process's open-file limit (ulimit -n)\n`);
  const opts: StormOptions = {
    devices,
    messages: Number(values.messages),
    spreadMs: Number(values.spread),
    timeoutMs: Number(values.timeout) * 1000,
  };
  const brokers = values.brokers.split(',').filter((b) => b !== 'mosquitto' || findMosquitto() !== null) as BrokerName[];
  const results: StormResult[] = [];
  try {
    for (let r = 0; r < Number(values.runs); r++) {
      for (const name of r % 2 === 0 ? brokers : [...brokers].reverse()) {
        const broker = await launchBroker(name, { repoRoot: REPO, cpus: null, readyTimeoutMs: 20_000, mosquittoPersistence });
        try {
          const result = await runStorm(broker, opts);
          results.push(result);
          process.stderr.write(
            `  ${name} [${r + 1}]: all CONNACKs ${result.allConnackedMs.toFixed(0)} ms, all delivered ${result.allDeliveredMs.toFixed(0)} ms, lost ${result.lost}, refused ${result.refused}\n`,
          );
        } finally {
          await broker.stop();
        }
      }
    }
  } finally {
    await stopAllBrokers();
  }
  const median = (xs: number[]): number => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)]!;
  process.stdout.write(
    `fleet reconnect storm: ${devices} devices, ${opts.messages} queued QoS 1 messages each, reconnecting within ${opts.spreadMs} ms (median of ${values.runs})\n`,
  );
  if (brokers.includes('mosquitto'))
    process.stdout.write(
      `mosquitto: ${mosquittoPersistence ? MOSQUITTO_PERSISTENT : 'persistence false (in memory only; --mosquitto-persistence true to compare with it on)'}\n`,
    );
  for (const name of brokers) {
    const mine = results.filter((r) => r.broker === name);
    if (mine.length === 0) continue;
    const m = (f: (r: StormResult) => number): number => median(mine.map(f));
    process.stdout.write(
      `${name.padEnd(10)} all CONNACKs ${m((r) => r.allConnackedMs).toFixed(0)} ms   all delivered+acked ${m((r) => r.allDeliveredMs).toFixed(0)} ms   ` +
        `CONNACK p50 ${m((r) => r.connackP50Ms).toFixed(1)} / p99 ${m((r) => r.connackP99Ms).toFixed(1)} ms   ` +
        `refused ${Math.max(...mine.map((r) => r.refused))}   lost ${Math.max(...mine.map((r) => r.lost))}   duplicates ${Math.max(...mine.map((r) => r.duplicates))}   ` +
        `sessions lost ${Math.max(...mine.map((r) => r.sessionsLost))}\n`,
    );
  }
}

/** `--flood N`: the connect flood of {@link runFlood} against each broker (default configuration), alternating `runs` times. */
async function flood(requested: number, runs: number, brokerList: string, timeoutMs: number): Promise<void> {
  const limit = Math.min(readOpenFileLimit('self') ?? 1024, 1_000_000) - 256;
  const connections = Math.min(requested, limit);
  if (connections < requested)
    process.stderr.write(
      `bench:storm: ${requested} connections asked, ${connections} fit under this process's open-file limit (ulimit -n)\n`,
    );
  const brokers = brokerList.split(',').filter((b) => b !== 'mosquitto' || findMosquitto() !== null) as BrokerName[];
  const results: FloodResult[] = [];
  try {
    for (let r = 0; r < runs; r++) {
      for (const name of r % 2 === 0 ? brokers : [...brokers].reverse()) {
        const broker = await launchBroker(name, { repoRoot: REPO, cpus: null, readyTimeoutMs: 20_000, mosquittoPersistence: false });
        try {
          const result = await runFlood(broker, connections, timeoutMs);
          results.push(result);
          process.stderr.write(
            `  ${name} [${r + 1}]: ${result.accepted} accepted, ${result.refused} refused, ${result.rate.toFixed(0)} conn/s (last CONNACK after ${result.allConnackedMs.toFixed(0)} ms)\n`,
          );
        } finally {
          await broker.stop();
        }
      }
    }
  } finally {
    await stopAllBrokers();
  }
  const median = (xs: number[]): number => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)]!;
  process.stdout.write(`connect flood: ${connections} connections from 127.0.0.1 opened at once (median of ${runs})\n`);
  for (const name of brokers) {
    const mine = results.filter((r) => r.broker === name);
    if (mine.length === 0) continue;
    process.stdout.write(
      `${name.padEnd(10)} ${median(mine.map((r) => r.rate)).toFixed(0)} conn/s   refused ${Math.max(...mine.map((r) => r.refused))} (most of any run)\n`,
    );
  }
}

if (require.main === module)
  runBrokerCommand('bench:storm', async () => {
    await main();
    return 0;
  });
