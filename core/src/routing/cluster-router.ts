/**
 * The {@link Router} of a cluster node: the in-process router, plus the count of local
 * subscribers per (tenant, filter) that the node announces to the others as its routes
 * (docs/cluster.md § Routes), and of local members per shared group (§ Shared subscriptions).
 * `$SYS` stays node-local.
 */
import type { MatchSet } from './match-set';
import type { Route, Router } from './router';
import type { SubscribeLimits, SubscribeResult } from './tenant-dist';
import { isSharedFilter, parseSubscription } from './topic';

function isSys(topicFilter: string): boolean {
  return topicFilter === '$SYS' || topicFilter.startsWith('$SYS/');
}

/** How a filter is announced: `$SYS` not at all (each node publishes its own), shared groups with their member count. */
function kindOf(filter: string): 'local' | 'shared' | 'route' {
  if (!isSharedFilter(filter)) return isSys(filter) ? 'local' : 'route';
  const parsed = parseSubscription(filter);
  return parsed.shareKind === 'malformed' || isSys(parsed.topicFilter) ? 'local' : 'shared';
}

type Listener = (tenantId: string, filter: string, members: number) => void;

/**
 * This node's (tenant, filter) pairs with local subscribers, and their changes (the cluster router).
 * A shared filter (`$share/<group>/<filter>`, `$oshare/...`, as sent) counts its local members; a
 * non-shared one is 1 while it has local subscribers.
 */
export interface LocalRoutes {
  /** Every pair now, with its count. */
  current(): Iterable<readonly [tenantId: string, filter: string, members: number]>;
  /** Called at a non-shared pair's first subscriber (1) and after its last (0), and at every member count change of a shared one (0: none left). */
  listen(onChange: (tenantId: string, filter: string, members: number) => void): void;
}

/** Wraps a router; every member behaves as the wrapped one's, the counting is on the side. */
export class ClusterRouter<S> implements Router<S>, LocalRoutes {
  /** tenant → filter → local subscribers (non-shared routes). */
  private readonly counts = new Map<string, Map<string, number>>();
  /** tenant → shared filter as sent → local members. */
  private readonly members = new Map<string, Map<string, number>>();
  private listener: Listener | undefined;

  constructor(private readonly inner: Router<S>) {}

  current(): Iterable<readonly [string, string, number]> {
    const out: [string, string, number][] = [];
    for (const [tenant, filters] of this.counts) for (const filter of filters.keys()) out.push([tenant, filter, 1]);
    for (const [tenant, filters] of this.members) for (const [filter, n] of filters) out.push([tenant, filter, n]);
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
    if (result.rejected === undefined && !result.replaced) this.count(tenantId, route.filter, 1);
    return result;
  }

  removeRoute(tenantId: string, clientId: string, filter: string): boolean {
    const removed = this.inner.removeRoute(tenantId, clientId, filter);
    if (removed) this.count(tenantId, filter, -1);
    return removed;
  }

  removeAll(tenantId: string, clientId: string): number {
    const routes = this.inner.routesOf(tenantId, clientId);
    const removed = this.inner.removeAll(tenantId, clientId);
    for (const r of routes) this.count(tenantId, r.filter, -1);
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
    const kind = kindOf(filter);
    if (kind === 'local') return;
    const all = kind === 'shared' ? this.members : this.counts;
    let filters = all.get(tenantId);
    if (filters === undefined) {
      if (delta < 0) return;
      all.set(tenantId, (filters = new Map()));
    }
    const n = (filters.get(filter) ?? 0) + delta;
    if (n > 0) filters.set(filter, n);
    else {
      filters.delete(filter);
      if (filters.size === 0) all.delete(tenantId);
    }
    // A shared group's record carries its member count (the other nodes weigh by it); a route only exists or not.
    if (kind === 'shared') this.listener?.(tenantId, filter, n);
    else if (n === 1 && delta > 0) this.listener?.(tenantId, filter, 1);
    else if (n === 0) this.listener?.(tenantId, filter, 0);
  }
}
