import { sessionListKey } from '@bifro/spi';
import { registerConformance, runConformance, testPluginContext, type ConformanceCase } from '@bifro/spi/testing';

const cases: ConformanceCase[] = [
  { name: 'passes', run: async () => undefined },
  {
    name: 'fails',
    run: async () => {
      throw new Error('boom');
    },
  },
];

describe('conformance case helpers', () => {
  it('registerConformance hands every case to the runner under its name', async () => {
    const registered: Array<[string, () => Promise<void>]> = [];
    registerConformance(cases, { it: (name, fn) => void registered.push([name, fn]) });
    expect(registered.map(([n]) => n)).toEqual(['passes', 'fails']);
    await expect(registered[0][1]()).resolves.toBeUndefined();
    await expect(registered[1][1]()).rejects.toThrow('boom');
  });

  it('runConformance reports passed and failed cases without rejecting', async () => {
    const report = await runConformance(cases);
    expect(report.passed).toEqual(['passes']);
    expect(report.failed.map((f) => f.name)).toEqual(['fails']);
    expect((report.failed[0].error as Error).message).toBe('boom');
  });

  it('testPluginContext records log lines and serves usage', () => {
    const ctx = testPluginContext({ options: { a: 1 }, usage: { t1: { TotalConnections: 3 } } });
    ctx.logger.warn('careful', { x: 1 });
    ctx.logger.info('plain');
    expect(ctx.logged).toEqual([
      { level: 'warn', msg: 'careful', fields: { x: 1 } },
      { level: 'info', msg: 'plain' },
    ]);
    expect(ctx.tenantUsage.get('t1', 'TotalConnections')).toBe(3);
    expect(ctx.tenantUsage.get('t2', 'TotalConnections')).toBe(0);
    expect(ctx.options).toEqual({ a: 1 });
  });

  it('sessionListKey sorts like the pair (tenant, client id)', () => {
    const pairs: Array<[string, string]> = [
      ['a', 'z'],
      ['a b', 'a'],
      ['a!', 'a'],
      ['ab', 'a'],
      ['a', ''],
      ['b', 'a'],
    ];
    const byPair = [...pairs].sort((x, y) => (x[0] !== y[0] ? (x[0] < y[0] ? -1 : 1) : x[1] < y[1] ? -1 : x[1] > y[1] ? 1 : 0));
    const byKey = [...pairs].sort((x, y) => (sessionListKey(...x) < sessionListKey(...y) ? -1 : 1));
    expect(byKey).toEqual(byPair);
  });
});
