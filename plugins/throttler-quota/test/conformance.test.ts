import { registerConformance, resourceThrottlerConformance, testPluginContext } from '@bifro/spi/testing';
import { RESOURCE_TYPES, type ResourceThrottler } from '@bifro/spi';
import plugin from '../src';

function create(ctx: ReturnType<typeof testPluginContext>): ResourceThrottler {
  const factory = plugin.throttler;
  if (factory === undefined) throw new Error('the plugin must provide throttler');
  const throttler = factory(ctx);
  if (throttler instanceof Promise) throw new Error('the throttler factory must be synchronous');
  return throttler;
}

describe('quota throttler: conformance without options (unlimited)', () => {
  registerConformance(
    resourceThrottlerConformance({
      create: () => create(testPluginContext({ usage: { busy: { TotalConnections: 1e9 } } })),
      tenants: ['busy'],
      expectations: RESOURCE_TYPES.map((resource) => ({ tenantId: 'busy', resource, hasResource: true })),
    }),
    { it },
  );
});

describe('quota throttler: conformance with defaults and tenant quotas', () => {
  const ctx = testPluginContext({
    options: {
      defaults: { TotalConnections: 10, TotalConnectPerSecond: 5, TotalRetainTopics: 0 },
      tenants: { big: { TotalConnections: 1000 }, free: { TotalConnections: 0 }, 'tenant-ü': { TotalSubscribePerSecond: 1 } },
    },
    usage: {
      busy: { TotalConnections: 10, TotalConnectPerSecond: 4, TotalRetainTopics: 1e6 },
      calm: { TotalConnections: 3, TotalConnectPerSecond: 5 },
      big: { TotalConnections: 999, TotalConnectPerSecond: 5 },
      free: { TotalConnections: 1e6 },
      'tenant-ü': { TotalSubscribePerSecond: 1 },
    },
  });
  registerConformance(
    resourceThrottlerConformance({
      create: () => create(ctx),
      tenants: ['busy', 'calm', 'big', 'free'],
      expectations: [
        { tenantId: 'busy', resource: 'TotalConnections', hasResource: false },
        { tenantId: 'busy', resource: 'TotalConnectPerSecond', hasResource: true },
        { tenantId: 'busy', resource: 'TotalRetainTopics', hasResource: true },
        { tenantId: 'calm', resource: 'TotalConnections', hasResource: true },
        { tenantId: 'calm', resource: 'TotalConnectPerSecond', hasResource: false },
        { tenantId: 'big', resource: 'TotalConnections', hasResource: true },
        { tenantId: 'big', resource: 'TotalConnectPerSecond', hasResource: false },
        { tenantId: 'free', resource: 'TotalConnections', hasResource: true },
        { tenantId: 'tenant-ü', resource: 'TotalSubscribePerSecond', hasResource: false },
        { tenantId: 'unknown-tenant', resource: 'TotalConnections', hasResource: true },
      ],
    }),
    { it },
  );
});
