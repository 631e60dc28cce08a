/**
 * The {@link Router} of a cluster node: the in-process router, plus the count of local
 * subscribers per (tenant, filter) that the node announces to the others as its routes
 * (docs/cluster.md § Routes). Shared subscriptions (`$share/`, `$oshare/`) and `$SYS` stay node-local.
 */
import type { LocalRoutes } from '../cluster/cluster-view';
import type { MatchSet } from './match-set';
import type { Route, Router } from './router';
import type { SubscribeLimits, SubscribeResult } from './tenant-dist';

/** Filters served by this node alone: shared subscriptions, and `$SYS` (each node publishes its own). */
function isNodeLocal(filter: string): boolean {
  return filter.startsWith('$share/') || filter.startsWith('$oshare/') || filter === '$SYS' || filter.startsWith('$SYS/');
}

type Listener = (tenantId: string, filter: string, added: boolean) => void;

/** Wraps a router; every member behaves as the wrapped one's, the counting is on the side. */
export class ClusterRouter<S> implements Router<S>, LocalRoutes {
  /** tenant → filter → local subscribers (non-shared routes). */
  private readonly counts = new Map<string, Map<string, number>>();
  private listener: Listener | undefined;

  constructor(private readonly inner: Router<S>) {}

  current(): Iterable<readonly [string, string]> {
    const out: [string, string][] = [];
    for (const [tenant, filters] of this.counts) for (const filter of filters.keys()) out.push([tenant, filter]);
    return out;
  }

  listen(onChange: Listener): void {
    this.listener = onChange;
  }

  get tenantCount(): number {
    return this.inner.tenantCount;
  }

  addRoute(tenantId: string, route: Route<S>, limits?: SubscribeLimits): SubscribeResult {
    const result = this.inner.addRoute(tenantId, route, limits);
    if (result.rejected === undefined && !result.replaced && !isNodeLocal(route.filter)) this.count(tenantId, route.filter, 1);
    return result;
  }

  removeRoute(tenantId: string, clientId: string, filter: string): boolean {
    const removed = this.inner.removeRoute(tenantId, clientId, filter);
    if (removed && !isNodeLocal(filter)) this.count(tenantId, filter, -1);
    return removed;
  }

  removeAll(tenantId: string, clientId: string): number {
    const routes = this.inner.routesOf(tenantId, clientId);
    const removed = this.inner.removeAll(tenantId, clientId);
    for (const r of routes) if (!isNodeLocal(r.filter)) this.count(tenantId, r.filter, -1);
    return removed;
  }

  match(tenantId: string, topic: string): MatchSet<S> {
    return this.inner.match(tenantId, topic);
  }

  dropIfEmpty(tenantId: string): boolean {
    return this.inner.dropIfEmpty(tenantId);
  }

  tenantIds(): IterableIterator<string> {
    return this.inner.tenantIds();
  }

  routesOf(tenantId: string, clientId: string): Route<S>[] {
    return this.inner.routesOf(tenantId, clientId);
  }

  private count(tenantId: string, filter: string, delta: 1 | -1): void {
    let filters = this.counts.get(tenantId);
    if (filters === undefined) {
      if (delta < 0) return;
      this.counts.set(tenantId, (filters = new Map()));
    }
    const n = (filters.get(filter) ?? 0) + delta;
    if (n > 0) filters.set(filter, n);
    else {
      filters.delete(filter);
      if (filters.size === 0) this.counts.delete(tenantId);
    }
    if (n === 1 && delta > 0) this.listener?.(tenantId, filter, true);
    else if (n === 0) this.listener?.(tenantId, filter, false);
  }
}
