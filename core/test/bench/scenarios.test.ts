import { fanIn, fanOut, idleConnections, qos1Pairs } from '../../bench/src/scenarios';
import { runScenario, type ScenarioResult, type Target, type Timing } from '../../bench/src/scenario';
import { startAedes, type InProcessAedes } from './aedes-worker';

/** Tiny runs: the point is that the generator works and reports sane numbers, not speed. */
const TIMING: Timing = { warmupMs: 200, measureMs: 600, setupTimeoutMs: 5000 };

let aedes: InProcessAedes;
let target: Target;

beforeAll(async () => {
  aedes = await startAedes();
  target = { host: '127.0.0.1', port: aedes.port };
});

afterAll(async () => {
  await aedes.stop();
});

function value(r: ScenarioResult, key: string): number {
  const m = r.metrics[key];
  if (m === undefined) throw new Error(`no metric ${key} in ${r.scenario}`);
  return m.value;
}

describe('scenarios against aedes (in a worker thread)', () => {
  it('fan-in: publishers reach the wildcard subscriber', async () => {
    const r = await runScenario(fanIn, target, TIMING, { publishers: 3, payload: 16, batch: 8, window: 500 });
    expect(value(r, 'received')).toBeGreaterThan(0);
    expect(value(r, 'sent')).toBeGreaterThan(0);
    expect(value(r, 'generatorCpu')).toBeGreaterThan(0);
    expect(r.headline).toEqual(['received']);
  });

  it('fan-out: every subscriber gets the messages', async () => {
    const r = await runScenario(fanOut, target, TIMING, { subscribers: 3, payload: 16, batch: 4, window: 100 });
    expect(value(r, 'delivered')).toBeGreaterThan(0);
    expect(value(r, 'sent')).toBeGreaterThan(0);
  });

  it('qos1-pairs: publishes are acknowledged and delivered at QoS 1', async () => {
    const r = await runScenario(qos1Pairs, target, TIMING, { pairs: 2, inflight: 8, payload: 16, persistent: 0 });
    expect(value(r, 'acked')).toBeGreaterThan(0);
    expect(value(r, 'delivered')).toBeGreaterThan(0);
  });

  it('idle-connections: connects every client and reports rate and CONNACK latency', async () => {
    const r = await runScenario(
      idleConnections,
      target,
      { ...TIMING, measureMs: 200 },
      { connections: 20, concurrency: 5, keepalive: 0, settle: 50 },
    );
    expect(value(r, 'connections')).toBe(20);
    expect(value(r, 'connectRate')).toBeGreaterThan(0);
    expect(value(r, 'connackP99')).toBeGreaterThanOrEqual(value(r, 'connackP50'));
    expect(r.metrics.bytesPerConnection).toBeUndefined();
  });

  it('fails with the reason, within its bound, when nothing listens', async () => {
    await expect(runScenario(fanIn, { host: '127.0.0.1', port: 1 }, TIMING, fanIn.defaults)).rejects.toThrow(/ECONNREFUSED|closed/);
  });
});
