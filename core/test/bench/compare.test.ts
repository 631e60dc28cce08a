import { medianRun, parseCompareArgs } from '../../bench/src/compare';
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
    expect(parseCompareArgs(['--help'])).toBeNull();
    expect(() => parseCompareArgs(['--scenarios', 'nope'])).toThrow(/unknown scenario/);
    expect(() => parseCompareArgs(['--brokers', 'hivemq'])).toThrow(/unknown broker/);
    expect(() => parseCompareArgs(['--pairs', '0'])).toThrow(/positive integer/);
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
