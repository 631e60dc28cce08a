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
}
