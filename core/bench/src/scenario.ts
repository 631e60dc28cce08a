/**
 * What a scenario is and how it is run: the coordinator (this thread) spreads the scenario's
 * connections over worker threads, lines them up (setup → load → warm-up → measured window →
 * stop), reads the shared counters, and hands the figures to the scenario to summarize. Every
 * run is bounded in time and closes every connection it opened, also when it fails.
 */
import { existsSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { performance, type EventLoopUtilization } from 'node:perf_hooks';
import { setTimeout as sleep } from 'node:timers/promises';
import { Worker } from 'node:worker_threads';
import { Agent, type AgentInit, type AgentReport, type FromAgent, type ToAgent } from './agent';
import type { Endpoint } from './bench-client';
import { Histogram, type LatencySummary } from './histogram';
import { connectionCount, type Credentials, type Plan } from './plan';
import { readCpuSeconds, readRssBytes } from './proc-stats';
import { Phase, SharedState, Slot, Totals, deltas, snapshot, type Deltas } from './shared-state';

/** The broker under load. `pid` enables memory and CPU readings of the broker. */
export interface Target extends Endpoint {
  readonly pid?: number;
  /** User name and password in every CONNECT (a broker with an auth plugin). */
  readonly credentials?: Credentials;
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

/** How busy the load generator was during the measured window. */
export interface GeneratorBusy {
  /** Worker threads that ran the connections; 0 = the main thread did. */
  readonly workers: number;
  /** CPU time of the whole generator process (every thread) as % of one core. */
  readonly cpuPercent: number;
  /** Event-loop utilization of each worker (or of the main thread with 0 workers), %. */
  readonly eventLoopPercent: readonly number[];
}

export interface ScenarioResult {
  readonly scenario: string;
  readonly params: Readonly<Record<string, number>>;
  /** Every figure measured, by key. */
  readonly metrics: Readonly<Record<string, Metric>>;
  /** Keys of the metrics worth a row in a comparison table, in order. */
  readonly headline: readonly string[];
  readonly notes: readonly string[];
  readonly generator?: GeneratorBusy;
  /** Counts over the whole run (setup to stop), for consistency checks. */
  readonly totals?: RunTotals;
}

export interface RunTotals {
  /** PUBLISH packets written. */
  readonly sent: number;
  /** PUBACK / PUBCOMP received by publishers. */
  readonly completed: number;
  /** PUBLISH packets received, summed over the subscribers. */
  readonly received: number;
  /** Written off by the flow window after stalls. */
  readonly lost: number;
}

export type ScenarioParams = Record<string, number>;

/** One numeric parameter of a scenario: `--kebab-case-name <value>` on the command line. */
export interface ParamSpec {
  readonly summary: string;
  readonly min: number;
  readonly max: number;
  /** Whole numbers only (default true). */
  readonly integer?: boolean;
  /** Only these values. */
  readonly choices?: readonly number[];
}

export type ParamSpecs<P extends ScenarioParams> = { readonly [K in keyof P]: ParamSpec };

/** What a scenario's plan may depend on besides its parameters. */
export interface PlanContext {
  /** Unique per run, so client ids and topics never collide with another run. */
  readonly tag: string;
  readonly target: Target;
}

/** Everything measured in one run, handed to the scenario to turn into metrics. */
export interface Measured<P extends ScenarioParams> {
  readonly params: P;
  readonly plan: Plan;
  /** Length of the measured window in seconds. */
  readonly seconds: number;
  /** Counter increases during the measured window. */
  readonly window: Deltas;
  /** Counts over the whole run, setup to stop. */
  readonly totals: RunTotals;
  /** Publish → deliver latency over the measured window (scenarios whose plan asks for it). */
  readonly latency: LatencySummary | null;
  /** Seconds to open every connection, and the CONNACK latency (ms) of each idle connection. */
  readonly connect: { readonly seconds: number; readonly connackMs: readonly number[] };
  /** Broker resident memory (bytes) before connecting and at the end of the measured window, when its pid is known. */
  readonly rss: { readonly before: number; readonly after: number } | null;
  /** Flow window stalls (QoS 0 written off as lost). */
  readonly stalls: number;
}

export interface Summary {
  readonly metrics: Record<string, Metric>;
  readonly headline: readonly string[];
  readonly notes: readonly string[];
}

export interface Scenario<P extends ScenarioParams> {
  readonly name: string;
  readonly summary: string;
  readonly defaults: P;
  /** Overrides applied with --quick. */
  readonly quick: Partial<P>;
  readonly specs: ParamSpecs<P>;
  /** It measures broker memory: a comparison gives it a freshly started broker. */
  readonly freshBroker?: boolean;
  /** Extra time this scenario may need beyond setup + warm-up + measure (e.g. to connect many clients). */
  extraMs(params: P, timing: Timing): number;
  /** Its own warm-up instead of `timing.warmupMs`. */
  warmupMs?(params: P, timing: Timing): number;
  /** Checks beyond each parameter's range; throws a ParamError. */
  validate?(params: P): void;
  plan(params: P, ctx: PlanContext): Plan;
  summarize(m: Measured<P>): Summary;
}

/** A parameter value the scenario cannot run with; the message names the option. */
export class ParamError extends Error {
  override readonly name = 'ParamError';
}

/** `topicLevels` → `topic-levels`. */
export function flagOf(key: string): string {
  return key.replace(/[A-Z]/g, (c) => `-${c.toLowerCase()}`);
}

/** `topic-levels` → `topicLevels`. */
export function keyOf(flag: string): string {
  return flag.replace(/-([a-z])/g, (_m, c: string) => c.toUpperCase());
}

/** Checks one value against its spec; returns an error message or null. */
export function checkValue(spec: ParamSpec, value: number): string | null {
  if (!Number.isFinite(value)) return 'must be a number';
  if (spec.choices !== undefined && !spec.choices.includes(value)) return `must be one of ${spec.choices.join(', ')}`;
  if (spec.integer !== false && !Number.isInteger(value)) return 'must be a whole number';
  if (value < spec.min || value > spec.max) return `must be ${spec.min}..${spec.max}`;
  return null;
}

/** Checks every parameter against its spec and the scenario's own rules; throws a ParamError. */
export function checkParams<P extends ScenarioParams>(scenario: Scenario<P>, params: P): void {
  for (const key of Object.keys(scenario.specs)) {
    const value = params[key];
    if (value === undefined) throw new ParamError(`${scenario.name}: --${flagOf(key)} is missing`);
    const problem = checkValue(scenario.specs[key]!, value);
    if (problem !== null) throw new ParamError(`${scenario.name}: --${flagOf(key)} ${problem}, got ${value}`);
  }
  scenario.validate?.(params);
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

/** Worker threads by default: one per core but one (left to the coordinator and the OS), 1 to 4. */
export function defaultWorkers(): number {
  return Math.max(1, Math.min(os.availableParallelism() - 1, 4));
}

const WORKER_SCRIPT = path.join(__dirname, 'worker.js');

/** Worker threads need the compiled worker script; running from TypeScript sources (jest) they are not available. */
export function workerThreadsAvailable(): boolean {
  return !__filename.endsWith('.ts') && existsSync(WORKER_SCRIPT);
}

/** Live figures, about once a second. Rates are per second since the previous report. */
export interface Progress {
  readonly elapsedS: number;
  readonly phase: 'setup' | 'warm-up' | 'measure' | 'stopping';
  readonly connected: number;
  readonly connections: number;
  readonly sentPerS: number;
  readonly receivedPerS: number;
  readonly completedPerS: number;
  readonly skippedPerS: number;
}

export interface RunOptions {
  /** Worker threads running the connections; 0 = this thread. Default: `defaultWorkers()`. */
  readonly workers?: number;
  /** Called about once a second while the scenario runs. */
  readonly onProgress?: (p: Progress) => void;
  /** Aborting it ends the run at once (connections closed) with the abort reason. */
  readonly signal?: AbortSignal;
}

/** Time the agents may take to delete persistent sessions after the run (see agent.ts). */
const CLEANUP_MS = 3000;

let runCounter = 0;

function newTag(): string {
  const random = Math.floor(Math.random() * 36 * 36)
    .toString(36)
    .padStart(2, '0');
  return `${process.pid.toString(36)}${(runCounter++).toString(36)}${random}`;
}

/** The messages of one agent, waited for by type. */
class Mailbox {
  private readonly got = new Map<string, FromAgent>();
  private readonly waiting = new Map<string, (m: FromAgent) => void>();

  deliver(m: FromAgent): void {
    const w = this.waiting.get(m.type);
    if (w === undefined) this.got.set(m.type, m);
    else {
      this.waiting.delete(m.type);
      w(m);
    }
  }

  next<T extends FromAgent['type']>(type: T): Promise<Extract<FromAgent, { type: T }>> {
    return new Promise((resolve) => {
      const got = this.got.get(type);
      if (got !== undefined) {
        this.got.delete(type);
        resolve(got as Extract<FromAgent, { type: T }>);
      } else this.waiting.set(type, (m) => resolve(m as Extract<FromAgent, { type: T }>));
    });
  }
}

interface AgentHandle {
  post(msg: ToAgent): void;
  /** Event-loop utilization of the agent's thread (since `since`, when given). */
  elu(since?: EventLoopUtilization): EventLoopUtilization;
  close(): Promise<void>;
}

function spawnWorker(init: AgentInit, onMessage: (m: FromAgent) => void, onFailure: (reason: string) => void): AgentHandle {
  const worker = new Worker(WORKER_SCRIPT, { workerData: init });
  let closing = false;
  worker.on('message', onMessage);
  worker.on('error', (err) => onFailure(`worker ${init.worker} failed: ${err.message}`));
  worker.on('exit', (code) => {
    if (!closing) onFailure(`worker ${init.worker} exited (code ${code})`);
  });
  return {
    post: (msg) => worker.postMessage(msg),
    elu: (since) => (since === undefined ? worker.performance.eventLoopUtilization() : worker.performance.eventLoopUtilization(since)),
    async close() {
      closing = true;
      await worker.terminate();
    },
  };
}

function inlineAgent(init: AgentInit, onMessage: (m: FromAgent) => void): AgentHandle {
  const agent = new Agent(init, (m) => setImmediate(() => onMessage(m)));
  return {
    post: (msg) => setImmediate(() => agent.handle(msg)),
    elu: (since) => (since === undefined ? performance.eventLoopUtilization() : performance.eventLoopUtilization(since)),
    async close() {
      agent.abort();
    },
  };
}

function reasonOf(signal: AbortSignal): Error {
  return signal.reason instanceof Error ? signal.reason : new Error(String(signal.reason));
}

/** Waits until the receive and completion counters stop moving (150 ms), at most 1 s. */
async function drain(state: SharedState): Promise<void> {
  const deadline = performance.now() + 1000;
  let last = state.receivedSum() + state.load(Slot.COMPLETED);
  let still = 0;
  while (performance.now() < deadline && still < 3) {
    await sleep(50);
    const now = state.receivedSum() + state.load(Slot.COMPLETED);
    still = now === last ? still + 1 : 0;
    last = now;
  }
}

/** Share of event-loop utilization above which the generator may be what limits the figures. */
const BUSY_THRESHOLD = 0.9;

/**
 * Runs one scenario against a target within a hard time bound: setup timeout + warm-up +
 * measured window + the scenario's extra time + 8 s. Its connections are spread over
 * `options.workers` worker threads (default `defaultWorkers()`); every one is closed when it
 * returns or throws.
 */
export async function runScenario<P extends ScenarioParams>(
  scenario: Scenario<P>,
  target: Target,
  timing: Timing,
  params: P,
  options: RunOptions = {},
): Promise<ScenarioResult> {
  checkParams(scenario, params);
  const notes: string[] = [];
  let workers = options.workers ?? defaultWorkers();
  if (workers > 0 && !workerThreadsAvailable()) {
    notes.push('ran in the main thread: worker threads need the built load generator (core/bench/dist)');
    workers = 0;
  }
  const planned = scenario.plan(params, { tag: newTag(), target });
  const plan: Plan = target.credentials === undefined ? planned : { ...planned, credentials: target.credentials };
  const connections = connectionCount(plan);
  const agents = workers === 0 ? 1 : Math.max(1, Math.min(workers, connections));
  const state = SharedState.create(plan.subscribers.length);
  const warmupMs = scenario.warmupMs?.(params, timing) ?? timing.warmupMs;
  const boundMs = timing.setupTimeoutMs + warmupMs + timing.measureMs + scenario.extraMs(params, timing) + CLEANUP_MS + 5000;

  const controller = new AbortController();
  const fail = (reason: string): void => {
    if (!controller.signal.aborted) controller.abort(new Error(reason));
  };
  const aborted = new Promise<never>((_resolve, reject) => {
    controller.signal.addEventListener('abort', () => reject(reasonOf(controller.signal)), { once: true });
  });
  aborted.catch(() => undefined);
  const outer = options.signal;
  const onOuterAbort = (): void => fail(outer?.reason instanceof Error ? outer.reason.message : 'interrupted');
  if (outer?.aborted) onOuterAbort();
  outer?.addEventListener('abort', onOuterAbort, { once: true });
  const race = <T>(p: Promise<T>): Promise<T> => Promise.race([p, aborted]);
  const pause = (ms: number): Promise<void> => race(sleep(ms, undefined, { signal: controller.signal }).catch(() => undefined));

  const handles: AgentHandle[] = [];
  const mailboxes: Mailbox[] = [];
  const timer = setTimeout(() => fail(`${scenario.name} did not finish within its bound of ${boundMs} ms`), boundMs);
  let ticker: NodeJS.Timeout | null = null;
  try {
    for (let a = 0; a < agents; a++) {
      const init: AgentInit = {
        target: { host: target.host, port: target.port },
        setupTimeoutMs: timing.setupTimeoutMs,
        plan,
        worker: a,
        workers: agents,
        buffer: state.buffer,
      };
      const mailbox = new Mailbox();
      const onMessage = (m: FromAgent): void => {
        if (m.type === 'failed') fail(m.reason);
        else mailbox.deliver(m);
      };
      mailboxes.push(mailbox);
      handles.push(workers === 0 ? inlineAgent(init, onMessage) : spawnWorker(init, onMessage, fail));
    }
    if (workers > 0) await race(Promise.all(mailboxes.map((m) => m.next('hello'))));

    const totals = new Totals(state);
    const started = performance.now();
    let phase: Progress['phase'] = 'setup';
    let lastTick = started;
    ticker = setInterval(() => {
      const now = performance.now();
      const d = totals.sample();
      const s = (now - lastTick) / 1000;
      lastTick = now;
      options.onProgress?.({
        elapsedS: (now - started) / 1000,
        phase,
        connected: totals.connected,
        connections,
        sentPerS: d.sent / s,
        receivedPerS: d.received / s,
        completedPerS: d.completed / s,
        skippedPerS: d.skipped / s,
      });
    }, 1000);

    const pid = target.pid;
    const rssBefore = pid === undefined ? null : readRssBytes(pid);
    const t0 = performance.now();
    for (const h of handles) h.post({ type: 'setup' });
    const ready = await race(Promise.all(mailboxes.map((m) => m.next('ready'))));
    const connectSeconds = (performance.now() - t0) / 1000;

    state.phase = Phase.LOAD;
    phase = 'warm-up';
    for (const h of handles) h.post({ type: 'start' });
    await pause(warmupMs);

    const before = snapshot(state);
    const cpu0 = process.cpuUsage();
    const broker0 = pid === undefined ? null : readCpuSeconds(pid);
    const elu0 = handles.map((h) => h.elu());
    const tA = performance.now();
    state.phase = Phase.MEASURE;
    phase = 'measure';
    await pause(timing.measureMs);
    state.phase = Phase.STOPPED;
    const after = snapshot(state);
    const seconds = (performance.now() - tA) / 1000;
    const cpu = process.cpuUsage(cpu0);
    const broker1 = pid === undefined ? null : readCpuSeconds(pid);
    const elu = handles.map((h, i) => h.elu(elu0[i]));
    const rssAfter = pid === undefined ? null : readRssBytes(pid);

    // Stop publishing, let what is in flight arrive, then close: brokers see subscribers leave with
    // empty queues (aedes overflows its stack when many are left queued for a departed subscriber).
    phase = 'stopping';
    for (const h of handles) h.post({ type: 'halt' });
    await race(Promise.all(mailboxes.map((m) => m.next('halted'))));
    await race(drain(state));
    for (const h of handles) h.post({ type: 'stop' });
    const reports: AgentReport[] = (await race(Promise.all(mailboxes.map((m) => m.next('report'))))).map((m) => m.report);
    totals.sample();

    let latency: LatencySummary | null = null;
    if (plan.latency) {
      const h = new Histogram();
      for (const r of reports) if (r.latency !== null) h.merge(r.latency);
      latency = h.summary();
    }
    const measured: Measured<P> = {
      params,
      plan,
      seconds,
      window: deltas(after, before),
      totals: { sent: totals.sent, completed: totals.completed, received: totals.received, lost: totals.lost },
      latency,
      connect: { seconds: connectSeconds, connackMs: ready.flatMap((r) => r.connackMs) },
      rss: rssBefore === null || rssAfter === null ? null : { before: rssBefore, after: rssAfter },
      stalls: reports.reduce((n, r) => n + r.stalls, 0),
    };
    const summary = scenario.summarize(measured);

    const generator: GeneratorBusy = {
      workers,
      cpuPercent: ((cpu.user + cpu.system) / 1e6 / seconds) * 100,
      eventLoopPercent: elu.map((u) => Math.max(0, u.utilization * 100)),
    };
    const busiest = Math.max(...generator.eventLoopPercent);
    const metrics: Record<string, Metric> = {
      ...summary.metrics,
      generatorCpu: { label: 'generator CPU (all threads)', value: generator.cpuPercent, unit: '% of a core', better: 'lower' },
      generatorBusy: { label: 'busiest generator event loop', value: busiest, unit: '%', better: 'lower' },
    };
    let headline = summary.headline;
    if (broker0 !== null && broker1 !== null) {
      metrics.brokerCpu = { label: 'broker CPU', value: ((broker1 - broker0) / seconds) * 100, unit: '% of a core', better: 'lower' };
      // At a fixed rate every broker does the same work: the CPU it spends per delivered message is
      // the efficiency figure (at peak rate the throughput is). Read from /proc in 10 ms ticks.
      const delivered = measured.window.received;
      if (delivered > 0) {
        metrics.cpuPerMessage = {
          label: 'broker CPU per delivered message',
          value: ((broker1 - broker0) * 1e6) / delivered,
          unit: 'µs',
          better: 'lower',
        };
        if (Number(params.rate ?? 0) > 0) headline = [...headline, 'cpuPerMessage'];
      }
    }
    const allNotes = [...summary.notes, ...notes];
    for (const n of [...ready.flatMap((r) => r.notes), ...reports.flatMap((r) => r.notes)]) if (!allNotes.includes(n)) allNotes.push(n);
    if (busiest >= BUSY_THRESHOLD * 100)
      allNotes.push(
        `the generator was busy (an event loop at ${Math.round(busiest)} %): the figures may say more about the generator than the broker; ` +
          (workers === 0 ? 'use worker threads (--workers)' : 'try more --workers on a machine with spare cores'),
      );
    return {
      scenario: scenario.name,
      params: { ...params },
      metrics,
      headline,
      notes: allNotes,
      generator,
      totals: measured.totals,
    };
  } finally {
    outer?.removeEventListener('abort', onOuterAbort);
    clearTimeout(timer);
    if (ticker !== null) clearInterval(ticker);
    if (!controller.signal.aborted) controller.abort(new Error('scenario ended'));
    await Promise.all(handles.map((h) => h.close()));
  }
}
