/**
 * `bifro bench`: runs one load scenario against any MQTT broker and prints what it measured (a
 * table, or one JSON object with --json). core/src/cli/commands/bench.ts loads this module from
 * core/bench/dist at run time.
 */
import { machineInfo } from './machine';
import { formatValue, renderTable } from './report';
import {
  DEFAULT_TIMING,
  QUICK_TIMING,
  checkParams,
  checkValue,
  defaultWorkers,
  flagOf,
  keyOf,
  resolveParams,
  runScenario,
  type ParamSpec,
  type Progress,
  type Scenario,
  type ScenarioParams,
  type ScenarioResult,
  type Target,
  type Timing,
} from './scenario';
import { SCENARIOS, findScenario } from './scenarios';
import type { Credentials } from './plan';

/** A command line `bifro bench` cannot run; the CLI reports it as a usage error (exit 2). */
export class BenchUsageError extends Error {
  override readonly name = 'BenchUsageError';
}

/** What the command needs from its surroundings. */
export interface BenchIo {
  out(text: string): void;
  err(text: string): void;
  /** Progress lines go to stderr by default only when it is a terminal. */
  readonly stderrIsTTY: boolean;
}

export interface BenchOptions {
  readonly scenario: Scenario<ScenarioParams>;
  readonly params: ScenarioParams;
  readonly target: Target;
  readonly timing: Timing;
  readonly workers: number;
  readonly json: boolean;
  /** null: progress when stderr is a terminal and not --json. */
  readonly progress: boolean | null;
  readonly quick: boolean;
}

export type BenchCommand = { readonly kind: 'help' } | { readonly kind: 'list' } | { readonly kind: 'run'; readonly options: BenchOptions };

const MAX_WORKERS = 64;

const COMMON_OPTIONS = `Options:
  --host <host>        broker host (127.0.0.1)
  --port <n>           broker port (1883)
  --username <name>    user name in every CONNECT (a broker with an auth plugin); with
  --password <text>    its password (visible in the process list: for test credentials)
  --pid <n>            the broker's process id, when it runs on this machine: adds its CPU use
                       and, for idle-connections, its memory per connection
  --duration <s>       measured window in seconds (${DEFAULT_TIMING.measureMs / 1000}; --quick: ${QUICK_TIMING.measureMs / 1000})
  --warmup <s>         load before the measured window, in seconds (${DEFAULT_TIMING.warmupMs / 1000}; --quick: ${QUICK_TIMING.warmupMs / 1000})
  --quick              short windows and the scenario's quick parameters
  --workers <n>        worker threads generating the load: min(cores − 1, 4), at least 1
                       (here ${defaultWorkers()}); 0 = the main thread only
  --json               print one JSON object on stdout (no table, no progress)
  --progress, --quiet  force the per-second progress line on stderr on or off
                       (default: on when stderr is a terminal and not --json)
  --list               the scenarios and their parameters
  -h, --help           this help`;

function specLine(key: string, spec: ParamSpec, value: number): string {
  const flag = `  --${flagOf(key)} <${spec.choices === undefined ? 'n' : spec.choices.join('|')}>`.padEnd(23);
  return `${flag}${spec.summary}; default ${value}`;
}

/** The scenarios with their parameters and defaults. */
export function scenarioList(): string {
  const blocks = SCENARIOS.map((s) => {
    const quick = Object.entries(s.quick)
      .map(([k, v]) => `--${flagOf(k)} ${String(v)}`)
      .join(', ');
    const lines = [`${s.name}: ${s.summary}`];
    for (const key of Object.keys(s.specs)) lines.push(specLine(key, s.specs[key]!, s.defaults[key]!));
    if (quick !== '') lines.push(`  with --quick: ${quick}`);
    return lines.join('\n');
  });
  return `Scenarios and their parameters:\n\n${blocks.join('\n\n')}`;
}

export function benchUsage(): string {
  return `Usage: bifro bench <scenario> [--host H] [--port N] [scenario parameters] [options]
       bifro bench --list

Load-tests any MQTT broker: raw TCP connections writing pre-encoded packets, spread over worker
threads, a progress line each second, then a summary (or JSON). Exit 0 when the scenario ran,
1 when it failed (the reason is printed), 2 on a usage error.

Scenarios: ${SCENARIOS.map((s) => s.name).join(', ')} (bifro bench --list: their parameters)

${COMMON_OPTIONS}

Examples:
  bifro bench fan-in --publishers 50 --qos 1
  bifro bench latency --rate 20000 --mqtt 5 --json
  bifro bench idle-connections --connections 10000 --pid $(pgrep mosquitto)`;
}

const BOOLEAN_FLAGS = new Set(['json', 'list', 'quick', 'progress', 'quiet', 'help']);
const VALUE_FLAGS = new Set(['host', 'port', 'pid', 'duration', 'warmup', 'workers', 'username', 'password']);

/** Every parameter flag some scenario knows. */
function knownParamFlags(): Set<string> {
  const out = new Set<string>();
  for (const s of SCENARIOS) for (const k of Object.keys(s.specs)) out.add(flagOf(k));
  return out;
}

function number(flag: string, text: string, opts: { min: number; max: number; integer: boolean }): number {
  const n = Number(text);
  if (text.trim() === '' || !Number.isFinite(n)) throw new BenchUsageError(`--${flag} needs a number, got "${text}"`);
  if (opts.integer && !Number.isInteger(n)) throw new BenchUsageError(`--${flag} must be a whole number, got ${text}`);
  if (n < opts.min || n > opts.max) throw new BenchUsageError(`--${flag} must be ${opts.min}..${opts.max}, got ${text}`);
  return n;
}

/** Parses `bifro bench` arguments (after `bench`); throws a BenchUsageError with a clear message. */
export function parseBenchArgs(argv: readonly string[]): BenchCommand {
  const flags = new Map<string, string>();
  const bools = new Set<string>();
  const positionals: string[] = [];
  const paramFlags = knownParamFlags();
  for (let i = 0; i < argv.length; i++) {
    const token = argv[i]!;
    if (token === '-h') {
      bools.add('help');
      continue;
    }
    if (!token.startsWith('--')) {
      if (token.startsWith('-') && token.length > 1) throw new BenchUsageError(`unknown option "${token}"`);
      positionals.push(token);
      continue;
    }
    const eq = token.indexOf('=');
    const name = eq < 0 ? token.slice(2) : token.slice(2, eq);
    const inline = eq < 0 ? undefined : token.slice(eq + 1);
    if (BOOLEAN_FLAGS.has(name)) {
      if (inline !== undefined) throw new BenchUsageError(`--${name} takes no value`);
      bools.add(name);
      continue;
    }
    if (!VALUE_FLAGS.has(name) && !paramFlags.has(name)) throw new BenchUsageError(`unknown option "--${name}" (bifro bench --help)`);
    let value = inline;
    if (value === undefined) {
      const next = argv[i + 1];
      // A bare switch-like parameter (--persistent) means 1.
      const isSwitch = name === 'persistent' && (next === undefined || next.startsWith('-') || !Number.isFinite(Number(next)));
      if (isSwitch) value = '1';
      else {
        if (next === undefined || (next.startsWith('--') && next.length > 2)) throw new BenchUsageError(`--${name} needs a value`);
        value = next;
        i++;
      }
    }
    if (flags.has(name)) throw new BenchUsageError(`--${name} given twice`);
    flags.set(name, value);
  }

  if (bools.has('help')) return { kind: 'help' };
  if (bools.has('list')) return { kind: 'list' };
  if (positionals.length === 0) throw new BenchUsageError(`name a scenario: ${SCENARIOS.map((s) => s.name).join(', ')}`);
  if (positionals.length > 1) throw new BenchUsageError(`unexpected argument "${positionals[1]}" (one scenario per run)`);
  const scenario = findScenario(positionals[0]!);
  if (scenario === undefined)
    throw new BenchUsageError(`unknown scenario "${positionals[0]}" (known: ${SCENARIOS.map((s) => s.name).join(', ')})`);
  if (bools.has('progress') && bools.has('quiet')) throw new BenchUsageError('--progress and --quiet contradict each other');

  const overrides: Record<string, number> = {};
  for (const [flag, text] of flags) {
    if (VALUE_FLAGS.has(flag)) continue;
    const key = keyOf(flag);
    const spec = scenario.specs[key];
    if (spec === undefined) {
      const own = Object.keys(scenario.specs)
        .map((k) => `--${flagOf(k)}`)
        .join(', ');
      throw new BenchUsageError(`${scenario.name} has no parameter --${flag} (its parameters: ${own})`);
    }
    const n = Number(text);
    if (text.trim() === '' || !Number.isFinite(n)) throw new BenchUsageError(`--${flag} needs a number, got "${text}"`);
    const problem = checkValue(spec, n);
    if (problem !== null) throw new BenchUsageError(`--${flag} ${problem}, got ${text}`);
    overrides[key] = n;
  }
  const quick = bools.has('quick');
  const params = resolveParams(scenario, quick, overrides);
  try {
    checkParams(scenario, params);
  } catch (err) {
    throw new BenchUsageError((err as Error).message);
  }

  const host = flags.get('host') ?? '127.0.0.1';
  if (host.trim() === '') throw new BenchUsageError('--host needs a value');
  const port = flags.has('port') ? number('port', flags.get('port')!, { min: 1, max: 65535, integer: true }) : 1883;
  const pid = flags.has('pid') ? number('pid', flags.get('pid')!, { min: 1, max: 2 ** 31 - 1, integer: true }) : undefined;
  const base = quick ? QUICK_TIMING : DEFAULT_TIMING;
  const timing: Timing = {
    ...base,
    measureMs: flags.has('duration')
      ? number('duration', flags.get('duration')!, { min: 0.1, max: 86400, integer: false }) * 1000
      : base.measureMs,
    warmupMs: flags.has('warmup') ? number('warmup', flags.get('warmup')!, { min: 0, max: 3600, integer: false }) * 1000 : base.warmupMs,
  };
  const workers = flags.has('workers')
    ? number('workers', flags.get('workers')!, { min: 0, max: MAX_WORKERS, integer: true })
    : defaultWorkers();
  const progress = bools.has('progress') ? true : bools.has('quiet') ? false : null;
  return {
    kind: 'run',
    options: {
      scenario,
      params,
      target: { host, port, ...(pid === undefined ? {} : { pid }), ...credentialsOf(flags) },
      timing,
      workers,
      json: bools.has('json'),
      progress,
      quick,
    },
  };
}

/** `--username` (and `--password`, which needs it) as the run's credentials. */
function credentialsOf(flags: ReadonlyMap<string, string>): { credentials?: Credentials } {
  const username = flags.get('username');
  const password = flags.get('password');
  if (username === undefined) {
    if (password !== undefined) throw new BenchUsageError('--password needs --username');
    return {};
  }
  if (username === '') throw new BenchUsageError('--username needs a value');
  return { credentials: password === undefined ? { username } : { username, password } };
}

function perSecond(n: number): string {
  return `${formatValue(n)}/s`;
}

/** One progress line: elapsed, phase, current rates. */
export function progressLine(p: Progress): string {
  const parts = [`${p.elapsedS.toFixed(1).padStart(6)} s`, p.phase.padEnd(8)];
  if (p.phase === 'setup' || p.connected < p.connections) parts.push(`connected ${p.connected}/${p.connections}`);
  if (p.sentPerS > 0) parts.push(`sent ${perSecond(p.sentPerS)}`);
  if (p.completedPerS > 0) parts.push(`acked ${perSecond(p.completedPerS)}`);
  if (p.receivedPerS > 0) parts.push(`received ${perSecond(p.receivedPerS)}`);
  if (p.skippedPerS > 0) parts.push(`behind ${perSecond(p.skippedPerS)}`);
  return parts.join('  ');
}

const GENERATOR_KEYS = new Set(['generatorCpu', 'generatorBusy', 'brokerCpu']);

/** How busy the generator was, in words. */
export function generatorLine(r: ScenarioResult): string {
  const g = r.generator;
  if (g === undefined) return '';
  const loops = g.eventLoopPercent.map((v) => `${Math.round(v)} %`).join(', ');
  const where = g.workers === 0 ? 'main thread event loop' : `worker event loop${g.eventLoopPercent.length > 1 ? 's' : ''}`;
  return `generator: ${Math.round(g.cpuPercent)} % of a core (whole process), ${where} busy ${loops}`;
}

/** The summary printed after a run. */
export function renderSummary(opts: BenchOptions, r: ScenarioResult): string {
  const keys = [...r.headline, ...Object.keys(r.metrics).filter((k) => !r.headline.includes(k) && !GENERATOR_KEYS.has(k))];
  const rows = keys.map((k) => {
    const m = r.metrics[k]!;
    return { cells: [m.label, formatValue(m.value), m.unit] };
  });
  const lines = [renderTable(['metric', 'value', 'unit'], rows, [false, true, false])];
  lines.push('', generatorLine(r));
  const broker = r.metrics.brokerCpu;
  if (broker !== undefined) lines.push(`broker: ${Math.round(broker.value)} % of a core (pid ${opts.target.pid})`);
  lines.push(
    `parameters: ${Object.entries(r.params)
      .map(([k, v]) => `--${flagOf(k)} ${v}`)
      .join(' ')}`,
  );
  for (const n of r.notes) lines.push(`note: ${n}`);
  return lines.join('\n');
}

function versionName(params: ScenarioParams): string {
  const v = params.mqtt ?? 4;
  return v === 3 ? 'MQTT 3.1' : v === 5 ? 'MQTT 5.0' : 'MQTT 3.1.1';
}

/** Runs a parsed command; resolves with the exit code. */
export async function runBench(command: BenchCommand, io: BenchIo, signal?: AbortSignal): Promise<number> {
  if (command.kind === 'help') {
    io.out(benchUsage());
    return 0;
  }
  if (command.kind === 'list') {
    io.out(scenarioList());
    return 0;
  }
  const opts = command.options;
  const { scenario, target, timing } = opts;
  const progress = opts.progress ?? (!opts.json && io.stderrIsTTY);
  const threads = opts.workers === 0 ? 'the main thread' : `${opts.workers} worker thread${opts.workers === 1 ? '' : 's'}`;
  if (!opts.json)
    io.err(
      `bifro bench ${scenario.name} → ${target.host}:${target.port} (${versionName(opts.params)}): ` +
        `${timing.warmupMs / 1000} s warm-up + ${timing.measureMs / 1000} s measured, ${threads}`,
    );
  const startedAt = new Date();
  const t0 = Date.now();
  let result: ScenarioResult;
  try {
    result = await runScenario(scenario, target, timing, opts.params, {
      workers: opts.workers,
      ...(progress ? { onProgress: (p: Progress) => io.err(progressLine(p)) } : {}),
      ...(signal === undefined ? {} : { signal }),
    });
  } catch (err) {
    const message = (err as Error).message;
    if (opts.json) io.out(JSON.stringify({ scenario: scenario.name, target, params: opts.params, error: message }));
    io.err(`error: ${scenario.name} failed: ${message}`);
    return 1;
  }
  if (opts.json) {
    io.out(
      JSON.stringify({
        scenario: scenario.name,
        target,
        params: result.params,
        timing: { warmupS: timing.warmupMs / 1000, durationS: timing.measureMs / 1000 },
        metrics: result.metrics,
        headline: result.headline,
        generator: result.generator,
        notes: result.notes,
        startedAt: startedAt.toISOString(),
        elapsedS: (Date.now() - t0) / 1000,
        machine: machineInfo(),
      }),
    );
  } else {
    io.out(renderSummary(opts, result));
  }
  return 0;
}

/**
 * The whole command: parse, run, report. Ctrl-C stops the run (every connection closed) and
 * exits 130. Usage errors are thrown as BenchUsageError for the CLI to report.
 */
export async function benchMain(argv: readonly string[], io: BenchIo): Promise<number> {
  const command = parseBenchArgs(argv);
  const controller = new AbortController();
  const onSigint = (): void => controller.abort(new Error('interrupted (Ctrl-C)'));
  process.once('SIGINT', onSigint);
  try {
    const code = await runBench(command, io, controller.signal);
    return controller.signal.aborted ? 130 : code;
  } finally {
    process.removeListener('SIGINT', onSigint);
  }
}
