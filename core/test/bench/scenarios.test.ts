import { startTestBroker, type TestBroker } from '../../../test/support/test-broker';
import { fanIn, fanOut, idleConnections, latency, qos1Pairs, qos1Persistent, sharedSub } from '../../bench/src/scenarios';
import { runScenario, type Progress, type ScenarioResult, type Target, type Timing } from '../../bench/src/scenario';
import { startAedes, type InProcessAedes } from './aedes-worker';

/**
 * Tiny runs: the point is that every scenario works and reports sane numbers, not speed (no
 * timing assertions). Jest runs the TypeScript sources, so the connections run in this thread
 * (`workers: 0`); the worker threads are covered by the `bifro bench` test, which runs the build.
 */
const TIMING: Timing = { warmupMs: 150, measureMs: 500, setupTimeoutMs: 5000 };
const OPTS = { workers: 0 };

let bifro: TestBroker;
let aedes: InProcessAedes;
let target: Target;

beforeAll(async () => {
  bifro = await startTestBroker();
  aedes = await startAedes();
  target = { host: '127.0.0.1', port: bifro.port };
});

afterAll(async () => {
  await bifro.stop();
  await aedes.stop();
});

function value(r: ScenarioResult, key: string): number {
  const m = r.metrics[key];
  if (m === undefined) throw new Error(`no metric ${key} in ${r.scenario}`);
  return m.value;
}

/** Every figure is a finite number and the generator figures are there. */
function expectSane(r: ScenarioResult): void {
  for (const [key, m] of Object.entries(r.metrics)) {
    expect([key, Number.isFinite(m.value)]).toEqual([key, true]);
    expect(m.unit).not.toBe('');
  }
  for (const key of r.headline) expect(r.metrics[key]).toBeDefined();
  expect(r.generator?.workers).toBe(0);
  expect(r.generator?.eventLoopPercent).toHaveLength(1);
  expect(value(r, 'generatorCpu')).toBeGreaterThan(0);
}

describe('scenarios against an in-process Bifro', () => {
  it('fan-in: publishers reach the wildcard subscriber; no more received than published', async () => {
    const progress: Progress[] = [];
    const r = await runScenario(
      fanIn,
      target,
      { ...TIMING, measureMs: 1100 },
      { ...fanIn.defaults, publishers: 3, batch: 8, window: 500 },
      { ...OPTS, onProgress: (p) => progress.push(p) },
    );
    expectSane(r);
    expect(value(r, 'received')).toBeGreaterThan(0);
    expect(value(r, 'sent')).toBeGreaterThan(0);
    expect(r.headline).toEqual(['received']);
    expect(r.totals!.received).toBeGreaterThan(0);
    expect(r.totals!.received).toBeLessThanOrEqual(r.totals!.sent);
    expect(progress.length).toBeGreaterThan(0);
    expect(progress[progress.length - 1]!.connected).toBe(4);
  });

  it('fan-out at QoS 1 over MQTT 5: every subscriber gets the messages, publishes are acknowledged', async () => {
    const r = await runScenario(
      fanOut,
      target,
      TIMING,
      { ...fanOut.defaults, subscribers: 3, qos: 1, mqtt: 5, inflight: 8, window: 100 },
      OPTS,
    );
    expectSane(r);
    expect(value(r, 'delivered')).toBeGreaterThan(0);
    expect(value(r, 'acked')).toBeGreaterThan(0);
    // Each message reaches each of the 3 subscribers once; every publish is acknowledged by the end.
    expect(r.totals!.received).toBeLessThanOrEqual(3 * r.totals!.sent);
    expect(r.totals!.completed).toBeLessThanOrEqual(r.totals!.sent);
  });

  it('qos1-pairs at QoS 2 over MQTT 3.1: publishes complete and are delivered', async () => {
    const r = await runScenario(qos1Pairs, target, TIMING, { ...qos1Pairs.defaults, pairs: 2, qos: 2, inflight: 8, mqtt: 3 }, OPTS);
    expectSane(r);
    expect(value(r, 'acked')).toBeGreaterThan(0);
    expect(value(r, 'delivered')).toBeGreaterThan(0);
    expect(r.headline).toEqual(['acked', 'delivered']);
    expect(r.totals!.completed).toBeLessThanOrEqual(r.totals!.sent);
    expect(r.totals!.received).toBeLessThanOrEqual(r.totals!.sent);
  });

  it('qos1-persistent: persistent subscribers receive QoS 1', async () => {
    const r = await runScenario(qos1Persistent, target, TIMING, { ...qos1Persistent.defaults, pairs: 2, inflight: 8 }, OPTS);
    expectSane(r);
    expect(r.params.persistent).toBe(1);
    expect(value(r, 'acked')).toBeGreaterThan(0);
  });

  it('shared-sub: the group consumes each message once, spread over its consumers', async () => {
    const r = await runScenario(sharedSub, target, TIMING, { ...sharedSub.defaults, publishers: 2, consumers: 3, window: 300 }, OPTS);
    expectSane(r);
    const consumed = value(r, 'consumed');
    expect(consumed).toBeGreaterThan(0);
    expect(value(r, 'consumerMin')).toBeLessThanOrEqual(value(r, 'consumerMax'));
    expect(value(r, 'consumerMax')).toBeLessThanOrEqual(consumed);
    expect(value(r, 'spread')).toBeGreaterThanOrEqual(0);
    expect(r.notes.join(' ')).not.toMatch(/copies/);
    expect(r.totals!.received).toBeLessThanOrEqual(r.totals!.sent);
  });

  it('latency: fixed rate, p50 ≤ p99 ≤ max', async () => {
    const r = await runScenario(latency, target, TIMING, { ...latency.defaults, publishers: 2, subscribers: 2, rate: 1000 }, OPTS);
    expectSane(r);
    const [p50, p99, max] = [value(r, 'p50'), value(r, 'p99'), value(r, 'max')];
    expect(p50).toBeGreaterThanOrEqual(0);
    expect(p50).toBeLessThanOrEqual(p99);
    expect(p99).toBeLessThanOrEqual(max);
    expect(value(r, 'samples')).toBeGreaterThan(0);
    expect(value(r, 'achieved')).toBeGreaterThan(0);
    expect(r.headline).toEqual(['p50', 'p99', 'max', 'achieved']);
  });

  it('latency --paired 1: each publisher reaches its own subscriber only', async () => {
    const r = await runScenario(
      latency,
      target,
      TIMING,
      { ...latency.defaults, publishers: 4, subscribers: 3, paired: 1, rate: 1000 },
      OPTS,
    );
    expectSane(r);
    expect(value(r, 'samples')).toBeGreaterThan(0);
    // One delivery per message (a subscriber per topic), not one per subscriber as with the shared wildcard.
    expect(r.totals!.received).toBeLessThanOrEqual(r.totals!.sent);
    expect(r.totals!.received).toBeGreaterThan(r.totals!.sent / 2);
  });

  it('idle-connections: connects every client and reports rate, CONNACK latency and memory', async () => {
    const r = await runScenario(
      idleConnections,
      { ...target, pid: process.pid },
      { ...TIMING, measureMs: 200 },
      { ...idleConnections.defaults, connections: 20, concurrency: 5, settle: 50 },
      OPTS,
    );
    expect(value(r, 'connections')).toBe(20);
    expect(value(r, 'connectRate')).toBeGreaterThan(0);
    expect(value(r, 'connackP50')).toBeLessThanOrEqual(value(r, 'connackP99'));
    expect(value(r, 'connackP99')).toBeLessThanOrEqual(value(r, 'connackMax'));
    expect(Number.isFinite(value(r, 'bytesPerConnection'))).toBe(true);
  });

  it('fails with the reason, within its bound, when nothing listens', async () => {
    await expect(runScenario(fanIn, { host: '127.0.0.1', port: 1 }, TIMING, fanIn.defaults, OPTS)).rejects.toThrow(/ECONNREFUSED|closed/);
  });
});

describe('scenarios against aedes (in a worker thread)', () => {
  it('fan-in at QoS 0 and qos1-pairs report throughput', async () => {
    const t: Target = { host: '127.0.0.1', port: aedes.port };
    const a = await runScenario(fanIn, t, TIMING, { ...fanIn.defaults, publishers: 2, batch: 8, window: 500 }, OPTS);
    expect(value(a, 'received')).toBeGreaterThan(0);
    const b = await runScenario(qos1Pairs, t, TIMING, { ...qos1Pairs.defaults, pairs: 2, inflight: 8 }, OPTS);
    expect(value(b, 'acked')).toBeGreaterThan(0);
  });

  it('shared-sub fails with a clear reason on a broker without $share support', async () => {
    await expect(
      runScenario(sharedSub, { host: '127.0.0.1', port: aedes.port }, TIMING, { ...sharedSub.defaults, publishers: 1, consumers: 2 }, OPTS),
    ).rejects.toThrow(/no consumer received a message/);
  });
});
