import { RESOURCE_TYPES, type ResourceType, type TenantUsageReader } from '@bifro/spi';

const RESOURCE_INDEX = new Map<ResourceType, number>(RESOURCE_TYPES.map((r, i) => [r, i]));

/**
 * Live usage per tenant: gauges (connections, subscriptions...) and one-second rate windows
 * (connects per second, inbound bytes per second...). One Float64Array per tenant, indexed by
 * resource, so updates on hot paths are an array write.
 */
export class TenantUsage implements TenantUsageReader {
  private readonly tenants = new Map<string, Float64Array>();
  private readonly rateWindowStart = new Map<string, Float64Array>();

  get(tenantId: string, resource: ResourceType): number {
    const values = this.tenants.get(tenantId);
    if (values === undefined) return 0;
    const i = RESOURCE_INDEX.get(resource)!;
    if (resource.endsWith('PerSecond')) {
      const start = this.rateWindowStart.get(tenantId)![i];
      if (Date.now() - start >= 1000) return 0;
    }
    return values[i];
  }

  /** Add `delta` to a gauge. */
  add(tenantId: string, resource: ResourceType, delta: number): void {
    this.values(tenantId)[RESOURCE_INDEX.get(resource)!] += delta;
  }

  /** Set a gauge (e.g. from totals a store reports). */
  set(tenantId: string, resource: ResourceType, value: number): void {
    this.values(tenantId)[RESOURCE_INDEX.get(resource)!] = value;
  }

  /** Count `amount` into the current one-second window of a rate. */
  count(tenantId: string, resource: ResourceType, amount: number, now: number): void {
    const values = this.values(tenantId);
    const starts = this.rateWindowStart.get(tenantId)!;
    const i = RESOURCE_INDEX.get(resource)!;
    if (now - starts[i] >= 1000) {
      starts[i] = now;
      values[i] = 0;
    }
    values[i] += amount;
  }

  /** Tenants with any recorded usage. */
  tenantIds(): IterableIterator<string> {
    return this.tenants.keys();
  }

  private values(tenantId: string): Float64Array {
    let values = this.tenants.get(tenantId);
    if (values === undefined) {
      values = new Float64Array(RESOURCE_TYPES.length);
      this.tenants.set(tenantId, values);
      this.rateWindowStart.set(tenantId, new Float64Array(RESOURCE_TYPES.length));
    }
    return values;
  }
}
