#!/usr/bin/env node
/**
 * `npm run bench`: runs the load scenarios against Bifro, aedes and mosquitto in turn (a fresh
 * broker per scenario) and prints one table with the figures and the Bifro/aedes and
 * Bifro/mosquitto ratios. A scenario that fails against a broker shows `error: <reason>` in its
 * cell; the run goes on.
 */
import { existsSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import { parseArgs } from 'node:util';
import {
  BROKER_NAMES,
  findMosquitto,
  findTaskset,
  isBrokerName,
  isShuttingDown,
  killAllBrokersNow,
  launchBroker,
  pinSelf,
  stopAllBrokers,
  type BrokerName,
} from './broker-process';
import { machineInfo } from './machine';
import { formatValue, renderComparison, renderCpu, renderNotes, type Cell } from './report';
import { DEFAULT_TIMING, QUICK_TIMING, resolveParams, runScenario, type ScenarioResult, type Timing } from './scenario';
import { SCENARIOS, findScenario } from './scenarios';

export const COMPARE_USAGE = `Usage: npm run bench -- [options]

Runs each scenario against each broker (a fresh broker per scenario, on its own 127.0.0.1 port)
and prints msg/s per broker with the Bifro/aedes and Bifro/mosquitto ratios.

Options:
  --quick                  short run: 0.5 s warm-up + 1.5 s measured (default 2 s + 5 s)
  --scenarios a,b          ${SCENARIOS.map((s) => s.name).join(', ')} (default: all)
  --brokers a,b            ${BROKER_NAMES.join(', ')} (default: all; mosquitto when installed)
  --duration <s>           measured window in seconds
  --warmup <s>             warm-up in seconds
  --repeat <n>             run each cell n times (fresh broker each) and keep the median run (1)
  --json <file>            also write every figure as JSON
  --publishers <n>         fan-in publishers (20)
  --subscribers <n>        fan-out subscribers (50)
  --pairs <n>              QoS 1 publisher/subscriber pairs (10)
  --inflight <n>           QoS 1 inflight window per publisher (64)
  --connections <n>        idle connections (2000, capped by ulimit -n)
  --payload <bytes>        payload size (64)
  --no-pin                 do not pin broker and generator to different CPUs with taskset
  -h, --help               this help`;

const OPTIONS = {
  quick: { type: 'boolean' },
  scenarios: { type: 'string' },
  brokers: { type: 'string' },
  duration: { type: 'string' },
  warmup: { type: 'string' },
  json: { type: 'string' },
  repeat: { type: 'string' },
  publishers: { type: 'string' },
  subscribers: { type: 'string' },
  pairs: { type: 'string' },
  inflight: { type: 'string' },
  connections: { type: 'string' },
  payload: { type: 'string' },
  'no-pin': { type: 'boolean' },
  help: { type: 'boolean', short: 'h' },
} as const;

const PARAM_OPTIONS = ['publishers', 'subscribers', 'pairs', 'inflight', 'connections', 'payload'] as const;

export interface CompareOptions {
  readonly quick: boolean;
  readonly scenarios: readonly string[];
  readonly brokers: readonly BrokerName[];
  readonly timing: Timing;
  readonly json: string | null;
  readonly repeat: number;
  readonly overrides: Readonly<Record<string, number>>;
  readonly pin: boolean;
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
  const { values } = parseArgs({ args: [...argv], options: OPTIONS, strict: true, allowPositionals: false });
  if (values.help === true) return null;
  const quick = values.quick === true;
  const base = quick ? QUICK_TIMING : DEFAULT_TIMING;
  const timing: Timing = {
    ...base,
    measureMs: values.duration === undefined ? base.measureMs : positiveNumber('duration', values.duration, false) * 1000,
    warmupMs: values.warmup === undefined ? base.warmupMs : positiveNumber('warmup', values.warmup, false) * 1000,
  };
  const scenarios = list(values.scenarios) ?? SCENARIOS.map((s) => s.name);
  for (const s of scenarios)
    if (findScenario(s) === undefined) throw new Error(`unknown scenario "${s}" (known: ${SCENARIOS.map((x) => x.name).join(', ')})`);
  const brokerList = list(values.brokers) ?? [...BROKER_NAMES];
  const brokers: BrokerName[] = [];
  for (const b of brokerList) {
    if (!isBrokerName(b)) throw new Error(`unknown broker "${b}" (known: ${BROKER_NAMES.join(', ')})`);
    brokers.push(b);
  }
  const overrides: Record<string, number> = {};
  for (const key of PARAM_OPTIONS) {
    const text = values[key];
    if (text !== undefined) overrides[key] = positiveNumber(key, text, true);
  }
  const repeat = values.repeat === undefined ? 1 : positiveNumber('repeat', values.repeat, true);
  return { quick, scenarios, brokers, timing, json: values.json ?? null, repeat, overrides, pin: values['no-pin'] !== true };
}

/** The run whose first headline figure is the median of the runs. */
export function medianRun(runs: readonly ScenarioResult[]): ScenarioResult {
  const key = (r: ScenarioResult): number => r.metrics[r.headline[0] ?? '']?.value ?? 0;
  const sorted = [...runs].sort((a, b) => key(a) - key(b));
  return sorted[Math.floor((sorted.length - 1) / 2)]!;
}

/** Runs the comparison and prints the report; resolves with the exit code. */
export async function compare(argv: readonly string[]): Promise<number> {
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
  const t = opts.timing;
  process.stderr.write(
    `bifro bench: ${machine.cpus} × ${machine.cpuModel}, node ${machine.node}; pinning: ${pinning}\n` +
      `window: ${t.warmupMs / 1000} s warm-up + ${t.measureMs / 1000} s measured; brokers: ${brokers.join(', ')}\n`,
  );

  const cells: Cell[] = [];
  const params: Record<string, Record<string, number>> = {};
  for (const name of opts.scenarios) {
    const scenario = findScenario(name)!;
    const p = resolveParams(scenario, opts.quick, opts.overrides);
    params[name] = p;
    for (const broker of brokers) {
      if (isShuttingDown()) return 130;
      let cell: Cell;
      try {
        if (broker === 'bifro' && !existsSync(path.join(repoRoot, 'core', 'dist', 'cli', 'main.js')))
          throw new Error('core is not built (npm run build)');
        const runs: ScenarioResult[] = [];
        for (let i = 0; i < opts.repeat; i++) {
          const proc = await launchBroker(broker, { repoRoot, cpus: brokerCpus });
          try {
            runs.push(await runScenario(scenario, { host: proc.host, port: proc.port, pid: proc.pid }, t, p));
          } finally {
            await proc.stop();
          }
        }
        cell = { scenario: name, broker, result: medianRun(runs) };
      } catch (err) {
        cell = { scenario: name, broker, error: (err as Error).message };
      }
      cells.push(cell);
      const summary =
        cell.result === undefined
          ? `error: ${cell.error}`
          : cell.result.headline.map((k) => `${formatValue(cell.result!.metrics[k]!.value)} ${cell.result!.metrics[k]!.unit}`).join(', ');
      process.stderr.write(`  ${name} × ${broker}: ${summary}\n`);
    }
  }

  const table = renderComparison(opts.scenarios, brokers, cells);
  const cpu = renderCpu(opts.scenarios, brokers, cells);
  const notes = renderNotes(cells);
  process.stdout.write(`\n${table}\n${cpu === '' ? '' : `\n${cpu}\n`}${notes === '' ? '' : `\n${notes}\n`}`);
  if (opts.json !== null) {
    const report = { date: new Date().toISOString(), argv, machine, pinning, timing: t, repeat: opts.repeat, brokers, params, cells };
    writeFileSync(opts.json, `${JSON.stringify(report, null, 2)}\n`);
    process.stderr.write(`wrote ${opts.json}\n`);
  }
  return 0;
}

if (require.main === module) {
  process.on('exit', killAllBrokersNow);
  process.once('SIGINT', () => {
    process.stderr.write('\ninterrupted: stopping the brokers started by this run\n');
    void stopAllBrokers().finally(() => process.exit(130));
  });
  compare(process.argv.slice(2)).then(
    (code) => process.exit(code),
    (err: unknown) => {
      process.stderr.write(`error: ${String(err)}\n`);
      process.exit(1);
    },
  );
}
