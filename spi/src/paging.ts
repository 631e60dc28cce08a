/**
 * The separator of {@link sessionListKey}: U+0000, which MQTT forbids in client identifiers
 * ([MQTT-1.5.4-2]) and which tenant ids must not contain. Being the smallest code unit, it makes
 * the joined key sort exactly like the pair (tenantId, clientId).
 */
export const SESSION_LIST_KEY_SEPARATOR = '\u0000';

/**
 * The paging key of a session in a list across all tenants (a `PageRequest` without
 * `tenantId`): pass the key of the last record of a page as `after` to get the next page. Within
 * one tenant (`tenantId` given), `after` is the plain client id.
 *
 * @example
 * ```ts
 * let after: string | undefined;
 * for (;;) {
 *   const page = await storage.sessions.list({ after, limit: 100 });
 *   if (page.length === 0) break;
 *   const last = page[page.length - 1];
 *   after = sessionListKey(last.tenantId, last.clientId);
 * }
 * ```
 */
export function sessionListKey(tenantId: string, clientId: string): string {
  return tenantId + SESSION_LIST_KEY_SEPARATOR + clientId;
}
