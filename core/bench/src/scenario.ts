/**
 * What a scenario is, how it is run (bounded in time, every connection closed afterwards) and
 * how its measured window is taken.
 */
import { performance } from 'node:perf_hooks';
import { setTimeout as sleep } from 'node:timers/promises';
import { BenchClient, type Endpoint } from './bench-client';
import { readCpuSeconds } from './proc-stats';

/** The broker under load. `pid` enables memory and CPU readings of the broker. */
export interface Target extends Endpoint {
  readonly pid?: number;
}

export interface Timing {
  /** Load runs this long before the measured window opens. */
  readonly warmupMs: number;
  /** Length of the measured window. */
  readonly measureMs: number;
  /** Time allowed for connecting and subscribing (and for each CONNACK/SUBACK). */
  readonly setupTimeoutMs: number;
}

export const DEFAULT_TIMING: Timing = { warmupMs: 2000, measureMs: 5000, setupTimeoutMs: 10000 };
export const QUICK_TIMING: Timing = { warmupMs: 500, measureMs: 1500, setupTimeoutMs: 10000 };

export interface Metric {
  readonly label: string;
  readonly value: number;
  readonly unit: string;
  /** Which direction is better, for reading ratios. */
  readonly better: 'higher' | 'lower';
}

export interface ScenarioResult {
  readonly scenario: string;
  readonly params: Readonly<Record<string, number>>;
  /** Every figure measured, by key. */
  readonly metrics: Readonly<Record<string, Metric>>;
  /** Keys of the metrics worth a row in a comparison table, in order. */
  readonly headline: readonly string[];
  readonly notes: readonly string[];
}

export type ScenarioParams = Record<string, number>;

export interface Scenario<P extends ScenarioParams> {
  readonly name: string;
  readonly summary: string;
  readonly defaults: P;
  /** Overrides applied with --quick. */
  readonly quick: Partial<P>;
  /** Extra time this scenario may need beyond setup + warm-up + measure (e.g. to settle). */
  extraMs(params: P, timing: Timing): number;
  run(ctx: RunContext, params: P): Promise<ScenarioResult>;
}

/** Handed to a running scenario: where to connect, how long, and where to register connections. */
export interface RunContext {
  readonly target: Target;
  readonly timing: Timing;
  /** Aborted when the time bound is reached or a connection is lost. */
  readonly signal: AbortSignal;
  /** Unique per run, so client ids and topics never collide with another run. */
  readonly tag: string;
  /** Opens one connection that is closed when the scenario ends; losing it fails the scenario. */
  open(clientId: string, connect: Buffer): Promise<BenchClient>;
  /** Registers a connection opened elsewhere, with the same guarantees as open(). */
  track(client: BenchClient): void;
  /** Throws the abort reason if the scenario was aborted. */
  check(): void;
  /** Sleeps, or rejects as soon as the scenario is aborted. */
  sleep(ms: number): Promise<void>;
}

let runCounter = 0;

function abortError(signal: AbortSignal): Error {
  return signal.reason instanceof Error ? signal.reason : new Error(String(signal.reason));
}

/** Scenario parameters: defaults, then the quick overrides, then explicit overrides of known keys. */
export function resolveParams<P extends ScenarioParams>(
  scenario: Scenario<P>,
  quick: boolean,
  overrides: Readonly<Record<string, number>>,
): P {
  const params: P = { ...scenario.defaults, ...(quick ? scenario.quick : {}) };
  const target: Record<string, number> = params;
  for (const key of Object.keys(scenario.defaults)) {
    const value = overrides[key];
    if (value !== undefined) target[key] = value;
  }
  return params;
}

/**
 * Runs one scenario against a target within a hard time bound: setup timeout + warm-up +
 * measured window + the scenario's extra time + 5 s. Every connection it opened is closed when it
 * returns or throws.
 */
export async function runScenario<P extends ScenarioParams>(
  scenario: Scenario<P>,
  target: Target,
  timing: Timing,
  params: P,
): Promise<ScenarioResult> {
  const controller = new AbortController();
  const clients = new Set<BenchClient>();
  const boundMs = timing.setupTimeoutMs + timing.warmupMs + timing.measureMs + scenario.extraMs(params, timing) + 5000;
  const fail = (reason: string): void => {
    if (!controller.signal.aborted) controller.abort(new Error(reason));
  };
  const track = (client: BenchClient): void => {
    if (controller.signal.aborted) {
      client.close();
      throw abortError(controller.signal);
    }
    clients.add(client);
    if (client.lostReason !== null) fail(`${client.clientId}: ${client.lostReason}`);
    else client.onLost = (reason) => fail(`${client.clientId}: ${reason}`);
  };
  const ctx: RunContext = {
    target,
    timing,
    signal: controller.signal,
    tag: `${process.pid.toString(36)}${(runCounter++).toString(36)}`,
    async open(clientId, connect) {
      ctx.check();
      const client = await BenchClient.open(target, clientId, connect, timing.setupTimeoutMs);
      track(client);
      return client;
    },
    track,
    check() {
      if (controller.signal.aborted) throw abortError(controller.signal);
    },
    async sleep(ms) {
      ctx.check();
      await sleep(ms, undefined, { signal: controller.signal }).catch(() => ctx.check());
    },
  };
  const timer = setTimeout(() => fail(`${scenario.name} did not finish within its bound of ${boundMs} ms`), boundMs);
  const aborted = new Promise<never>((_resolve, reject) => {
    controller.signal.addEventListener('abort', () => reject(abortError(controller.signal)), { once: true });
  });
  aborted.catch(() => undefined);
  try {
    return await Promise.race([scenario.run(ctx, params), aborted]);
  } finally {
    clearTimeout(timer);
    if (!controller.signal.aborted) controller.abort(new Error('scenario ended'));
    for (const c of clients) c.close();
  }
}

/** Counters read at both ends of the measured window. */
export type Counters<K extends string> = () => Record<K, number>;

export interface MeasuredWindow<K extends string> {
  readonly seconds: number;
  /** Counter increase during the window. */
  readonly deltas: Record<K, number>;
  /** CPU used by this generator process, as a share of one core. */
  readonly generatorCpu: number;
  /** CPU used by the broker, as a share of one core, when its pid is known. */
  readonly brokerCpu: number | null;
}

/** Waits out the warm-up, then measures the counters over the measured window. */
export async function warmUpAndMeasure<K extends string>(ctx: RunContext, read: Counters<K>): Promise<MeasuredWindow<K>> {
  await ctx.sleep(ctx.timing.warmupMs);
  const pid = ctx.target.pid;
  const before = read();
  const cpu0 = process.cpuUsage();
  const broker0 = pid === undefined ? null : readCpuSeconds(pid);
  const t0 = performance.now();
  await ctx.sleep(ctx.timing.measureMs);
  const after = read();
  const seconds = (performance.now() - t0) / 1000;
  const cpu = process.cpuUsage(cpu0);
  const broker1 = pid === undefined ? null : readCpuSeconds(pid);
  const deltas = {} as Record<K, number>;
  for (const key of Object.keys(after) as K[]) deltas[key] = after[key] - before[key];
  return {
    seconds,
    deltas,
    generatorCpu: (cpu.user + cpu.system) / 1e6 / seconds,
    brokerCpu: broker0 === null || broker1 === null ? null : (broker1 - broker0) / seconds,
  };
}

/** The standard CPU metrics of a measured window. */
export function cpuMetrics(window: MeasuredWindow<string>): Record<string, Metric> {
  const out: Record<string, Metric> = {
    generatorCpu: { label: 'generator CPU', value: window.generatorCpu * 100, unit: '%', better: 'lower' },
  };
  if (window.brokerCpu !== null) out.brokerCpu = { label: 'broker CPU', value: window.brokerCpu * 100, unit: '%', better: 'lower' };
  return out;
}

/** Connects `count` clients with at most `concurrency` handshakes at a time. */
export async function openMany(
  ctx: RunContext,
  ids: readonly string[],
  connects: readonly Buffer[],
  concurrency: number,
): Promise<BenchClient[]> {
  const out: BenchClient[] = new Array<BenchClient>(ids.length);
  let next = 0;
  const worker = async (): Promise<void> => {
    while (next < ids.length) {
      const i = next++;
      out[i] = await ctx.open(ids[i]!, connects[i]!);
    }
  };
  const workers: Promise<void>[] = [];
  for (let w = 0; w < Math.min(concurrency, ids.length); w++) workers.push(worker());
  await Promise.all(workers);
  return out;
}
