import { RESOURCE_TYPES, type ResourceThrottler, type ResourceType, type TenantUsageReader } from '@bifro/spi';
import type { QuotaOptions, Quotas } from './options';

/** Position of each resource type in a limits array. */
const RESOURCE_INDEX: ReadonlyMap<string, number> = new Map(RESOURCE_TYPES.map((resource, index) => [resource, index]));

/**
 * A {@link ResourceThrottler} with fixed quotas: a tenant has a resource while its usage, as read
 * from the broker's {@link TenantUsageReader}, is below its quota. The quota of a resource is the
 * tenant's own value, else the default; 0 or none means unlimited.
 *
 * The limits of every configured tenant (own values merged over the defaults) are worked out once
 * at creation, so `hasResource` is two map lookups, an array read and at most one usage read,
 * without allocating.
 *
 * @example
 * ```ts
 * const throttler = new QuotaThrottler(ctx.tenantUsage, parseQuotaOptions(ctx.options));
 * throttler.hasResource('acme', 'TotalConnections');
 * ```
 */
export class QuotaThrottler implements ResourceThrottler {
  private readonly defaultLimits: Float64Array;
  private readonly tenantLimits = new Map<string, Float64Array>();

  constructor(
    private readonly usage: TenantUsageReader,
    options: QuotaOptions,
  ) {
    this.defaultLimits = limitsOf(options.defaults);
    for (const [tenantId, quotas] of Object.entries(options.tenants)) {
      this.tenantLimits.set(tenantId, limitsOf({ ...options.defaults, ...quotas }));
    }
  }

  /** `true` while the tenant's usage of the resource is below its quota, or when it has none. */
  hasResource(tenantId: string, resource: ResourceType): boolean {
    const index = RESOURCE_INDEX.get(resource);
    if (index === undefined) return true; // a resource this plugin does not know: no quota
    const limit = (this.tenantLimits.get(tenantId) ?? this.defaultLimits)[index];
    return limit === Infinity || this.usage.get(tenantId, resource) < limit;
  }

  /** The quota `hasResource` compares with (SPI 1.5.0, for the admin API); `undefined` when unlimited. */
  quota(tenantId: string, resource: ResourceType): number | undefined {
    const limit = this.quotaOf(tenantId, resource);
    return limit === Infinity ? undefined : limit;
  }

  /** The quota of a resource for a tenant, `Infinity` when unlimited (for logs and tests). */
  quotaOf(tenantId: string, resource: ResourceType): number {
    const index = RESOURCE_INDEX.get(resource);
    return index === undefined ? Infinity : (this.tenantLimits.get(tenantId) ?? this.defaultLimits)[index];
  }
}

/** One limit per resource type, in {@link RESOURCE_TYPES} order; `Infinity` for unlimited (0 or absent). */
function limitsOf(quotas: Quotas): Float64Array {
  const limits = new Float64Array(RESOURCE_TYPES.length).fill(Infinity);
  RESOURCE_TYPES.forEach((resource, index) => {
    const quota = quotas[resource];
    if (quota !== undefined && quota > 0) limits[index] = quota;
  });
  return limits;
}
