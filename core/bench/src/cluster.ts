/**
 * `npm run bench:cluster`: Bifro in cluster mode on one machine (docs/performance.md § Cluster).
 *
 * Starts a nats-server (JetStream, its store in a temporary folder) and two Bifro nodes A and B in
 * cluster mode on it, each pinned to its own core when `taskset` is there (on 4 cores or more,
 * nats-server and the generator get the others; on 2 they are not pinned and share the nodes'
 * cores). Then, with the scenario engine:
 *   1. scale-out: two fan-in topic groups (QoS 0, N publishers → 1 subscriber each), both on A,
 *      then one on A and one on B (no cross-node traffic): messages/s delivered in total;
 *   2. QoS 1 pairs, publishers on A and subscribers on B (every PUBACK waits for B), against all
 *      on A: acknowledged publishes/s;
 *   3. latency at a fixed rate (5,000 msg/s), publishers on A and the subscriber on B, against all
 *      on A: the difference is what the hop adds.
 * Each figure comes with the CPU of both nodes, nats-server, the generator and the rest of the
 * machine over its window, and what limited it. Every process started here is stopped by its pid at the end or on Ctrl-C.
 */
import os from 'node:os';
import path from 'node:path';
import { parseArgs } from 'node:util';
import {
  findTaskset,
  launchBroker,
  launchNatsServer,
  pinSelf,
  runBrokerCommand,
  type BrokerProcess,
  type NatsProcess,
} from './broker-process';
import { CpuWindow, limitOf, type CpuUse, type Pids } from './cluster-cpu';
import { runSplit, together, waitForCrossDelivery, type SplitShape } from './cluster-split';
import { machineInfo, type MachineInfo } from './machine';
import { formatValue, renderTable } from './report';
import { runScenario, type ScenarioResult, type Target, type Timing } from './scenario';
import { fanIn } from './scenarios';

export type { CpuUse } from './cluster-cpu';
export { limitOf } from './cluster-cpu';

const REPO = path.resolve(__dirname, '..', '..', '..');

export interface ClusterBenchOptions {
  readonly timing: Timing;
  /** Publishers per fan-in topic group (two groups). */
  readonly groupPublishers: number;
  /** QoS 1 publisher → subscriber pairs. */
  readonly pairs: number;
  /** QoS 1: unacknowledged PUBLISH per publisher. */
  readonly inflight: number;
  /** Latency: total messages/s and publishers. */
  readonly latencyRate: number;
  readonly latencyPublishers: number;
  readonly payload: number;
  /** Pin node A to CPU 0 and node B to CPU 1 (with taskset, on 2 cores or more). */
  readonly pin: boolean;
  /** Run every measurement this many times, interleaved, and keep the median run (default 1). */
  readonly repeat?: number;
  /** Generator worker threads per run (default: the engine's). */
  readonly workers?: number;
  /** A line per step (stderr). */
  readonly log?: (line: string) => void;
}

/** One run: its figures, the CPU over its window, what limited it. */
export interface ClusterRun {
  readonly name: string;
  readonly values: Readonly<Record<string, number>>;
  readonly cpu: CpuUse;
  readonly limit: string;
  readonly notes: readonly string[];
}

export interface ClusterBenchResult {
  readonly machine: MachineInfo;
  readonly pinned: boolean;
  /** Which process ran on which cores, in words. */
  readonly placement: string;
  readonly timing: Timing;
  readonly options: Omit<ClusterBenchOptions, 'log' | 'timing'>;
  readonly scaleOut: { readonly oneNode: ClusterRun; readonly twoNodes: ClusterRun; readonly ratio: number };
  readonly qos1: { readonly sameNode: ClusterRun; readonly crossNode: ClusterRun; readonly ratio: number };
  readonly latency: {
    readonly sameNode: ClusterRun;
    readonly crossNode: ClusterRun;
    readonly addedP50Ms: number;
    readonly addedP99Ms: number;
  };
  /** The pids this run started (all stopped when it returns). */
  readonly pids: { readonly nats: number; readonly nodeA: number; readonly nodeB: number };
}

/** The nodes' CPU per delivered message, µs: what a node spends per message, summed over the nodes. */
function nodeCpuPerMessage(use: CpuUse, perSecond: number): { nodeCpuPerMessageUs?: number } {
  // A node without a reading (no progress tick in its window) counts as 0: in the runs here, the idle one.
  if ((use.nodeA === null && use.nodeB === null) || perSecond <= 0) return {};
  return { nodeCpuPerMessageUs: (((use.nodeA ?? 0) + (use.nodeB ?? 0)) / 100 / perSecond) * 1e6 };
}

/** Two fan-in topic groups at once, one per target (the same node twice, or A and B). */
async function runScaleOut(targets: readonly Target[], pids: Pids, opts: ClusterBenchOptions): Promise<ClusterRun> {
  const window = new CpuWindow(pids);
  const params = { ...fanIn.defaults, publishers: opts.groupPublishers, payload: opts.payload };
  const workers = opts.workers === undefined ? {} : { workers: opts.workers };
  const runs = await together<ScenarioResult>(
    targets.map(
      (t, i) => (signal) =>
        runScenario(fanIn, t, opts.timing, params, { ...workers, signal, ...(i === 0 ? { onProgress: window.onProgress } : {}) }).finally(
          () => window.close(),
        ),
    ),
  );
  const sum = (key: string): number => runs.reduce((n, r) => n + (r.metrics[key]?.value ?? 0), 0);
  const use = window.result(runs.map((result, i) => ({ result, pid: targets[i]!.pid! })));
  const one = new Set(targets.map((t) => t.port)).size === 1;
  return {
    name: one ? '1 node' : '2 nodes',
    values: { delivered: sum('received'), published: sum('sent'), ...nodeCpuPerMessage(use, sum('received')) },
    cpu: use,
    limit: limitOf(
      use,
      os.availableParallelism(),
      `no process saturated: the flow windows (${formatValue(params.window)} messages per group) over the round trip`,
    ),
    notes: [...new Set(runs.flatMap((r) => r.notes))],
  };
}

/** A split run's figures: acked/s from the publishers, latency from the subscribers, and what was lost between. */
function splitRun(
  name: string,
  r: { pub: ScenarioResult; sub: ScenarioResult; cpu: CpuUse; inflightTotal: number },
  otherwise: string,
): ClusterRun {
  const inflightTotal = r.inflightTotal;
  const values: Record<string, number> = {};
  for (const [k, m] of Object.entries(r.pub.metrics)) if (k === 'sent' || k === 'acked') values[k] = m.value;
  for (const [k, m] of Object.entries(r.sub.metrics)) if (k === 'p50' || k === 'p99' || k === 'samples') values[k] = m.value;
  const notes = [...new Set([...r.pub.notes, ...r.sub.notes])];
  const sent = r.pub.totals?.sent ?? 0;
  const received = r.sub.totals?.received ?? 0;
  if (received < sent * 0.99) notes.push(`${sent - received} of ${sent} messages published were not delivered`);
  // Little's law: what is in flight over the rate it completes at is the mean PUBACK round trip.
  const acked = values.acked ?? 0;
  if (inflightTotal > 0 && acked > 0) {
    values.roundTripMs = (inflightTotal / acked) * 1000;
    Object.assign(values, nodeCpuPerMessage(r.cpu, acked));
  }
  return { name, values, cpu: r.cpu, limit: limitOf(r.cpu, os.availableParallelism(), otherwise), notes };
}

/** Starts NATS and the two nodes, measures, and stops every process it started. */
export async function runClusterBench(opts: ClusterBenchOptions): Promise<ClusterBenchResult> {
  const log = opts.log ?? ((): void => undefined);
  const cores = os.availableParallelism();
  const pinned = opts.pin && findTaskset() !== null && cores >= 2;
  // Cores beyond the nodes' two go to nats-server and the generator (its worker threads, started
  // per run, inherit this thread's affinity), so that one node has no more room than two.
  const rest = pinned && cores >= 4 ? `2-${cores - 1}` : null;
  const placement = !pinned
    ? 'nothing pinned (no taskset, one core, or --no-pin): nodes, nats-server and generator share the cores'
    : rest !== null && pinSelf(rest)
      ? `node A on CPU 0, node B on CPU 1, nats-server and this generator on CPUs ${rest} (taskset)`
      : 'node A on CPU 0, node B on CPU 1 (taskset); nats-server and this generator unpinned, sharing both cores with the nodes';
  const nats: NatsProcess = await launchNatsServer({ cpus: rest });
  const started: BrokerProcess[] = [];
  try {
    const node = async (nodeId: string, cpus: string): Promise<BrokerProcess> => {
      const b = await launchBroker('bifro', { repoRoot: REPO, cpus: pinned ? cpus : null, cluster: { servers: [nats.url], nodeId } });
      started.push(b);
      return b;
    };
    const run = `${process.pid.toString(36)}${Date.now().toString(36)}`;
    const [a, b] = await Promise.all([node(`bench-a-${run}`, '0'), node(`bench-b-${run}`, '1')]);
    const A: Target = { host: a!.host, port: a!.port, pid: a!.pid };
    const B: Target = { host: b!.host, port: b!.port, pid: b!.pid };
    const pids: Pids = { nodeA: a!.pid, nodeB: b!.pid, nats: nats.pid };
    log(`nats-server ${nats.url} (pid ${nats.pid}), node A :${A.port} (pid ${a!.pid}), node B :${B.port} (pid ${b!.pid})`);
    log(`cluster ready: A → B delivery after ${Math.round(await waitForCrossDelivery(A, B, 30_000))} ms`);

    const repeat = opts.repeat ?? 1;
    /** Each of the two `repeat` times, alternating which goes first; the median run of each by `key`. */
    const compare = async (
      key: string,
      unit: string,
      first: (i: number) => Promise<ClusterRun>,
      second: (i: number) => Promise<ClusterRun>,
    ): Promise<[ClusterRun, ClusterRun]> => {
      const got: [ClusterRun[], ClusterRun[]] = [[], []];
      for (let i = 0; i < repeat; i++)
        for (const which of i % 2 === 0 ? [0, 1] : [1, 0]) {
          const r = await (which === 0 ? first(i) : second(i));
          log(`  ${r.name}${repeat > 1 ? ` [${i + 1}]` : ''}: ${formatValue(r.values[key] ?? Number.NaN)} ${unit}; ${r.limit}`);
          got[which]!.push(r);
        }
      return [median(got[0], key), median(got[1], key)];
    };
    log(`scale-out, fan-in QoS 0, 2 × (${opts.groupPublishers} → 1)`);
    const [oneNode, twoNodes] = await compare(
      'delivered',
      'msg/s',
      () => runScaleOut([A, A], pids, opts),
      () => runScaleOut([A, B], pids, opts),
    );

    const tag = (kind: string): string => `${run}${kind}`;
    const qos1 = (t: string): SplitShape => ({
      tag: tag(t),
      qos: 1,
      publishers: opts.pairs,
      subscribers: 'paired',
      rate: 0,
      payload: opts.payload,
      inflight: opts.inflight,
      latency: false,
    });
    const inFlight = `no process saturated: ${opts.pairs} publishers × ${opts.inflight} in flight over the PUBACK round trip`;
    log(`QoS 1, ${opts.pairs} pairs, inflight ${opts.inflight}`);
    const [qosSame, qosCross] = await compare(
      'acked',
      'acked/s',
      async (i) => splitRun('same node', await runSplit(qos1(`qs${i}`), A, A, pids, opts), inFlight),
      async (i) =>
        splitRun(
          'across nodes',
          await runSplit(qos1(`qx${i}`), A, B, pids, opts),
          `${inFlight}, which across nodes holds the forward batch (flushed 1 ms after its first message) and B's reply through NATS`,
        ),
    );

    const lat = (t: string): SplitShape => ({
      tag: tag(t),
      qos: 0,
      publishers: opts.latencyPublishers,
      subscribers: 'wildcard',
      rate: opts.latencyRate,
      payload: Math.max(8, opts.payload),
      inflight: opts.inflight,
      latency: true,
    });
    const rateLimit = `the fixed rate (${formatValue(opts.latencyRate)} msg/s): nothing saturated`;
    log(`latency, QoS 0, ${opts.latencyPublishers} → 1 at ${formatValue(opts.latencyRate)} msg/s`);
    const [latSame, latCross] = await compare(
      'p50',
      'ms p50',
      async (i) => splitRun('same node', await runSplit(lat(`ls${i}`), A, A, pids, opts), rateLimit),
      async (i) => splitRun('across nodes', await runSplit(lat(`lx${i}`), A, B, pids, opts), rateLimit),
    );

    const v = (r: ClusterRun, k: string): number => r.values[k] ?? Number.NaN;
    const { log: _log, timing, ...rest } = opts;
    return {
      machine: machineInfo(),
      pinned,
      placement,
      timing,
      options: rest,
      scaleOut: { oneNode, twoNodes, ratio: v(twoNodes, 'delivered') / v(oneNode, 'delivered') },
      qos1: { sameNode: qosSame, crossNode: qosCross, ratio: v(qosCross, 'acked') / v(qosSame, 'acked') },
      latency: {
        sameNode: latSame,
        crossNode: latCross,
        addedP50Ms: v(latCross, 'p50') - v(latSame, 'p50'),
        addedP99Ms: v(latCross, 'p99') - v(latSame, 'p99'),
      },
      pids,
    };
  } finally {
    // Nodes first, so they leave the cluster cleanly while NATS is still there.
    await Promise.all(started.map((b) => b.stop()));
    await nats.stop();
  }
}

/** The median run by `key` (the lower middle one of an even count). */
function median(runs: readonly ClusterRun[], key: string): ClusterRun {
  const sorted = [...runs].sort((a, b) => (a.values[key] ?? 0) - (b.values[key] ?? 0));
  return sorted[Math.floor((sorted.length - 1) / 2)]!;
}

function ratioText(a: ClusterRun, b: ClusterRun, key: string): string {
  const x = a.values[key];
  const y = b.values[key];
  return x === undefined || y === undefined || y === 0 ? '—' : `${(x / y).toFixed(2)}×`;
}

const pct = (v: number | null): string => (v === null ? 'n/a' : `${Math.round(v)} %`);

/** The figures table, then the CPU and the limit of every run. */
export function renderClusterReport(r: ClusterBenchResult): string {
  const o = r.options;
  const v = (run: ClusterRun, k: string): string => formatValue(run.values[k] ?? Number.NaN);
  const signed = (ms: number): string => `${ms >= 0 ? '+' : ''}${ms.toFixed(2)} ms`;
  const figures = renderTable(
    ['measurement', '1 node / same node', '2 nodes / across', 'compared'],
    [
      {
        cells: [
          `fan-in QoS 0, 2 groups × (${o.groupPublishers} → 1), delivered msg/s ↑`,
          v(r.scaleOut.oneNode, 'delivered'),
          v(r.scaleOut.twoNodes, 'delivered'),
          `${r.scaleOut.ratio.toFixed(2)}× (target ≥ 1.6×)`,
        ],
      },
      {
        cells: [
          '  the nodes’ CPU per delivered message, µs ↓',
          v(r.scaleOut.oneNode, 'nodeCpuPerMessageUs'),
          v(r.scaleOut.twoNodes, 'nodeCpuPerMessageUs'),
          ratioText(r.scaleOut.twoNodes, r.scaleOut.oneNode, 'nodeCpuPerMessageUs'),
        ],
      },
      {
        cells: [
          `QoS 1, ${o.pairs} pairs, inflight ${o.inflight}, publishers on A, acked/s ↑`,
          v(r.qos1.sameNode, 'acked'),
          v(r.qos1.crossNode, 'acked'),
          `${r.qos1.ratio.toFixed(2)}× (PUBACK round trip ${v(r.qos1.sameNode, 'roundTripMs')} → ${v(r.qos1.crossNode, 'roundTripMs')} ms)`,
        ],
      },
      {
        cells: [
          '  the nodes’ CPU per acknowledged message, µs ↓',
          v(r.qos1.sameNode, 'nodeCpuPerMessageUs'),
          v(r.qos1.crossNode, 'nodeCpuPerMessageUs'),
          ratioText(r.qos1.crossNode, r.qos1.sameNode, 'nodeCpuPerMessageUs'),
        ],
      },
      {
        cells: [
          `latency QoS 0, ${o.latencyPublishers} → 1 at ${formatValue(o.latencyRate)} msg/s, p50 ms ↓`,
          v(r.latency.sameNode, 'p50'),
          v(r.latency.crossNode, 'p50'),
          `${signed(r.latency.addedP50Ms)} (the hop)`,
        ],
      },
      {
        cells: [
          'latency p99 ms ↓',
          v(r.latency.sameNode, 'p99'),
          v(r.latency.crossNode, 'p99'),
          `${signed(r.latency.addedP99Ms)} (the hop)`,
        ],
      },
    ],
    [false, true, true, true],
  );
  const runs: [string, ClusterRun][] = [
    ['scale-out, 1 node', r.scaleOut.oneNode],
    ['scale-out, 2 nodes', r.scaleOut.twoNodes],
    ['QoS 1, same node', r.qos1.sameNode],
    ['QoS 1, across nodes', r.qos1.crossNode],
    ['latency, same node', r.latency.sameNode],
    ['latency, across nodes', r.latency.crossNode],
  ];
  const cpuTable = renderTable(
    ['run', 'node A', 'node B', 'nats-server', 'generator', 'busiest loop', 'other work', 'limited by'],
    runs.map(([name, run]) => ({
      cells: [
        name,
        pct(run.cpu.nodeA),
        pct(run.cpu.nodeB),
        pct(run.cpu.nats),
        pct(run.cpu.generator),
        pct(run.cpu.generatorLoop),
        pct(run.cpu.others),
        run.limit,
      ],
    })),
    [false, true, true, true, true, true, true, false],
  );
  const notes = runs.flatMap(([name, run]) => run.notes.map((n) => `  ${name}: ${n}`));
  return [
    `cluster: 2 Bifro nodes on one nats-server (JetStream), ${r.machine.cpus} cores (${r.machine.cpuModel}); ${r.placement}`,
    `${r.timing.warmupMs / 1000} s warm-up + ${r.timing.measureMs / 1000} s measured per run` +
      `${(o.repeat ?? 1) > 1 ? `, median of ${o.repeat} interleaved runs` : ''}; CPU in % of one core over each measured window ` +
      '(other work: the rest of the machine, from /proc/stat)',
    '',
    figures,
    '',
    cpuTable,
    ...(notes.length > 0 ? ['', 'notes:', ...notes] : []),
    '',
  ].join('\n');
}

const USAGE = `npm run bench:cluster -- [options]

Starts nats-server (JetStream) and two Bifro nodes in cluster mode on free 127.0.0.1 ports, then
measures scale-out (fan-in QoS 0, one node vs two), QoS 1 acked/s across nodes vs on one, and the
latency a hop adds at a fixed rate. Stops everything it started at the end and on Ctrl-C.

  --quick                 0.5 s warm-up + 1.5 s measured per run
  --duration s            measured window per run (default 5; --quick 1.5)
  --warmup s              warm-up per run (default 2; --quick 0.5)
  --publishers n          publishers per fan-in topic group (10; two groups)
  --pairs n               QoS 1 publisher → subscriber pairs (10)
  --inflight n            QoS 1 unacknowledged PUBLISH per publisher (64)
  --rate n                latency: total msg/s (5000)
  --latency-publishers n  latency: publishers (10)
  --payload B             payload bytes (64)
  --repeat n              run every measurement n times, interleaved, keep the median run (1)
  --workers n             generator worker threads per run (default min(cores − 1, 4), at least 1)
  --no-pin                pin nothing (default: a core per node; on 4+ cores the rest to nats-server and the generator)
  --json                  the result as one JSON object on stdout (the steps still go to stderr)`;

function number(name: string, text: string, min: number, integer = true): number {
  const n = Number(text);
  if (!Number.isFinite(n) || n < min || (integer && !Number.isInteger(n)))
    throw new Error(`--${name} must be ${integer ? 'a whole number' : 'a number'} ≥ ${min}, got "${text}"`);
  return n;
}

async function main(): Promise<number> {
  const { values } = parseArgs({
    options: {
      quick: { type: 'boolean' },
      json: { type: 'boolean' },
      duration: { type: 'string' },
      warmup: { type: 'string' },
      publishers: { type: 'string', default: '10' },
      pairs: { type: 'string', default: '10' },
      inflight: { type: 'string', default: '64' },
      rate: { type: 'string', default: '5000' },
      'latency-publishers': { type: 'string', default: '10' },
      payload: { type: 'string', default: '64' },
      workers: { type: 'string' },
      repeat: { type: 'string', default: '1' },
      'no-pin': { type: 'boolean' },
      help: { type: 'boolean', short: 'h' },
    },
  });
  if (values.help === true) {
    process.stdout.write(`${USAGE}\n`);
    return 0;
  }
  const quick = values.quick === true;
  const timing: Timing = {
    warmupMs: number('warmup', values.warmup ?? (quick ? '0.5' : '2'), 0, false) * 1000,
    measureMs: number('duration', values.duration ?? (quick ? '1.5' : '5'), 0.5, false) * 1000,
    setupTimeoutMs: 10_000,
  };
  const result = await runClusterBench({
    timing,
    groupPublishers: number('publishers', values.publishers, 1),
    pairs: number('pairs', values.pairs, 1),
    inflight: number('inflight', values.inflight, 1),
    latencyRate: number('rate', values.rate, 1),
    latencyPublishers: number('latency-publishers', values['latency-publishers'], 1),
    payload: number('payload', values.payload, 0),
    pin: values['no-pin'] !== true,
    repeat: number('repeat', values.repeat, 1),
    ...(values.workers === undefined ? {} : { workers: number('workers', values.workers, 0) }),
    log: (line) => process.stderr.write(`${line}\n`),
  });
  process.stdout.write(values.json === true ? `${JSON.stringify(result, null, 2)}\n` : renderClusterReport(result));
  return 0;
}

if (require.main === module) runBrokerCommand('bench:cluster', main);
