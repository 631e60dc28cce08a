import path from 'node:path';
import { BenchClient } from '../../bench/src/bench-client';
import { launchBroker } from '../../bench/src/broker-process';
import { brokerOrder, medianRun, parseCompareArgs, referenceLine } from '../../bench/src/compare';
import { encodeConnect } from '../../bench/src/packets';
import { renderComparison, type Cell } from '../../bench/src/report';
import type { ScenarioResult } from '../../bench/src/scenario';
import { quantile } from '../../bench/src/stats';

function result(scenario: string, value: number): ScenarioResult {
  return {
    scenario,
    params: {},
    metrics: { rate: { label: `${scenario} rate`, value, unit: 'msg/s', better: 'higher' } },
    headline: ['rate'],
    notes: [],
  };
}

describe('bench command line', () => {
  it('parses options and rejects unknown scenarios and brokers', () => {
    const o = parseCompareArgs([
      '--quick',
      '--scenarios',
      'fan-in,idle-connections',
      '--brokers',
      'aedes',
      '--publishers',
      '5',
      '--duration',
      '3',
    ])!;
    expect(o.scenarios).toEqual(['fan-in', 'idle-connections']);
    expect(o.brokers).toEqual(['aedes']);
    expect(o.overrides).toEqual({ publishers: 5 });
    expect(o.timing.measureMs).toBe(3000);
    expect(o.timing.warmupMs).toBe(500);
    expect(o.workers).toBe(-1);
    expect(parseCompareArgs(['--help'])).toBeNull();
    expect(() => parseCompareArgs(['--scenarios', 'nope'])).toThrow(/unknown scenario/);
    expect(() => parseCompareArgs(['--brokers', 'hivemq'])).toThrow(/unknown broker/);
    expect(() => parseCompareArgs(['--pairs', '0'])).toThrow(/--pairs must be 1\.\.50000/);
    expect(() => parseCompareArgs(['--repeat', '0'])).toThrow(/positive integer/);
    expect(() => parseCompareArgs(['--workers', 'x'])).toThrow(/--workers/);
  });

  it('takes any scenario parameter and the new options', () => {
    const o = parseCompareArgs(['--qos', '1', '--topic-levels', '6', '--repeat', '3', '--workers', '2', '--fresh', '--json', 'x.json'])!;
    expect(o.overrides).toEqual({ qos: 1, topicLevels: 6 });
    expect([o.repeat, o.workers, o.fresh, o.json]).toEqual([3, 2, true, 'x.json']);
    // qos1-pairs only takes QoS 1 or 2: QoS 0 is refused for it, named.
    expect(() => parseCompareArgs(['--qos', '0'])).toThrow(/--qos must be one of 1, 2 \(for qos1-pairs\)/);
    expect(parseCompareArgs(['--qos', '0', '--scenarios', 'fan-in'])!.overrides).toEqual({ qos: 0 });
    expect(() => parseCompareArgs(['--window', '4', '--scenarios', 'fan-in'])).toThrow(/--window \(4\) must be 0 or at least --batch/);
    expect(() => parseCompareArgs(['--frobnicate', '1'])).toThrow(/frobnicate/);
    expect(() => parseCompareArgs(['--pairs', '3', '--scenarios', 'fan-in'])).toThrow(/--pairs applies to none of the scenarios run/);
  });

  it('interleaves brokers in a rotating order', () => {
    expect(brokerOrder(['a', 'b', 'c'], 0)).toEqual(['a', 'b', 'c']);
    expect(brokerOrder(['a', 'b', 'c'], 1)).toEqual(['b', 'c', 'a']);
    expect(brokerOrder(['a', 'b', 'c'], 3)).toEqual(['a', 'b', 'c']);
  });

  it('keeps the median run', () => {
    expect(medianRun([result('a', 5), result('a', 1), result('a', 3)]).metrics.rate!.value).toBe(3);
  });

  it('prints values, ratios and errors in one table', () => {
    const cells: Cell[] = [
      { scenario: 'a', broker: 'bifro', result: result('a', 200) },
      { scenario: 'a', broker: 'aedes', result: result('a', 100) },
      { scenario: 'a', broker: 'mosquitto', error: 'mosquitto exited during start' },
    ];
    const table = renderComparison(['a'], ['bifro', 'aedes', 'mosquitto'], cells);
    expect(table).toContain('bifro/aedes');
    expect(table).toContain('2.00×');
    expect(table).toContain('error: mosquitto exited');
  });

  it('computes nearest-rank quantiles', () => {
    expect(quantile([5, 1, 4, 2, 3], 0.5)).toBe(3);
    expect(quantile([1, 2, 3, 4, 5, 6, 7, 8, 9, 10], 0.99)).toBe(10);
    expect(quantile([], 0.5)).toBeNaN();
  });
});

describe('the memory reference (a bare Node net server answering CONNACK)', () => {
  function idle(bytes: number, rate: number): ScenarioResult {
    return {
      scenario: 'idle-connections',
      params: {},
      metrics: {
        bytesPerConnection: { label: 'broker memory per idle conn', value: bytes, unit: 'bytes/conn', better: 'lower' },
        connectRate: { label: 'connect rate', value: rate, unit: 'conn/s', better: 'higher' },
      },
      headline: ['bytesPerConnection', 'connectRate'],
      notes: [],
    };
  }

  it('prints the reference figures and Bifro’s ratio to them', () => {
    const cells: Cell[] = [{ scenario: 'idle-connections', broker: 'bifro', result: idle(5000, 3000) }];
    const line = referenceLine([idle(4000, 6000)], cells);
    expect(line).toContain('bare Node net server');
    expect(line).toContain('bifro/node-net 1.25×');
    expect(line).toContain('bifro/node-net 0.50×');
    expect(referenceLine(undefined, cells)).toBe('');
  });

  it('starts as a real process and answers CONNECT (v3.1.1 and v5) with CONNACK', async () => {
    const proc = await launchBroker('node-net', { repoRoot: path.resolve(__dirname, '..', '..', '..'), cpus: null });
    try {
      for (const version of [4, 5] as const) {
        const client = await BenchClient.open(
          { host: proc.host, port: proc.port },
          `ref-${version}`,
          encodeConnect(`ref-${version}`, 0, true, version),
          3000,
          version,
        );
        expect(client.connackMs).toBeGreaterThanOrEqual(0);
        client.close();
      }
    } finally {
      await proc.stop();
    }
  });
});
