#!/usr/bin/env node
/**
 * `npm run bench:compare` (and `npm run bench`): starts Bifro, aedes and mosquitto, each on its
 * own 127.0.0.1 port, and runs the same scenarios as `bifro bench` against each in turn,
 * interleaved (for each repeat, for each scenario, each broker), so a slow phase of the machine
 * hits every broker alike. Prints one table with the median figures and the Bifro/aedes and
 * Bifro/mosquitto ratios. A scenario that fails against a broker shows `error: <reason>` in its
 * cell; the run goes on.
 */
import { existsSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import { performance } from 'node:perf_hooks';
import { parseArgs, type ParseArgsConfig } from 'node:util';
import {
  BROKER_NAMES,
  OPTIONAL_BROKERS,
  findMosquitto,
  findTaskset,
  isBrokerName,
  isShuttingDown,
  launchBroker,
  pinSelf,
  runBrokerCommand,
  type BrokerName,
  type BrokerProcess,
} from './broker-process';
import { machineInfo } from './machine';
import { formatValue, renderComparison, renderCpu, renderNotes, type Cell } from './report';
import {
  DEFAULT_TIMING,
  QUICK_TIMING,
  ParamError,
  checkParams,
  checkValue,
  defaultWorkers,
  flagOf,
  keyOf,
  resolveParams,
  runScenario,
  type ScenarioResult,
  type Timing,
} from './scenario';
import { SCENARIOS, findScenario } from './scenarios';

/** Every parameter flag of some scenario, with the scenarios that have it. */
function paramFlags(): Map<string, string[]> {
  const out = new Map<string, string[]>();
  for (const s of SCENARIOS)
    for (const k of Object.keys(s.specs)) {
      const flag = flagOf(k);
      out.set(flag, [...(out.get(flag) ?? []), s.name]);
    }
  return out;
}

export const COMPARE_USAGE = `Usage: npm run bench:compare -- [options]

Starts Bifro, aedes and mosquitto (when installed), each on its own 127.0.0.1 port, and runs the
scenarios of \`bifro bench\` against each in turn, interleaved: for each repeat, for each scenario,
each broker. Prints the median figures per broker and the Bifro/aedes and Bifro/mosquitto ratios.

Options:
  --quick                  about a minute: ${QUICK_TIMING.warmupMs / 1000} s warm-up + ${QUICK_TIMING.measureMs / 1000} s measured per cell and each
                           scenario's quick parameters (default ${DEFAULT_TIMING.warmupMs / 1000} s + ${DEFAULT_TIMING.measureMs / 1000} s)
  --scenarios a,b          ${SCENARIOS.map((s) => s.name).join(', ')} (default: all)
  --brokers a,b            ${BROKER_NAMES.join(', ')} (default: all; mosquitto when installed);
                           also ${OPTIONAL_BROKERS.join(', ')}: Bifro with the admin API, $SYS every second
                           and /metrics scraped every second
  --duration <s>           measured window in seconds
  --warmup <s>             warm-up in seconds
  --repeat <n>             run every cell n times (interleaved) and keep the median run (1)
  --workers <n>            generator worker threads (default min(cores − 1, 4), at least 1)
  --fresh                  a freshly started broker for every cell (default: one per broker,
                           restarted for idle-connections, which measures memory, or when it died)
  --json <file>            also write every figure (each run, the medians, the machine) as JSON
  --<parameter> <n>        a scenario parameter (bifro bench --list), applied to every scenario
                           that has it, e.g. --payload 256 --qos 1 --publishers 5
  --cpu-floor              also run node-forward (core/bench/node-forward.mjs, a bare Node net server
                           that only forwards PUBLISH packets) in every fixed-rate cell (--rate > 0,
                           not shared-sub), interleaved with the brokers, and print its CPU per
                           message under the CPU table: the floor of a broker on net.Socket streams
  --no-pin                 do not pin broker and generator to different CPUs with taskset
  -h, --help               this help`;

export interface CompareOptions {
  readonly quick: boolean;
  readonly scenarios: readonly string[];
  readonly brokers: readonly BrokerName[];
  readonly timing: Timing;
  readonly json: string | null;
  readonly repeat: number;
  readonly workers: number;
  readonly fresh: boolean;
  readonly overrides: Readonly<Record<string, number>>;
  readonly pin: boolean;
  /** Run the node-forward reference in the fixed-rate cells. */
  readonly cpuFloor: boolean;
}

function positiveNumber(name: string, text: string, integer: boolean): number {
  const n = Number(text);
  if (!Number.isFinite(n) || n <= 0 || (integer && !Number.isInteger(n)))
    throw new Error(`--${name} must be a positive ${integer ? 'integer' : 'number'}, got "${text}"`);
  return n;
}

function list(text: string | undefined): string[] | null {
  if (text === undefined) return null;
  return text
    .split(',')
    .map((s) => s.trim())
    .filter((s) => s !== '');
}

/** Parses the command line; returns null for --help, throws on a usage error. */
export function parseCompareArgs(argv: readonly string[]): CompareOptions | null {
  const flags = paramFlags();
  const options: NonNullable<ParseArgsConfig['options']> = {
    quick: { type: 'boolean' },
    scenarios: { type: 'string' },
    brokers: { type: 'string' },
    duration: { type: 'string' },
    warmup: { type: 'string' },
    json: { type: 'string' },
    repeat: { type: 'string' },
    workers: { type: 'string' },
    fresh: { type: 'boolean' },
    'no-pin': { type: 'boolean' },
    'cpu-floor': { type: 'boolean' },
    help: { type: 'boolean', short: 'h' },
  };
  for (const flag of flags.keys()) options[flag] = { type: 'string' };
  const { values } = parseArgs({ args: [...argv], options, strict: true, allowPositionals: false });
  const text = (name: string): string | undefined => {
    const v = values[name];
    return typeof v === 'string' ? v : undefined;
  };
  if (values.help === true) return null;
  const quick = values.quick === true;
  const base = quick ? QUICK_TIMING : DEFAULT_TIMING;
  const duration = text('duration');
  const warmup = text('warmup');
  const timing: Timing = {
    ...base,
    measureMs: duration === undefined ? base.measureMs : positiveNumber('duration', duration, false) * 1000,
    warmupMs: warmup === undefined ? base.warmupMs : positiveNumber('warmup', warmup, false) * 1000,
  };
  const scenarios = list(text('scenarios')) ?? SCENARIOS.map((s) => s.name);
  for (const s of scenarios)
    if (findScenario(s) === undefined) throw new Error(`unknown scenario "${s}" (known: ${SCENARIOS.map((x) => x.name).join(', ')})`);
  const brokerList = list(text('brokers')) ?? [...BROKER_NAMES];
  const brokers: BrokerName[] = [];
  for (const b of brokerList) {
    if (!isBrokerName(b)) throw new Error(`unknown broker "${b}" (known: ${[...BROKER_NAMES, ...OPTIONAL_BROKERS].join(', ')})`);
    brokers.push(b);
  }
  const overrides: Record<string, number> = {};
  for (const [flag, all] of flags) {
    const owners = all.filter((o) => scenarios.includes(o));
    const t = text(flag);
    if (t === undefined) continue;
    if (owners.length === 0) throw new Error(`--${flag} applies to none of the scenarios run (only to ${all.join(', ')})`);
    const key = keyOf(flag);
    const n = Number(t);
    if (t.trim() === '' || !Number.isFinite(n)) throw new Error(`--${flag} needs a number, got "${t}"`);
    for (const owner of owners) {
      const problem = checkValue(findScenario(owner)!.specs[key]!, n);
      if (problem !== null) throw new Error(`--${flag} ${problem} (for ${owner}), got ${t}`);
    }
    overrides[key] = n;
  }
  for (const s of scenarios) {
    const scenario = findScenario(s)!;
    try {
      checkParams(scenario, resolveParams(scenario, quick, overrides));
    } catch (err) {
      if (err instanceof ParamError) throw new Error(err.message);
      throw err;
    }
  }
  const repeatText = text('repeat');
  const repeat = repeatText === undefined ? 1 : positiveNumber('repeat', repeatText, true);
  const workersText = text('workers');
  const workers = workersText === undefined ? -1 : Number(workersText);
  if (workersText !== undefined && (!Number.isInteger(workers) || workers < 0 || workers > 64))
    throw new Error(`--workers must be 0..64, got "${workersText}"`);
  return {
    quick,
    scenarios,
    brokers,
    timing,
    json: text('json') ?? null,
    repeat,
    workers,
    fresh: values.fresh === true,
    overrides,
    pin: values['no-pin'] !== true,
    cpuFloor: values['cpu-floor'] === true,
  };
}

/** The run whose first headline figure is the median of the runs. */
export function medianRun(runs: readonly ScenarioResult[]): ScenarioResult {
  const key = (r: ScenarioResult): number => r.metrics[r.headline[0] ?? '']?.value ?? 0;
  const sorted = [...runs].sort((a, b) => key(a) - key(b));
  return sorted[Math.floor((sorted.length - 1) / 2)]!;
}

/**
 * The memory reference line: a bare Node net server's memory per idle connection and connect rate,
 * and Bifro's ratio to it (the target is ≤ 1.25× for memory).
 */
export function referenceLine(runs: readonly ScenarioResult[] | undefined, cells: readonly Cell[]): string {
  if (runs === undefined || runs.length === 0) return '';
  const ref = medianRun(runs);
  const bifro = cells.find((c) => c.scenario === 'idle-connections' && c.broker === 'bifro')?.result;
  const parts: string[] = [];
  for (const key of ['bytesPerConnection', 'connectRate'] as const) {
    const m = ref.metrics[key];
    if (m === undefined) continue;
    const b = bifro?.metrics[key];
    const ratio = b === undefined || m.value === 0 ? '' : ` (bifro/node-net ${(b.value / m.value).toFixed(2)}×)`;
    parts.push(`${m.label} ${formatValue(m.value)} ${m.unit}${ratio}`);
  }
  return parts.length === 0 ? '' : `\nreference, a bare Node net server answering CONNACK: ${parts.join('; ')}`;
}

/**
 * The scenarios node-forward can serve at a fixed rate: plain topics and `+`/`#` filters, QoS 0
 * and 1 (shared subscriptions and memory are not its business).
 */
const FLOOR_SCENARIOS = ['latency', 'qos1-pairs', 'qos1-persistent', 'fan-in', 'fan-out'];

/** Whether a cell of `scenario` run with `params` gets the CPU floor reference. */
export function hasCpuFloor(scenario: string, params: Readonly<Record<string, number>>): boolean {
  return FLOOR_SCENARIOS.includes(scenario) && Number(params.rate ?? 0) > 0;
}

/** The median of one metric over runs (each run's own value, not the median run's), or undefined. */
export function medianMetric(runs: readonly ScenarioResult[], key: string): number | undefined {
  const values = runs.flatMap((r) => (r.metrics[key] === undefined ? [] : [r.metrics[key].value])).sort((x, y) => x - y);
  return values.length === 0 ? undefined : values[Math.floor((values.length - 1) / 2)];
}

/**
 * The CPU reference lines: node-forward's CPU per delivered message in each fixed-rate scenario,
 * and each broker's ratio to it (medians of the runs' own CPU figures).
 */
export function cpuFloorLines(
  scenarios: readonly string[],
  brokers: readonly BrokerName[],
  runsOf: (scenario: string, broker: BrokerName) => readonly ScenarioResult[],
): string {
  const lines: string[] = [];
  for (const scenario of scenarios) {
    const floor = runsOf(scenario, 'node-forward');
    const ref = medianMetric(floor, 'cpuPerMessage');
    if (ref === undefined) continue;
    const ratios = brokers.flatMap((b) => {
      const m = medianMetric(runsOf(scenario, b), 'cpuPerMessage');
      return m === undefined || ref === 0 ? [] : [`${b}/node-forward ${(m / ref).toFixed(2)}×`];
    });
    const median = floor.length > 1 ? `, median of ${floor.length}` : '';
    lines.push(
      `${scenario}: bare Node forwarder: ${formatValue(ref)} µs per message${median}${ratios.length > 0 ? ` (${ratios.join(', ')})` : ''}`,
    );
  }
  return lines.length === 0
    ? ''
    : `reference, broker CPU per delivered message of node-forward (core/bench/node-forward.mjs):\n${lines.join('\n')}`;
}

/** The order brokers run in for repeat `r`: rotated, so none is always first after a scenario change. */
export function brokerOrder<T>(brokers: readonly T[], r: number): T[] {
  const k = brokers.length === 0 ? 0 : r % brokers.length;
  return [...brokers.slice(k), ...brokers.slice(0, k)];
}

function headlineText(r: ScenarioResult): string {
  return r.headline
    .map((k) => r.metrics[k])
    .filter((m) => m !== undefined)
    .map((m) => `${formatValue(m.value)} ${m.unit}`)
    .join(', ');
}

/** Runs the comparison and prints the report; resolves with the exit code. */
export async function compare(argv: readonly string[]): Promise<number> {
  const t0 = performance.now();
  let opts: CompareOptions | null;
  try {
    opts = parseCompareArgs(argv);
  } catch (err) {
    process.stderr.write(`error: ${(err as Error).message}\n\n${COMPARE_USAGE}\n`);
    return 2;
  }
  if (opts === null) {
    process.stdout.write(`${COMPARE_USAGE}\n`);
    return 0;
  }
  const repoRoot = path.resolve(__dirname, '..', '..', '..');
  const machine = machineInfo();
  const explicitBrokers = argv.some((a) => a === '--brokers' || a.startsWith('--brokers='));
  const brokers = opts.brokers.filter((b) => b !== 'mosquitto' || explicitBrokers || findMosquitto() !== null);
  const skipped = opts.brokers.filter((b) => !brokers.includes(b));

  let brokerCpus: string | null = null;
  let pinning = 'no (--no-pin)';
  if (opts.pin) {
    if (findTaskset() === null) pinning = 'no (taskset not found)';
    else if (machine.cpus < 2) pinning = 'no (one CPU)';
    else {
      brokerCpus = '0';
      const generatorCpus = machine.cpus === 2 ? '1' : `1-${machine.cpus - 1}`;
      const pinned = pinSelf(generatorCpus);
      pinning = pinned ? `broker on CPU 0, generator on CPU ${generatorCpus}` : 'no (taskset failed)';
      if (!pinned) brokerCpus = null;
    }
  }
  // After pinning: the default follows the CPUs this process may use.
  const workers = opts.workers >= 0 ? opts.workers : defaultWorkers();
  const t = opts.timing;
  process.stderr.write(
    `bifro bench:compare: ${machine.cpus} × ${machine.cpuModel}, node ${machine.node}; pinning: ${pinning}\n` +
      `window: ${t.warmupMs / 1000} s warm-up + ${t.measureMs / 1000} s measured; repeat ${opts.repeat}; ` +
      `generator: ${workers === 0 ? 'main thread' : `${workers} worker thread(s)`}; brokers: ${brokers.join(', ')}` +
      `${skipped.length > 0 ? ` (${skipped.join(', ')} not installed)` : ''}\n`,
  );

  const running = new Map<BrokerName, BrokerProcess>();
  const brokerNotes: string[] = [];
  const bifroBuilt = existsSync(path.join(repoRoot, 'core', 'dist', 'cli', 'main.js'));
  /** The broker to run a cell against: started on first use, restarted when it died or when asked. */
  const brokerFor = async (name: BrokerName, fresh: boolean): Promise<BrokerProcess> => {
    if (name.startsWith('bifro') && !bifroBuilt) throw new Error('core is not built (npm run build)');
    const current = running.get(name);
    if (current !== undefined) {
      const exited = current.exited();
      if (exited === null && !fresh) return current;
      if (exited !== null) brokerNotes.push(`${name} exited (${exited}) and was restarted`);
      running.delete(name);
      await current.stop();
    }
    const proc = await launchBroker(name, { repoRoot, cpus: brokerCpus });
    running.set(name, proc);
    return proc;
  };

  const params: Record<string, Record<string, number>> = {};
  for (const name of opts.scenarios) params[name] = resolveParams(findScenario(name)!, opts.quick, opts.overrides);
  const runs = new Map<string, ScenarioResult[]>();
  const errors = new Map<string, string>();
  const keyOfCell = (s: string, b: BrokerName): string => `${s}\u0000${b}`;
  try {
    for (let r = 0; r < opts.repeat; r++) {
      for (const name of opts.scenarios) {
        const scenario = findScenario(name)!;
        // The CPU floor runs in the same rotation as the brokers, so it sees the same moments of the machine.
        const floor = opts.cpuFloor && hasCpuFloor(name, params[name]!);
        for (const broker of brokerOrder<BrokerName>(floor ? [...brokers, 'node-forward'] : brokers, r)) {
          if (isShuttingDown()) return 130;
          const key = keyOfCell(name, broker);
          let line: string;
          try {
            const proc = await brokerFor(broker, opts.fresh || scenario.freshBroker === true);
            const result = await runScenario(scenario, { host: proc.host, port: proc.port, pid: proc.pid }, t, params[name]!, { workers });
            runs.set(key, [...(runs.get(key) ?? []), result]);
            line = headlineText(result);
          } catch (err) {
            const message = (err as Error).message;
            if (!errors.has(key)) errors.set(key, message);
            line = `error: ${message}`;
          }
          const round = opts.repeat > 1 ? ` [${r + 1}/${opts.repeat}]` : '';
          process.stderr.write(`  ${name} × ${broker}${round}: ${line}\n`);
        }
      }
    }
    // The memory target is relative to a bare Node net server that only answers CONNACK: measure it the same way.
    if (opts.scenarios.includes('idle-connections') && brokers.includes('bifro') && !isShuttingDown()) {
      const idle = findScenario('idle-connections')!;
      for (let r = 0; r < opts.repeat; r++) {
        const key = keyOfCell('idle-connections', 'node-net');
        try {
          const proc = await brokerFor('node-net', true);
          const result = await runScenario(idle, { host: proc.host, port: proc.port, pid: proc.pid }, t, params['idle-connections']!, {
            workers,
          });
          runs.set(key, [...(runs.get(key) ?? []), result]);
          process.stderr.write(`  idle-connections × node-net (reference): ${headlineText(result)}\n`);
        } catch (err) {
          errors.set(key, (err as Error).message);
          process.stderr.write(`  idle-connections × node-net (reference): error: ${(err as Error).message}\n`);
        }
      }
    }
  } finally {
    await Promise.all([...running.values()].map((p) => p.stop()));
  }

  const cells: Cell[] = [];
  for (const name of opts.scenarios)
    for (const broker of brokers) {
      const done = runs.get(keyOfCell(name, broker)) ?? [];
      if (done.length > 0) cells.push({ scenario: name, broker, result: medianRun(done) });
      else cells.push({ scenario: name, broker, error: errors.get(keyOfCell(name, broker)) ?? 'not run' });
    }
  const reference = referenceLine(runs.get(keyOfCell('idle-connections', 'node-net')), cells);
  const table = renderComparison(opts.scenarios, brokers, cells) + reference;
  for (const name of opts.scenarios) {
    const error = errors.get(keyOfCell(name, 'node-forward'));
    if (error !== undefined) brokerNotes.push(`${name} × node-forward (reference): error: ${error}`);
  }
  const floorLines = cpuFloorLines(opts.scenarios, brokers, (s, b) => runs.get(keyOfCell(s, b)) ?? []);
  const cpuTable = renderCpu(opts.scenarios, brokers, cells);
  const cpu = [cpuTable, floorLines].filter((x) => x !== '').join('\n');
  const notes = [renderNotes(cells), ...brokerNotes].filter((n) => n !== '').join('\n');
  const elapsedS = (performance.now() - t0) / 1000;
  const median = opts.repeat > 1 ? ` (median of ${opts.repeat} runs)` : '';
  process.stdout.write(
    `\n${table}\n${cpu === '' ? '' : `\n${cpu}\n`}${notes === '' ? '' : `\n${notes}\n`}` +
      `\ntotal elapsed: ${elapsedS.toFixed(1)} s${median}\n`,
  );
  if (opts.json !== null) {
    const report = {
      date: new Date().toISOString(),
      argv,
      machine,
      pinning,
      timing: t,
      repeat: opts.repeat,
      workers,
      brokers,
      params,
      cells,
      runs: Object.fromEntries([...runs].map(([k, v]) => [k.replace('\u0000', ' × '), v])),
      notes: brokerNotes,
      elapsedS,
    };
    writeFileSync(opts.json, `${JSON.stringify(report, null, 2)}\n`);
    process.stderr.write(`wrote ${opts.json}\n`);
  }
  return 0;
}

if (require.main === module) runBrokerCommand('error', () => compare(process.argv.slice(2)));
