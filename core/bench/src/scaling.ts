/**
 * `npm run bench:scaling`: how much one machine gains from worker processes (docs/multicore.md).
 *
 * Starts `bifro start --workers 1`, then `--workers 2` (alternating, `--runs` times each), and
 * drives the same multi-tenant load against each: tenants `t0`..`t<n-1>` (clients log in as
 * `t<k>/u`, so the dev-only auth puts them in tenant `t<k>`), each with
 *   - fan-in: P publishers → 1 subscriber on a wildcard filter, QoS 0;
 *   - fan-out: 1 publisher → S subscribers on one topic, QoS 0;
 * and times opening every connection (with 2 workers about half are handed over). Prints each
 * figure per worker count, the scaling factor (2 workers / 1 worker, medians), and where the CPU
 * went: the broker processes (primary + workers) and this generator share the machine's cores.
 *
 * Built from the load generator's connection and packet pieces; the brokers are started here
 * because the comparison launcher does not take a worker count.
 */
import { spawn, type ChildProcess } from 'node:child_process';
import { mkdtempSync, readFileSync, readdirSync, rmSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { performance } from 'node:perf_hooks';
import { setTimeout as sleep } from 'node:timers/promises';
import mqtt from 'mqtt-packet';
import { BenchClient, type Endpoint } from './bench-client';
import { freePort } from './broker-process';
import { encodePublishBatch, makePayload } from './packets';
import { readCpuSeconds } from './proc-stats';

const HOST = '127.0.0.1';
const REPO = path.resolve(__dirname, '..', '..', '..');
const CLI = path.join(REPO, 'core', 'dist', 'cli', 'main.js');

export interface ScalingOptions {
  readonly tenants: number;
  readonly publishers: number;
  readonly subscribers: number;
  readonly payload: number;
  readonly batch: number;
  /** Messages (fan-in) or deliveries per subscriber (fan-out) in flight per tenant. */
  readonly window: number;
  readonly warmupMs: number;
  readonly measureMs: number;
  readonly runs: number;
  readonly workers: readonly number[];
}

export const DEFAULT_OPTIONS: ScalingOptions = {
  tenants: 4,
  publishers: 5,
  subscribers: 10,
  payload: 64,
  batch: 32,
  window: 8000,
  warmupMs: 2000,
  measureMs: 5000,
  runs: 3,
  workers: [1, 2],
};

export const QUICK_OPTIONS: Partial<ScalingOptions> = { warmupMs: 500, measureMs: 1500, runs: 1 };

const USAGE = `Usage: npm run bench:scaling -- [--quick] [--runs N] [--tenants N] [--publishers N] [--subscribers N]
                                  [--payload B] [--batch N] [--window N] [--warmup-ms MS] [--measure-ms MS]

Runs a multi-tenant fan-in and fan-out against bifro with 1 and with 2 worker processes and
prints the scaling factor. --quick: one short run of each.`;

/** One measured figure: throughput over the window, and CPU shares of one core. */
interface Figure {
  readonly value: number;
  readonly brokerCpu: number;
  readonly generatorCpu: number;
  /** CPU the machine spent on anything else (other processes, the hypervisor's steal), or null off Linux. */
  readonly otherCpu: number | null;
}

/** Above this share of a core taken by something else, a run counts as disturbed. */
const DISTURBED_CPU = 0.15;

interface RunResult {
  readonly workers: number;
  readonly connectPerSec: number;
  readonly fanIn: Figure;
  readonly fanOut: Figure;
}

// ------------------------------------------------------------------------------- broker

interface Broker {
  readonly endpoint: Endpoint;
  readonly child: ChildProcess;
  readonly dir: string;
  /** The primary and its workers (a single process with one worker). */
  pids(): number[];
}

/** Direct children of `pid` (Linux /proc). */
function childrenOf(pid: number): number[] {
  const out: number[] = [];
  for (const entry of readdirSync('/proc')) {
    if (!/^\d+$/.test(entry)) continue;
    try {
      const stat = readFileSync(`/proc/${entry}/stat`, 'utf8');
      const ppid = Number(stat.slice(stat.lastIndexOf(')') + 2).split(' ')[1]);
      if (ppid === pid) out.push(Number(entry));
    } catch {
      // gone meanwhile
    }
  }
  return out;
}

async function startBifro(workers: number): Promise<Broker> {
  const dir = mkdtempSync(path.join(os.tmpdir(), `bifro-scaling-${workers}w-`));
  const port = await freePort();
  const config = path.join(dir, 'bifro.yml');
  writeFileSync(
    config,
    [
      `dataDir: ${JSON.stringify(path.join(dir, 'data'))}`,
      `pluginsDir: ${JSON.stringify(path.join(REPO, 'plugins'))}`,
      `workers: ${workers}`,
      'listeners:',
      `  - { name: tcp, type: tcp, host: ${HOST}, port: ${port} }`,
      'plugins:',
      '  storage: "@bifro/plugin-storage-memory"',
      'log: { level: warn }',
      '',
    ].join('\n'),
  );
  const child = spawn(process.execPath, [CLI, 'start', '--config', config], { stdio: ['ignore', 'ignore', 'pipe'], cwd: dir });
  let stderr = '';
  child.stderr!.on('data', (d: Buffer) => (stderr = (stderr + d.toString()).slice(-4000)));
  const endpoint = { host: HOST, port };
  const deadline = Date.now() + 20000;
  for (;;) {
    if (child.exitCode !== null) throw new Error(`bifro --workers ${workers} exited during start: ${stderr}`);
    try {
      const probe = await BenchClient.open(endpoint, 'scaling-probe', connectPacket('scaling-probe', 'probe/u'), 1000);
      probe.close();
      // Every worker must be up, not only the one that answered.
      if (childrenOf(child.pid!).length >= (workers > 1 ? workers : 0)) break;
    } catch (err) {
      if (Date.now() > deadline) throw new Error(`bifro --workers ${workers} did not answer: ${(err as Error).message}`);
    }
    await sleep(100);
  }
  return { endpoint, child, dir, pids: () => [child.pid!, ...childrenOf(child.pid!)] };
}

async function stopBifro(broker: Broker): Promise<void> {
  const { child } = broker;
  if (child.exitCode === null && child.signalCode === null) {
    const exited = new Promise<void>((resolve) => child.once('exit', () => resolve()));
    child.kill('SIGTERM');
    const kill = setTimeout(() => child.kill('SIGKILL'), 10000);
    await exited;
    clearTimeout(kill);
  }
  rmSync(broker.dir, { recursive: true, force: true });
}

// ------------------------------------------------------------------------------- load

/** CONNECT (3.1.1) with a user name: the dev-only auth maps `t<k>/u` to tenant `t<k>`. */
function connectPacket(clientId: string, username: string): Buffer {
  return mqtt.generate(
    { cmd: 'connect', protocolId: 'MQTT', protocolVersion: 4, clientId, clean: true, keepalive: 0, username },
    { protocolVersion: 4 },
  );
}

/**
 * One tenant's QoS 0 publishers, kept at most `window` messages ahead of what its subscribers
 * received (`received()`: fan-in, the subscriber's count; fan-out, the slowest subscriber's). A
 * window that does not move for a second is written off (QoS 0 may be dropped).
 */
class TenantLoad {
  sent = 0;
  private running = false;
  private lastProgress = 0;
  private lastReceived = 0;
  private writtenOff = 0;
  private readonly timer: NodeJS.Timeout;

  constructor(
    private readonly publishers: readonly BenchClient[],
    private readonly batches: readonly Buffer[],
    private readonly perBatch: number,
    private readonly window: number,
    private readonly received: () => number,
  ) {
    this.timer = setInterval(() => this.watch(), 250);
    this.timer.unref();
  }

  start(): void {
    this.running = true;
    this.lastProgress = Date.now();
    for (const p of this.publishers) p.socket.on('drain', () => this.pump());
    this.pump();
  }

  stop(): void {
    this.running = false;
    clearInterval(this.timer);
  }

  /** Writes batches while the window and the sockets allow. */
  pump(): void {
    if (!this.running) return;
    for (let i = 0; i < this.publishers.length; i++) {
      const p = this.publishers[i]!;
      while (this.sent - this.writtenOff - this.received() + this.perBatch <= this.window && p.socket.writableLength === 0) {
        if (p.closed) return;
        this.sent += this.perBatch;
        p.socket.write(this.batches[i]!);
      }
    }
  }

  private watch(): void {
    const now = Date.now();
    const r = this.received();
    if (r !== this.lastReceived) {
      this.lastReceived = r;
      this.lastProgress = now;
      return;
    }
    if (this.running && now - this.lastProgress > 1000) {
      this.writtenOff = this.sent - r;
      this.lastProgress = now;
      this.pump();
    }
  }
}

async function openAll(endpoint: Endpoint, specs: readonly { id: string; user: string }[], concurrency = 50): Promise<BenchClient[]> {
  const out = new Array<BenchClient>(specs.length);
  let next = 0;
  const worker = async (): Promise<void> => {
    while (next < specs.length) {
      const i = next++;
      out[i] = await BenchClient.open(endpoint, specs[i]!.id, connectPacket(specs[i]!.id, specs[i]!.user), 10000);
    }
  };
  await Promise.all(Array.from({ length: Math.min(concurrency, specs.length) }, () => worker()));
  return out;
}

/** Busy CPU seconds of the whole machine (all cores) from /proc/stat, steal included; null when unreadable. */
function machineBusySeconds(): number | null {
  try {
    const fields = readFileSync('/proc/stat', 'utf8').split('\n')[0]!.trim().split(/\s+/).slice(1).map(Number);
    const [user = 0, nice = 0, system = 0, , , irq = 0, softirq = 0, steal = 0] = fields;
    return (user + nice + system + irq + softirq + steal) / 100;
  } catch {
    return null;
  }
}

function cpuSeconds(pids: readonly number[]): number {
  let sum = 0;
  for (const pid of pids) sum += readCpuSeconds(pid) ?? 0;
  return sum;
}

/** Runs the load for warm-up + measure and returns received/s with the CPU shares over the window. */
async function measure(broker: Broker, o: ScalingOptions, loads: readonly TenantLoad[], received: () => number): Promise<Figure> {
  for (const l of loads) l.start();
  try {
    await sleep(o.warmupMs);
    const pids = broker.pids();
    const r0 = received();
    const b0 = cpuSeconds(pids);
    const m0 = machineBusySeconds();
    const g0 = process.cpuUsage();
    const t0 = performance.now();
    await sleep(o.measureMs);
    const seconds = (performance.now() - t0) / 1000;
    const g = process.cpuUsage(g0);
    const m1 = machineBusySeconds();
    const brokerCpu = (cpuSeconds(pids) - b0) / seconds;
    const generatorCpu = (g.user + g.system) / 1e6 / seconds;
    return {
      value: (received() - r0) / seconds,
      brokerCpu,
      generatorCpu,
      otherCpu: m0 === null || m1 === null ? null : Math.max(0, (m1 - m0) / seconds - brokerCpu - generatorCpu),
    };
  } finally {
    for (const l of loads) l.stop();
  }
}

const tenantsOf = (o: ScalingOptions): string[] => Array.from({ length: o.tenants }, (_v, k) => `t${k}`);

async function fanIn(broker: Broker, o: ScalingOptions, tag: string): Promise<{ figure: Figure; connectPerSec: number }> {
  const tenants = tenantsOf(o);
  const specs = tenants.flatMap((t) => [
    { id: `${tag}-${t}-sub`, user: `${t}/u` },
    ...Array.from({ length: o.publishers }, (_v, i) => ({ id: `${tag}-${t}-pub${i}`, user: `${t}/u` })),
  ]);
  const t0 = performance.now();
  const clients = await openAll(broker.endpoint, specs);
  const connectPerSec = clients.length / ((performance.now() - t0) / 1000);
  try {
    const payload = makePayload(o.payload);
    const subs: BenchClient[] = [];
    const loads: TenantLoad[] = [];
    for (const [k, t] of tenants.entries()) {
      const group = clients.slice(k * (o.publishers + 1), (k + 1) * (o.publishers + 1));
      const sub = group[0]!;
      await sub.subscribe(`bench/${tag}/${t}/+`, 0, 10000);
      subs.push(sub);
      const pubs = group.slice(1);
      const load = new TenantLoad(
        pubs,
        pubs.map((_p, i) => encodePublishBatch(`bench/${tag}/${t}/${i}`, payload, o.batch)),
        o.batch,
        o.window,
        () => sub.splitter.publishes,
      );
      sub.onChunk = () => load.pump();
      loads.push(load);
    }
    const figure = await measure(broker, o, loads, () => subs.reduce((sum, s) => sum + s.splitter.publishes, 0));
    return { figure, connectPerSec };
  } finally {
    for (const c of clients) c.close();
  }
}

async function fanOut(broker: Broker, o: ScalingOptions, tag: string): Promise<Figure> {
  const tenants = tenantsOf(o);
  const specs = tenants.flatMap((t) => [
    { id: `${tag}-${t}-pub`, user: `${t}/u` },
    ...Array.from({ length: o.subscribers }, (_v, i) => ({ id: `${tag}-${t}-sub${i}`, user: `${t}/u` })),
  ]);
  const clients = await openAll(broker.endpoint, specs);
  try {
    const payload = makePayload(o.payload);
    const allSubs: BenchClient[] = [];
    const loads: TenantLoad[] = [];
    for (const [k, t] of tenants.entries()) {
      const group = clients.slice(k * (o.subscribers + 1), (k + 1) * (o.subscribers + 1));
      const topic = `bench/${tag}/${t}/out`;
      const subs = group.slice(1);
      await Promise.all(subs.map((s) => s.subscribe(topic, 0, 10000)));
      allSubs.push(...subs);
      const slowest = (): number => subs.reduce((min, s) => Math.min(min, s.splitter.publishes), Number.MAX_SAFE_INTEGER);
      const load = new TenantLoad(
        [group[0]!],
        [encodePublishBatch(topic, payload, o.batch)],
        o.batch,
        Math.max(o.batch, o.window / 4),
        slowest,
      );
      for (const s of subs) s.onChunk = () => load.pump();
      loads.push(load);
    }
    return await measure(broker, o, loads, () => allSubs.reduce((sum, s) => sum + s.splitter.publishes, 0));
  } finally {
    for (const c of clients) c.close();
  }
}

async function runOnce(workers: number, o: ScalingOptions, run: number): Promise<RunResult> {
  const broker = await startBifro(workers);
  try {
    const tag = `s${process.pid.toString(36)}r${run}w${workers}`;
    const inResult = await fanIn(broker, o, `${tag}i`);
    await sleep(200);
    const outFigure = await fanOut(broker, o, `${tag}o`);
    return { workers, connectPerSec: inResult.connectPerSec, fanIn: inResult.figure, fanOut: outFigure };
  } finally {
    await stopBifro(broker);
  }
}

// ------------------------------------------------------------------------------- report

function median(values: readonly number[]): number {
  const sorted = [...values].sort((a, b) => a - b);
  const mid = sorted.length >> 1;
  return sorted.length % 2 === 1 ? sorted[mid]! : (sorted[mid - 1]! + sorted[mid]!) / 2;
}

function medianFigure(figures: readonly Figure[]): Figure {
  const other = figures.map((f) => f.otherCpu).filter((c): c is number => c !== null);
  return {
    value: median(figures.map((f) => f.value)),
    brokerCpu: median(figures.map((f) => f.brokerCpu)),
    generatorCpu: median(figures.map((f) => f.generatorCpu)),
    otherCpu: other.length === 0 ? null : median(other),
  };
}

const disturbed = (f: Figure): boolean => f.otherCpu !== null && f.otherCpu > DISTURBED_CPU;

/** The median of the undisturbed runs, or of all when every run was disturbed. */
function robustFigure(figures: readonly Figure[]): { figure: Figure; used: number; of: number } {
  const calm = figures.filter((f) => !disturbed(f));
  const pick = calm.length > 0 ? calm : figures;
  return { figure: medianFigure(pick), used: pick.length, of: figures.length };
}

const fmt = (n: number): string => Math.round(n).toLocaleString('en-US');
const pct = (share: number): string => `${Math.round(share * 100)}%`;

export function renderReport(o: ScalingOptions, results: readonly RunResult[]): string {
  const lines: string[] = [];
  const cpus = os.cpus();
  lines.push(
    `machine: ${cpus.length} CPU(s) ${cpus[0]?.model.trim() ?? ''}, node ${process.version}; the generator and the broker share them`,
    `load: ${o.tenants} tenants (t0..t${o.tenants - 1}); fan-in ${o.publishers}→1 and fan-out 1→${o.subscribers} per tenant, QoS 0, ${o.payload} B payload; ` +
      `warm-up ${o.warmupMs} ms, measured ${o.measureMs} ms, median of ${o.runs} run(s)`,
    '',
    `CPU: shares of one core over the measured window; "other" = the machine's busy time not spent by the broker processes or this generator`,
    `(other processes, hypervisor steal). Runs with other > ${pct(DISTURBED_CPU)} are disturbed and left out of the medians when undisturbed runs exist.`,
    '',
    '| workers | connect (conn/s) | fan-in (msg/s) | broker / generator / other CPU | runs used | fan-out (deliveries/s) | broker / generator / other CPU | runs used |',
    '|---|---|---|---|---|---|---|---|',
  );
  const by = new Map<number, { connect: number; fanIn: Figure; fanOut: Figure }>();
  const cpu = (f: Figure): string => `${pct(f.brokerCpu)} / ${pct(f.generatorCpu)} / ${f.otherCpu === null ? 'n/a' : pct(f.otherCpu)}`;
  for (const w of o.workers) {
    const rs = results.filter((r) => r.workers === w);
    if (rs.length === 0) continue;
    const fanIn = robustFigure(rs.map((r) => r.fanIn));
    const fanOut = robustFigure(rs.map((r) => r.fanOut));
    const row = { connect: median(rs.map((r) => r.connectPerSec)), fanIn: fanIn.figure, fanOut: fanOut.figure };
    by.set(w, row);
    lines.push(
      `| ${w} | ${fmt(row.connect)} | ${fmt(row.fanIn.value)} | ${cpu(row.fanIn)} | ${fanIn.used}/${fanIn.of} | ${fmt(row.fanOut.value)} | ${cpu(row.fanOut)} | ${fanOut.used}/${fanOut.of} |`,
    );
  }
  const base = by.get(o.workers[0]!);
  lines.push('');
  for (const w of o.workers.slice(1)) {
    const row = by.get(w);
    if (base === undefined || row === undefined) continue;
    const f = (a: number, b: number): string => `×${(a / b).toFixed(2)}`;
    lines.push(
      `scaling factor ${w} workers / ${o.workers[0]} worker: fan-in ${f(row.fanIn.value, base.fanIn.value)}, fan-out ${f(row.fanOut.value, base.fanOut.value)}, ` +
        `connect ${f(row.connect, base.connect)}`,
      `  throughput per broker CPU-second: fan-in ${fmt(base.fanIn.value / base.fanIn.brokerCpu)} → ${fmt(row.fanIn.value / row.fanIn.brokerCpu)} msg, ` +
        `fan-out ${fmt(base.fanOut.value / base.fanOut.brokerCpu)} → ${fmt(row.fanOut.value / row.fanOut.brokerCpu)} deliveries`,
    );
  }
  return lines.join('\n');
}

// ------------------------------------------------------------------------------- main

export function parseScalingArgs(argv: readonly string[]): ScalingOptions | null {
  let o: ScalingOptions = { ...DEFAULT_OPTIONS };
  type NumericKey = Exclude<keyof ScalingOptions, 'workers'>;
  const numeric: Record<string, NumericKey> = {
    '--runs': 'runs',
    '--tenants': 'tenants',
    '--publishers': 'publishers',
    '--subscribers': 'subscribers',
    '--payload': 'payload',
    '--warmup-ms': 'warmupMs',
    '--measure-ms': 'measureMs',
    '--window': 'window',
    '--batch': 'batch',
  };
  const given: Partial<Record<NumericKey, number>> = {};
  for (let i = 0; i < argv.length; i++) {
    const arg = argv[i]!;
    if (arg === '--help' || arg === '-h') return null;
    if (arg === '--quick') {
      o = { ...o, ...QUICK_OPTIONS };
      continue;
    }
    const key = numeric[arg];
    const value = Number(argv[i + 1]);
    if (key === undefined || !Number.isInteger(value) || value < (key === 'payload' ? 0 : 1))
      throw new Error(`bench:scaling: ${key === undefined ? `unknown option ${arg}` : `${arg} needs a positive integer`}\n${USAGE}`);
    given[key] = value;
    i++;
  }
  return { ...o, ...given };
}

async function main(argv: readonly string[]): Promise<number> {
  const o = parseScalingArgs(argv);
  if (o === null) {
    process.stdout.write(`${USAGE}\n`);
    return 0;
  }
  const results: RunResult[] = [];
  for (let run = 0; run < o.runs; run++) {
    // Alternate the order so drift (thermal, page cache) does not favour one count.
    const order = run % 2 === 0 ? o.workers : [...o.workers].reverse();
    for (const w of order) {
      const r = await runOnce(w, o, run);
      const cpu = (f: Figure): string =>
        `broker ${pct(f.brokerCpu)}, generator ${pct(f.generatorCpu)}, other ${f.otherCpu === null ? 'n/a' : pct(f.otherCpu)}${disturbed(f) ? ', DISTURBED' : ''}`;
      process.stderr.write(
        `run ${run + 1}/${o.runs}, ${w} worker(s): connect ${fmt(r.connectPerSec)}/s, fan-in ${fmt(r.fanIn.value)} msg/s (${cpu(r.fanIn)}), ` +
          `fan-out ${fmt(r.fanOut.value)} deliveries/s (${cpu(r.fanOut)})\n`,
      );
      results.push(r);
    }
  }
  process.stdout.write(`${renderReport(o, results)}\n`);
  return 0;
}

if (require.main === module) {
  main(process.argv.slice(2)).then(
    (code) => process.exit(code),
    (err: unknown) => {
      process.stderr.write(`${err instanceof Error ? err.message : String(err)}\n`);
      process.exit(1);
    },
  );
}
