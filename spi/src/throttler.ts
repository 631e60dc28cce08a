import type { Lifecycle } from './common';

/** Per-tenant resources the broker asks the throttler about (docs/tenancy.md § Usage and quotas). */
export const RESOURCE_TYPES = [
  'TotalConnections',
  'TotalSessionMemoryBytes',
  'TotalConnectPerSecond',
  'TotalPersistentSessions',
  'TotalPersistentSessionSpaceBytes',
  'TotalSharedSubscriptions',
  'TotalTransientSubscriptions',
  'TotalPersistentSubscriptions',
  'TotalSubscribePerSecond',
  'TotalUnsubscribePerSecond',
  'TotalInboundBytesPerSecond',
  'TotalOutboundBytesPerSecond',
  'TotalRetainedBytes',
  'TotalRetainTopics',
  'TotalRetainMessagesPerSecond',
  'TotalRetainBytesPerSecond',
  'TotalRetainMatchPerSecond',
] as const;

export type ResourceType = (typeof RESOURCE_TYPES)[number];

/**
 * Says whether a tenant still has a resource. Called on hot paths: it must be synchronous and
 * fast. The broker fails open: a throw counts as `true`.
 * Outcomes: connections refused with CONNACK 0x97 (v3 0x03), subscriptions with SUBACK 0x97
 * (v3 0x80), inbound bytes slow the reading of the socket, retained writes are ignored while the
 * message itself is still delivered.
 *
 * @example
 * ```ts
 * const throttler = (ctx: PluginContext): ResourceThrottler => ({
 *   hasResource: (tenantId, resource) =>
 *     resource !== 'TotalConnections' || ctx.tenantUsage.get(tenantId, resource) < 1000,
 * });
 * ```
 */
export interface ResourceThrottler extends Lifecycle {
  hasResource(tenantId: string, resource: ResourceType): boolean;
  /**
   * The limit `hasResource` compares the tenant's usage of `resource` with, for display only (the
   * admin API's tenant figures, the dashboard's usage bars); `undefined` when the tenant is
   * unlimited for it or the plugin cannot tell (SPI 1.5.0, optional). Synchronous and cheap; never
   * called on a hot path, and never asked instead of `hasResource`. The broker takes `undefined`
   * for a throw, or an answer that is not a finite non-negative number; 0 means unlimited.
   *
   * @example
   * ```ts
   * const LIMIT = 1000;
   * const throttler = (ctx: PluginContext): ResourceThrottler => ({
   *   hasResource: (tenantId, resource) =>
   *     resource !== 'TotalConnections' || ctx.tenantUsage.get(tenantId, resource) < LIMIT,
   *   quota: (_tenantId, resource) => (resource === 'TotalConnections' ? LIMIT : undefined),
   * });
   * ```
   */
  quota?(tenantId: string, resource: ResourceType): number | undefined;
}
