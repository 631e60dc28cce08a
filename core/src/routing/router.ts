/**
 * The routing seam: every subscription change and every match of a published topic goes through
 * {@link Router}. Handlers, the session registry and the engine see only this interface; the
 * in-process implementation is `LocalRouter` (`local-router.ts`). In cluster mode `ClusterRouter`
 * (`cluster-router.ts`) wraps it behind the same members and announces the node's routes; the
 * other nodes' routes are matched by the cluster's forwarding after the local match
 * (docs/architecture.md § Routing seam, docs/cluster.md § Routes).
 */
import type { MatchSet } from './match-set';
import type { DistSubscription } from './shared-group';
import type { SubscribeLimits, SubscribeResult } from './tenant-dist';

/**
 * One route: a subscription of one client, with the filter as sent (including any
 * `$share/<group>/` or `$oshare/<group>/` prefix) and its options.
 */
export type Route<S> = DistSubscription<S>;

/**
 * Where messages published in a tenant go. Tenants never see each other's routes: the same client
 * id or filter in two tenants are unrelated. `S` is the subscriber handle (the session).
 *
 * The interface grows by addition: a new member gets a default in every implementation, and the
 * meaning of existing members does not change. Calls are synchronous and never allocate per
 * {@link Router.match} on a cached topic: `match` is on the PUBLISH path.
 *
 * @example
 * ```ts
 * const router: Router<Session> = new LocalRouter<Session>();
 * router.addRoute('acme', { subscriber: session, clientId: 'c1', filter: 'a/+', options }, { maxGroupMembers: 10 });
 * const set = router.match('acme', 'a/b'); // set.direct: c1 at its granted QoS
 * router.removeAll('acme', 'c1');
 * ```
 */
export interface Router<S> {
  /**
   * Adds a route, or replaces the one with the same client id and filter as sent
   * [MQTT-3.8.4-3] (a replaced shared member keeps its place in its group). The caller validates
   * the filter first (`checkSubscription`); a malformed share prefix or a misplaced wildcard is
   * refused here (`invalid-filter`), and so is a member beyond `limits.maxGroupMembers`
   * (`group-full`). A refused route leaves nothing behind, not even an empty tenant index.
   * Without `limits` (routes restored at boot) no group limit applies.
   */
  addRoute(tenantId: string, route: Route<S>, limits?: SubscribeLimits): SubscribeResult;

  /**
   * Removes the route with this client id and filter as sent (compared character by character
   * [MQTT-3.10.4-1]); false when there was none. The tenant's index is dropped when it becomes empty.
   */
  removeRoute(tenantId: string, clientId: string, filter: string): boolean;

  /**
   * Removes every route of one client (the end of its session); returns how many there were. The
   * tenant's index is dropped when it becomes empty.
   */
  removeAll(tenantId: string, clientId: string): number;

  /**
   * The local deliveries of a message published on `topic` (a valid topic name) in the tenant:
   * one aggregated `DirectMatch` per non-shared subscriber, and the shared groups whose filter
   * matches (the caller picks one member per group with `SharedGroupMatch.pick`). The set is frozen
   * and cached per topic until a route that can match it changes; an empty set when the tenant has
   * no routes (no index is created). No Local is applied by the caller (`DirectMatch.localAllowed`).
   */
  match(tenantId: string, topic: string): MatchSet<S>;

  /**
   * Drops the tenant's index when it holds no route; true when dropped. The members above already
   * do this; it is for callers that emptied a tenant by other means, and for tenant lifecycle
   * (a tenant removed by its operator).
   */
  dropIfEmpty(tenantId: string): boolean;

  /** Number of tenants holding at least one route. */
  readonly tenantCount: number;

  /** Ids of the tenants holding at least one route, in no particular order. */
  tenantIds(): IterableIterator<string>;

  /** The routes of one client in a tenant, in no particular order (an empty array when none). */
  routesOf(tenantId: string, clientId: string): Route<S>[];
}

export type { DirectMatch, MatchSet } from './match-set';
export type { SharedGroupMatch, SharedMember } from './shared-group';
export type { SubscribeLimits, SubscribeResult } from './tenant-dist';
