/**
 * Subscription indexes of all tenants. Tenants never see each other's subscriptions: the same
 * client id or filter in two tenants are unrelated.
 */
import {
  emptyMatchSet,
  TenantDist,
  type DistSubscription,
  type MatchSet,
  type SubscribeLimits,
  type SubscribeResult,
  type TenantDistOptions,
} from './tenant-dist';

/**
 * One {@link TenantDist} per tenant, created on first use. The convenience methods drop a tenant's
 * index once its last subscription is gone; callers working on `tenant(id)` directly call
 * {@link Dist.dropIfEmpty} after removing subscriptions.
 *
 * @example
 * ```ts
 * const dist = new Dist<Session>();
 * dist.subscribe('acme', { subscriber, clientId: 'c1', filter: 'a/#', options });
 * const set = dist.match('acme', 'a/b');
 * ```
 */
export class Dist<S> {
  private readonly tenants = new Map<string, TenantDist<S>>();

  constructor(private readonly options: TenantDistOptions = {}) {}

  /** Number of tenants holding an index. */
  get tenantCount(): number {
    return this.tenants.size;
  }

  /** The tenant's index, created when missing. */
  tenant(tenantId: string): TenantDist<S> {
    let dist = this.tenants.get(tenantId);
    if (dist === undefined) {
      dist = new TenantDist<S>(this.options);
      this.tenants.set(tenantId, dist);
    }
    return dist;
  }

  /** The tenant's index, or undefined when it has none (does not create one). */
  peek(tenantId: string): TenantDist<S> | undefined {
    return this.tenants.get(tenantId);
  }

  /** Ids of tenants holding an index. */
  tenantIds(): IterableIterator<string> {
    return this.tenants.keys();
  }

  /** Drops the tenant's index when it holds no subscription; true when dropped. */
  dropIfEmpty(tenantId: string): boolean {
    const dist = this.tenants.get(tenantId);
    if (dist === undefined || !dist.isEmpty) return false;
    this.tenants.delete(tenantId);
    return true;
  }

  /** {@link TenantDist.subscribe} in a tenant. A refused first subscription leaves no empty index behind. */
  subscribe(tenantId: string, sub: DistSubscription<S>, limits?: SubscribeLimits): SubscribeResult {
    const result = this.tenant(tenantId).subscribe(sub, limits);
    if (result.rejected !== undefined) this.dropIfEmpty(tenantId);
    return result;
  }

  /** {@link TenantDist.unsubscribe} in a tenant; drops the tenant's index when it becomes empty. */
  unsubscribe(tenantId: string, clientId: string, filter: string): boolean {
    const dist = this.tenants.get(tenantId);
    if (dist === undefined) return false;
    const removed = dist.unsubscribe(clientId, filter);
    this.dropIfEmpty(tenantId);
    return removed;
  }

  /** {@link TenantDist.unsubscribeAll} in a tenant; drops the tenant's index when it becomes empty. */
  unsubscribeAll(tenantId: string, clientId: string): number {
    const dist = this.tenants.get(tenantId);
    if (dist === undefined) return 0;
    const removed = dist.unsubscribeAll(clientId);
    this.dropIfEmpty(tenantId);
    return removed;
  }

  /** {@link TenantDist.match} in a tenant; an empty set (without creating an index) when it has none. */
  match(tenantId: string, topic: string): MatchSet<S> {
    const dist = this.tenants.get(tenantId);
    return dist === undefined ? emptyMatchSet<S>() : dist.match(topic);
  }
}
