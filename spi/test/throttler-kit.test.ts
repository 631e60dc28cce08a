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
    expect(cases).toHaveLength(1 + RESOURCE_TYPES.length + 2);
    await expectAllPass(cases);
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
