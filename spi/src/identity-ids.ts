/**
 * What a tenant id and a user id may be (docs/tenancy.md § Tenant ids). The broker checks every
 * identity an auth plugin answers with these, once, in core: a plugin that names a tenant no route
 * can address, or a user id holding a separator, is refused like any invalid answer. Plugins and
 * tools that create identities (`bifro token create --tenant`, a password file) use them too.
 */

/** Longest tenant id: it is a path segment of the admin API, a storage key prefix and a NATS subject token. */
export const MAX_TENANT_ID_LENGTH = 64;
/** Longest user id (characters). */
export const MAX_USER_ID_LENGTH = 256;

/** Letters, digits, `_`, `-` and `.` (not first): one URL path segment, one file name, no separator of any store. */
const TENANT_ID = /^[A-Za-z0-9_-][A-Za-z0-9._-]*$/;
/** U+0000 separates tenant and key in storage; other control characters have no place in an id either. */
// eslint-disable-next-line no-control-regex
const CONTROL = /[\u0000-\u001f\u007f]/;

/** Why `id` cannot be a tenant id, or undefined when it can. */
export function tenantIdProblem(id: string): string | undefined {
  if (id.length === 0) return 'a tenant id is empty';
  if (id.length > MAX_TENANT_ID_LENGTH) return `a tenant id is longer than ${MAX_TENANT_ID_LENGTH} characters`;
  if (!TENANT_ID.test(id)) return 'a tenant id holds only letters, digits, "_", "-" and "." (not first)';
  return undefined;
}

/** Why `id` cannot be a user id, or undefined when it can. */
export function userIdProblem(id: string): string | undefined {
  if (id.length > MAX_USER_ID_LENGTH) return `a user id is longer than ${MAX_USER_ID_LENGTH} characters`;
  if (CONTROL.test(id)) return 'a user id holds a control character (U+0000-U+001F, U+007F)';
  return undefined;
}
