import type { ClientInfo, Lifecycle, MaybePromise, QoS } from './common';

/** What a client wants to do. */
export type AccessAction =
  | { readonly type: 'connect' }
  | { readonly type: 'publish'; readonly topic: string; readonly qos: QoS; readonly retain: boolean }
  | { readonly type: 'subscribe'; readonly filter: string; readonly qos: QoS }
  | { readonly type: 'unsubscribe'; readonly filter: string };

/**
 * The answer of one access control plugin.
 * - `granted` / `denied`: decides.
 * - `defer`: ask the next plugin of the chain; when all defer, the action is denied.
 * - `error`: the plugin could not decide; the tenant setting `ByPassPermCheckError` decides.
 */
export type AccessDecision = 'granted' | 'denied' | 'defer' | 'error';

/**
 * Checks every connect, publish, subscribe and unsubscribe. Called on the hot path: answer
 * synchronously from memory where possible; the broker caches nothing on the plugin's behalf.
 *
 * @example
 * ```ts
 * const acl: AccessControl = {
 *   checkPermission(client, action) {
 *     if (action.type === 'publish' && action.topic.startsWith('sys/')) return 'denied';
 *     return 'defer';
 *   },
 * };
 * ```
 */
export interface AccessControl extends Lifecycle {
  checkPermission(client: ClientInfo, action: AccessAction): MaybePromise<AccessDecision>;
}
