import { RESOURCE_TYPES, type ResourceThrottler, type ResourceType } from '@bifro/spi';
import { resourceThrottlerConformance, testPluginContext } from '@bifro/spi/testing';
import { expectAllPass, expectFailures } from './support/kit-runner';

const throttler = (hasResource: (tenantId: string, resource: ResourceType) => unknown): ResourceThrottler => ({
  hasResource: hasResource as ResourceThrottler['hasResource'],
});

describe('resource throttler kit', () => {
  it('passes a correct throttler over live usage, with its answers', async () => {
    const ctx = testPluginContext({ usage: { busy: { TotalConnections: 1000 } } });
    const cases = resourceThrottlerConformance({
      create: () => throttler((t, r) => r !== 'TotalConnections' || ctx.tenantUsage.get(t, r) < 1000),
      tenants: ['busy'],
      expectations: [
        { tenantId: 'busy', resource: 'TotalConnections', hasResource: false },
        { tenantId: 'idle', resource: 'TotalConnections', hasResource: true },
      ],
    });
    expect(cases).toHaveLength(1 + RESOURCE_TYPES.length + 1 + 2);
    await expectAllPass(cases);
  });

  it('passes a throttler with quota: its limits, and undefined where it has none', async () => {
    const limited: ResourceThrottler = {
      hasResource: () => true,
      quota: (t, r) => (r === 'TotalConnections' ? 1000 : r === 'TotalRetainTopics' && t === 'busy' ? 0 : undefined),
    };
    await expectAllPass(resourceThrottlerConformance({ create: () => limited, tenants: ['busy'] }));
  });

  it.each([
    ['a negative number', -1],
    ['NaN', NaN],
    ['Infinity', Infinity],
    ['a string', '10'],
    ['null', null],
  ])('fails a quota answering %s', async (_what, answer) => {
    const messages = await expectFailures(
      resourceThrottlerConformance({
        create: () => ({
          hasResource: () => true,
          quota: ((_t: string, r: ResourceType) => (r === 'TotalRetainTopics' ? answer : 5)) as ResourceThrottler['quota'],
        }),
      }),
      'quota (when present)',
    );
    expect(messages.join('\n')).toContain('TotalRetainTopics) must answer undefined or a finite non-negative number');
  });

  it('fails a quota that throws or answers a promise', async () => {
    const throwing = await expectFailures(
      resourceThrottlerConformance({
        create: () => ({
          hasResource: () => true,
          quota: (t) => {
            if (t === '') throw new Error('no limits for an empty tenant');
            return undefined;
          },
        }),
      }),
      'quota (when present)',
    );
    expect(throwing.join('\n')).toContain('quota("", TotalConnections) threw');
    const asynchronous = await expectFailures(
      resourceThrottlerConformance({
        create: () => ({ hasResource: () => true, quota: (async () => 5) as unknown as ResourceThrottler['quota'] }),
      }),
      'quota (when present)',
    );
    expect(asynchronous.join('\n')).toContain('must answer synchronously');
  });

  it('fails a non-boolean answer', async () => {
    await expectFailures(
      resourceThrottlerConformance({ create: () => throttler((_t, r) => (r === 'TotalRetainTopics' ? 1 : true)) }),
      'hasResource(TotalRetainTopics)',
    );
  });

  it('fails an asynchronous answer', async () => {
    await expectFailures(resourceThrottlerConformance({ create: () => throttler(async () => true) }), 'hasResource(TotalConnections)');
  });

  it('fails a throttler that throws for an unknown tenant', async () => {
    const quotas = new Map([['t1', 10]]);
    await expectFailures(
      resourceThrottlerConformance({
        create: () =>
          throttler((t) => {
            const quota = quotas.get(t);
            if (quota === undefined) throw new Error(`no quota for ${t}`);
            return quota > 0;
          }),
      }),
      'hasResource(TotalInboundBytesPerSecond)',
    );
  });

  it('fails a throttler that does not give the expected answer', async () => {
    await expectFailures(
      resourceThrottlerConformance({
        create: () => throttler(() => true),
        expectations: [{ tenantId: 'busy', resource: 'TotalConnections', hasResource: false }],
      }),
      'expectation: TotalConnections',
    );
  });
});
