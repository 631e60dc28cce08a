/**
 * Publishers on one node and subscribers on another (or the same) as two concurrent runs of the
 * scenario engine, whose plans connect to one target each.
 */
import { performance } from 'node:perf_hooks';
import { setTimeout as sleep } from 'node:timers/promises';
import { BenchClient, type Endpoint } from './bench-client';
import { CpuWindow, type CpuUse, type Pids } from './cluster-cpu';
import { encodeConnect, encodePublish, makePayload, type QoS } from './packets';
import { runScenario, type Metric, type Scenario, type ScenarioParams, type ScenarioResult, type Target, type Timing } from './scenario';
import { rate } from './scenarios/common';

/** The load of a publishers-here, subscribers-there pair of runs. */
export interface SplitShape {
  readonly tag: string;
  readonly qos: QoS;
  readonly publishers: number;
  /** `paired`: subscriber i on publisher i's topic; `wildcard`: one subscriber on every topic. */
  readonly subscribers: 'paired' | 'wildcard';
  readonly rate: number;
  readonly payload: number;
  readonly inflight: number;
  readonly latency: boolean;
}

const NO_PARAMS: ScenarioParams = {};

function prefixOf(shape: SplitShape): string {
  return `bench/${shape.tag}/c`;
}

/** The publishers of a split run only (no subscriber: they are in the other run, maybe on the other node). */
function publisherSide(shape: SplitShape): Scenario<ScenarioParams> {
  const prefix = prefixOf(shape);
  return {
    name: `${shape.tag} publishers`,
    summary: 'publishers of a split run',
    defaults: NO_PARAMS,
    quick: {},
    specs: {},
    extraMs: () => shape.publishers * 2,
    plan: () => ({
      version: 4,
      keepalive: 0,
      concurrency: 50,
      subscribers: [],
      publishers: Array.from({ length: shape.publishers }, (_v, i) => ({ id: `${shape.tag}p${i}`, topic: `${prefix}/${i}` })),
      publish: { qos: shape.qos, payload: shape.payload, batch: 16, inflight: shape.inflight },
      idle: null,
      rate: shape.rate,
      // QoS 1 is bounded by the inflight window, latency by its rate: no end-to-end window (the
      // subscribers' counts are in the other run).
      window: null,
      latency: shape.latency,
    }),
    summarize(m) {
      if (m.window.sent === 0) throw new Error('nothing was published in the measured window');
      if (shape.qos > 0 && m.window.completed === 0) throw new Error('no PUBACK in the measured window');
      return {
        metrics: { sent: rate('published', m.window.sent, m.seconds), acked: rate('acknowledged', m.window.completed, m.seconds) },
        headline: ['sent', 'acked'],
        notes: [],
      };
    },
  };
}

/** The subscribers of a split run, acknowledging QoS 1 and recording latency. */
function subscriberSide(shape: SplitShape): Scenario<ScenarioParams> {
  const prefix = prefixOf(shape);
  const count = shape.subscribers === 'paired' ? shape.publishers : 1;
  return {
    name: `${shape.tag} subscribers`,
    summary: 'subscribers of a split run',
    defaults: NO_PARAMS,
    quick: {},
    specs: {},
    extraMs: () => count * 2,
    plan: () => ({
      version: 4,
      keepalive: 0,
      concurrency: 50,
      subscribers: Array.from({ length: count }, (_v, i) => ({
        id: `${shape.tag}s${i}`,
        filter: shape.subscribers === 'paired' ? `${prefix}/${i}` : `${prefix}/+`,
        qos: shape.qos,
        clean: true,
      })),
      publishers: [],
      publish: { qos: shape.qos, payload: shape.payload, batch: 16, inflight: shape.inflight },
      idle: null,
      rate: 0,
      window: null,
      latency: shape.latency,
    }),
    summarize(m) {
      if (m.totals.received === 0) throw new Error('the subscribers received nothing');
      const metrics: Record<string, Metric> = {
        received: { label: 'received over the run', value: m.totals.received, unit: 'msg', better: 'higher' },
      };
      if (shape.latency) {
        const l = m.latency;
        if (l === null || l.count === 0) throw new Error('no message was delivered in the measured window');
        metrics.p50 = { label: 'latency p50', value: l.p50Ms, unit: 'ms', better: 'lower' };
        metrics.p99 = { label: 'latency p99', value: l.p99Ms, unit: 'ms', better: 'lower' };
        metrics.samples = { label: 'latency samples', value: l.count, unit: 'msg', better: 'higher' };
      }
      return { metrics, headline: Object.keys(metrics), notes: [] };
    },
  };
}

/** Runs each of `runs` with a shared abort: one failing ends the others at once. */
export async function together<T>(runs: readonly ((signal: AbortSignal) => Promise<T>)[]): Promise<T[]> {
  const controller = new AbortController();
  return Promise.all(
    runs.map((run) =>
      run(controller.signal).catch((err: unknown) => {
        controller.abort(err instanceof Error ? err : new Error(String(err)));
        throw err;
      }),
    ),
  );
}

/**
 * Waits until a message published on `from` reaches a subscriber on `to`, published every 20 ms
 * (QoS 0): then `from` has `to` in its live list and knows its routes up to the probe's. Route
 * writes of a node are issued in order and watched in order, so subscriptions made on `to` before
 * the probe's are known on `from` too.
 */
export async function waitForCrossDelivery(from: Endpoint, to: Endpoint, timeoutMs: number): Promise<number> {
  const tag = `probe${process.pid.toString(36)}${Math.floor(Math.random() * 1e9).toString(36)}`;
  const topic = `bench/${tag}`;
  const started = performance.now();
  const sub = await BenchClient.open(to, `${tag}s`, encodeConnect(`${tag}s`, 0, true, 4), timeoutMs);
  try {
    await sub.subscribe(topic, 0, timeoutMs);
    const pub = await BenchClient.open(from, `${tag}p`, encodeConnect(`${tag}p`, 0, true, 4), timeoutMs);
    try {
      const packet = encodePublish(topic, makePayload(8), 0);
      while (sub.splitter.publishes === 0) {
        if (performance.now() - started > timeoutMs)
          throw new Error(`no message crossed from node ${from.port} to ${to.port} within ${timeoutMs} ms`);
        pub.socket.write(packet);
        await sleep(20);
      }
    } finally {
      pub.close();
    }
  } finally {
    sub.close();
  }
  return performance.now() - started;
}

/**
 * The subscribers' run is this much longer at each end of its measured window than the
 * publishers': the publishers start about 1 s after the subscribers are ready (the next progress
 * tick), then wait for the probe and connect.
 */
const SUB_LEAD_MS = 1500;
const SUB_TAIL_MS = 1500;
const PROBE_TIMEOUT_MS = 10_000;

/**
 * Publishers on `pub`, subscribers on `sub` (the same node or not), as two concurrent runs: the
 * subscribers connect, subscribe and wait; once their routes reached the publishers' node the
 * publishers run their warm-up and measured window (acked/s, the CPU window). The subscribers'
 * measured window (latency samples) opens about when the publishers' warm-up ends and closes
 * after the publishers have stopped, so the subscribers are there for every message measured.
 */
export async function runSplit(
  shape: SplitShape,
  pub: Target,
  sub: Target,
  pids: Pids,
  opts: { readonly timing: Timing; readonly workers?: number },
): Promise<{ pub: ScenarioResult; sub: ScenarioResult; cpu: CpuUse; inflightTotal: number }> {
  const timing = opts.timing;
  const subTiming: Timing = {
    ...timing,
    warmupMs: timing.warmupMs + SUB_LEAD_MS,
    measureMs: timing.measureMs + SUB_LEAD_MS + SUB_TAIL_MS,
  };
  const window = new CpuWindow(pids);
  const workers = opts.workers === undefined ? {} : { workers: opts.workers };
  let subscribed!: () => void;
  const ready = new Promise<void>((resolve) => (subscribed = resolve));
  const [subResult, pubResult] = await together<ScenarioResult>([
    (signal) =>
      runScenario(subscriberSide(shape), sub, subTiming, NO_PARAMS, {
        ...workers,
        signal,
        onProgress: (p) => {
          if (p.phase !== 'setup') subscribed();
        },
      }),
    async (signal) => {
      await Promise.race([
        ready,
        new Promise<never>((_r, reject) => signal.addEventListener('abort', () => reject(signal.reason as Error))),
      ]);
      if (pub.port !== sub.port) await waitForCrossDelivery(pub, sub, PROBE_TIMEOUT_MS);
      return runScenario(publisherSide(shape), pub, timing, NO_PARAMS, { ...workers, signal, onProgress: window.onProgress }).finally(() =>
        window.close(),
      );
    },
  ]);
  return {
    pub: pubResult!,
    sub: subResult!,
    cpu: window.result([{ result: pubResult!, pid: pub.pid! }]),
    inflightTotal: shape.qos > 0 ? shape.publishers * shape.inflight : 0,
  };
}
