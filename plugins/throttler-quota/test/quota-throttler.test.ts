import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { RESOURCE_TYPES, SPI_VERSION, type ResourceType, type TenantUsageReader } from '@bifro/spi';
import { testPluginContext } from '@bifro/spi/testing';
import plugin, { QuotaThrottler, parseQuotaOptions } from '../src';

/** The broker's usage as the test sets it: a small reader over a map, counting its reads. */
class Usage implements TenantUsageReader {
  readonly values = new Map<string, number>();
  reads = 0;

  set(tenantId: string, resource: ResourceType, value: number): this {
    this.values.set(`${tenantId}/${resource}`, value);
    return this;
  }

  get(tenantId: string, resource: ResourceType): number {
    this.reads++;
    return this.values.get(`${tenantId}/${resource}`) ?? 0;
  }
}

function throttler(options: Readonly<Record<string, unknown>>, usage: TenantUsageReader): QuotaThrottler {
  const ctx = { ...testPluginContext({ options }), tenantUsage: usage };
  const created = plugin.throttler?.(ctx);
  if (!(created instanceof QuotaThrottler)) throw new Error('the plugin must create a QuotaThrottler synchronously');
  return created;
}

describe('quota throttler plugin', () => {
  it('declares the throttler kind and an SPI range the current SPI satisfies', () => {
    const pkg = JSON.parse(readFileSync(join(__dirname, '..', 'package.json'), 'utf8')) as {
      name: string;
      version: string;
      bifro: { kinds: string[]; spi: string; main: string };
      peerDependencies: Record<string, string>;
      devDependencies: Record<string, string>;
      dependencies?: Record<string, string>;
    };
    expect(pkg.name).toBe('@bifro/plugin-throttler-quota');
    expect(pkg.version).toBe('1.0.0');
    expect(pkg.bifro.kinds).toEqual(['throttler']);
    expect(pkg.bifro.main).toBe('dist/index.js');
    expect(pkg.peerDependencies).toEqual({ '@bifro/spi': pkg.bifro.spi });
    expect(pkg.devDependencies).toEqual({ '@bifro/spi': SPI_VERSION });
    expect(pkg.dependencies).toBeUndefined();
    expect(pkg.bifro.spi).toBe(`^${SPI_VERSION.split('.')[0]}.0.0`);
  });

  it('says what it enforces in one info line', () => {
    const ctx = testPluginContext({ options: { defaults: { TotalConnections: 5 }, tenants: { a: {}, b: { TotalRetainTopics: 1 } } } });
    plugin.throttler?.(ctx);
    expect(ctx.logged).toEqual([{ level: 'info', msg: 'quota throttler', fields: { defaults: 1, tenants: 2 } }]);
  });

  it('applies the default quota to every tenant without its own, up to but excluding the quota', () => {
    const usage = new Usage();
    const t = throttler({ defaults: { TotalConnections: 3 } }, usage);
    expect(t.hasResource('acme', 'TotalConnections')).toBe(true);
    usage.set('acme', 'TotalConnections', 2);
    expect(t.hasResource('acme', 'TotalConnections')).toBe(true);
    usage.set('acme', 'TotalConnections', 3);
    expect(t.hasResource('acme', 'TotalConnections')).toBe(false);
    usage.set('acme', 'TotalConnections', 4);
    expect(t.hasResource('acme', 'TotalConnections')).toBe(false);
    expect(t.hasResource('other', 'TotalConnections')).toBe(true);
  });

  it("prefers a tenant's own quota to the default, and keeps the defaults of the resources it does not name", () => {
    const usage = new Usage()
      .set('big', 'TotalConnections', 50)
      .set('small', 'TotalConnections', 2)
      .set('big', 'TotalConnectPerSecond', 10)
      .set('other', 'TotalConnections', 50);
    const t = throttler(
      {
        defaults: { TotalConnections: 10, TotalConnectPerSecond: 10 },
        tenants: { big: { TotalConnections: 100 }, small: { TotalConnections: 2 } },
      },
      usage,
    );
    expect(t.hasResource('big', 'TotalConnections')).toBe(true);
    expect(t.hasResource('small', 'TotalConnections')).toBe(false);
    expect(t.hasResource('other', 'TotalConnections')).toBe(false);
    expect(t.hasResource('big', 'TotalConnectPerSecond')).toBe(false);
    expect(t.quotaOf('big', 'TotalConnectPerSecond')).toBe(10);
  });

  it('treats a tenant quota of 0 as unlimited, even over a default', () => {
    const usage = new Usage().set('vip', 'TotalConnections', 1e9).set('acme', 'TotalConnections', 1e9);
    const t = throttler({ defaults: { TotalConnections: 10 }, tenants: { vip: { TotalConnections: 0 } } }, usage);
    expect(t.hasResource('vip', 'TotalConnections')).toBe(true);
    expect(t.hasResource('acme', 'TotalConnections')).toBe(false);
    expect(t.quotaOf('vip', 'TotalConnections')).toBe(Infinity);
  });

  it('is unlimited for every resource without options, and does not read the usage then', () => {
    const usage = new Usage();
    for (const resource of RESOURCE_TYPES) usage.set('acme', resource, Number.MAX_SAFE_INTEGER);
    const t = throttler({}, usage);
    for (const resource of RESOURCE_TYPES) expect(t.hasResource('acme', resource)).toBe(true);
    expect(usage.reads).toBe(0);
  });

  it('treats a default of 0 as unlimited', () => {
    const usage = new Usage().set('acme', 'TotalRetainedBytes', 1e12);
    expect(throttler({ defaults: { TotalRetainedBytes: 0 } }, usage).hasResource('acme', 'TotalRetainedBytes')).toBe(true);
  });

  it('compares rates with the count of the current second the reader gives', () => {
    const usage = new Usage().set('acme', 'TotalInboundBytesPerSecond', 1_048_575);
    const t = throttler({ defaults: { TotalInboundBytesPerSecond: 1_048_576 } }, usage);
    expect(t.hasResource('acme', 'TotalInboundBytesPerSecond')).toBe(true);
    usage.set('acme', 'TotalInboundBytesPerSecond', 1_048_576);
    expect(t.hasResource('acme', 'TotalInboundBytesPerSecond')).toBe(false);
    usage.set('acme', 'TotalInboundBytesPerSecond', 0); // a new window
    expect(t.hasResource('acme', 'TotalInboundBytesPerSecond')).toBe(true);
  });

  it('keeps every resource apart', () => {
    const usage = new Usage();
    const defaults = Object.fromEntries(RESOURCE_TYPES.map((resource, i) => [resource, i + 1]));
    RESOURCE_TYPES.forEach((resource, i) => usage.set('acme', resource, i + 1));
    const t = throttler({ defaults }, usage);
    for (const resource of RESOURCE_TYPES) expect(t.hasResource('acme', resource)).toBe(false);
    RESOURCE_TYPES.forEach((resource, i) => usage.set('acme', resource, i));
    for (const resource of RESOURCE_TYPES) expect(t.hasResource('acme', resource)).toBe(true);
  });

  it('answers true for a resource name it does not know', () => {
    const t = throttler({ defaults: { TotalConnections: 1 } }, new Usage().set('acme', 'TotalConnections', 5));
    expect(t.hasResource('acme', 'TotalFutureThings' as ResourceType)).toBe(true);
  });

  it('states the quota hasResource compares with: own value over default, undefined when unlimited (0 or none)', () => {
    const usage = new Usage();
    const t = throttler(
      {
        defaults: { TotalConnections: 10, TotalConnectPerSecond: 5, TotalRetainTopics: 0 },
        tenants: { big: { TotalConnections: 1000 }, vip: { TotalConnections: 0 } },
      },
      usage,
    );
    expect(t.quota('big', 'TotalConnections')).toBe(1000);
    expect(t.quota('big', 'TotalConnectPerSecond')).toBe(5);
    expect(t.quota('acme', 'TotalConnections')).toBe(10);
    expect(t.quota('vip', 'TotalConnections')).toBeUndefined();
    expect(t.quota('acme', 'TotalRetainTopics')).toBeUndefined();
    expect(t.quota('acme', 'TotalSubscribePerSecond')).toBeUndefined();
    expect(t.quota('acme', 'TotalFutureThings' as ResourceType)).toBeUndefined();
    // The limit is the one hasResource applies: refused from usage = quota on.
    usage.set('acme', 'TotalConnections', 9);
    expect(t.hasResource('acme', 'TotalConnections')).toBe(true);
    usage.set('acme', 'TotalConnections', t.quota('acme', 'TotalConnections')!);
    expect(t.hasResource('acme', 'TotalConnections')).toBe(false);
    expect(usage.reads).toBe(2); // quota reads no usage
  });

  it('states no quota for any resource without options', () => {
    const t = throttler({}, new Usage());
    for (const resource of RESOURCE_TYPES) expect(t.quota('acme', resource)).toBeUndefined();
  });

  it('accepts any tenant id, including names of Object.prototype members', () => {
    const usage = new Usage().set('__proto__', 'TotalConnections', 1).set('constructor', 'TotalConnections', 1);
    const t = throttler({ tenants: { ['__proto__']: { TotalConnections: 1 }, constructor: { TotalConnections: 2 } } }, usage);
    expect(t.hasResource('__proto__', 'TotalConnections')).toBe(false);
    expect(t.hasResource('constructor', 'TotalConnections')).toBe(true);
    expect(t.hasResource('toString', 'TotalConnections')).toBe(true);
    expect(t.quota('__proto__', 'TotalConnections')).toBe(1);
    expect(t.quota('toString', 'TotalConnections')).toBeUndefined();
  });
});

describe('quota throttler options', () => {
  const withOptions = (options: Readonly<Record<string, unknown>>) => () => throttler(options, new Usage());

  it('rejects a quota that is not a non-negative integer, naming the option path', () => {
    expect(withOptions({ tenants: { acme: { TotalConnections: 'x' } } })).toThrow(
      'tenants.acme.TotalConnections: expected a non-negative integer, got "x"',
    );
    expect(withOptions({ defaults: { TotalConnections: -1 } })).toThrow(
      'defaults.TotalConnections: expected a non-negative integer, got -1',
    );
    expect(withOptions({ defaults: { TotalConnections: 1.5 } })).toThrow(
      'defaults.TotalConnections: expected a non-negative integer, got 1.5',
    );
    expect(withOptions({ defaults: { TotalConnections: NaN } })).toThrow(
      'defaults.TotalConnections: expected a non-negative integer, got NaN',
    );
    expect(withOptions({ defaults: { TotalConnections: Infinity } })).toThrow(
      'defaults.TotalConnections: expected a non-negative integer, got Infinity',
    );
    expect(withOptions({ defaults: { TotalConnections: null } })).toThrow(
      'defaults.TotalConnections: expected a non-negative integer, got null',
    );
    expect(withOptions({ defaults: { TotalConnections: '10' } })).toThrow(
      'defaults.TotalConnections: expected a non-negative integer, got "10"',
    );
  });

  it('rejects unknown resource names, naming the option path', () => {
    expect(withOptions({ tenants: { acme: { TotalConnection: 5 } } })).toThrow('tenants.acme.TotalConnection: unknown resource type');
    expect(withOptions({ defaults: { toString: 5 } })).toThrow('defaults.toString: unknown resource type');
  });

  it('rejects defaults, tenants or a tenant entry that is not an object', () => {
    expect(withOptions({ defaults: 5 })).toThrow('defaults: expected an object, got 5');
    expect(withOptions({ tenants: [] })).toThrow('tenants: expected an object, got []');
    expect(withOptions({ tenants: { acme: null } })).toThrow('tenants.acme: expected an object, got null');
  });

  it('rejects unknown options, naming them', () => {
    expect(withOptions({ default: { TotalConnections: 5 } })).toThrow('default: unknown option (expected defaults, tenants)');
  });

  it('returns the validated quotas', () => {
    expect(parseQuotaOptions({ defaults: { TotalConnections: 0 }, tenants: { acme: { TotalRetainTopics: 7 } } })).toEqual({
      defaults: { TotalConnections: 0 },
      tenants: { acme: { TotalRetainTopics: 7 } },
    });
  });
});
