/**
 * The in-process {@link Router}: the subscription indexes of all tenants on this node. Tenants
 * never see each other's subscriptions: the same client id or filter in two tenants are unrelated.
 */
import type { MatchSet } from './match-set';
import type { Route, Router } from './router';
import { emptyMatchSet, TenantDist, type SubscribeLimits, type SubscribeResult, type TenantDistOptions } from './tenant-dist';

/**
 * One {@link TenantDist} per tenant, created on first use and dropped once its last route is gone.
 * The default {@link Router}. `tenant(id)` and `peek(id)` reach one tenant's index directly
 * (statistics, tests); callers that remove routes there call {@link LocalRouter.dropIfEmpty} after.
 *
 * @example
 * ```ts
 * const router: Router<Session> = new LocalRouter<Session>();
 * router.addRoute('acme', { subscriber, clientId: 'c1', filter: 'a/#', options });
 * const set = router.match('acme', 'a/b');
 * ```
 */
export class LocalRouter<S> implements Router<S> {
  private readonly tenants = new Map<string, TenantDist<S>>();

  constructor(private readonly options: TenantDistOptions = {}) {}

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

  tenantIds(): IterableIterator<string> {
    return this.tenants.keys();
  }

  dropIfEmpty(tenantId: string): boolean {
    const dist = this.tenants.get(tenantId);
    if (dist === undefined || !dist.isEmpty) return false;
    this.tenants.delete(tenantId);
    return true;
  }

  /** {@link TenantDist.subscribe} in a tenant. A refused first route leaves no empty index behind. */
  addRoute(tenantId: string, route: Route<S>, limits?: SubscribeLimits): SubscribeResult {
    const result = this.tenant(tenantId).subscribe(route, limits);
    if (result.rejected !== undefined) this.dropIfEmpty(tenantId);
    return result;
  }

  /** {@link TenantDist.unsubscribe} in a tenant; drops the tenant's index when it becomes empty. */
  removeRoute(tenantId: string, clientId: string, filter: string): boolean {
    const dist = this.tenants.get(tenantId);
    if (dist === undefined) return false;
    const removed = dist.unsubscribe(clientId, filter);
    this.dropIfEmpty(tenantId);
    return removed;
  }

  /** {@link TenantDist.unsubscribeAll} in a tenant; drops the tenant's index when it becomes empty. */
  removeAll(tenantId: string, clientId: string): number {
    const dist = this.tenants.get(tenantId);
    if (dist === undefined) return 0;
    const removed = dist.unsubscribeAll(clientId);
    this.dropIfEmpty(tenantId);
    return removed;
  }

  /** {@link TenantDist.match} in a tenant (cached per topic); an empty set, without creating an index, when it has none. */
  match(tenantId: string, topic: string): MatchSet<S> {
    const dist = this.tenants.get(tenantId);
    return dist === undefined ? emptyMatchSet<S>() : dist.match(topic);
  }

  routesOf(tenantId: string, clientId: string): Route<S>[] {
    return this.tenants.get(tenantId)?.subscriptionsOf(clientId) ?? [];
  }
}
