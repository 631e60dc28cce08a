import type { AuthProvider, AuthRequest, AuthResult } from '@bifro/spi';

export const DEV_ALLOW_ALL_AUTH = '@bifro/core:dev-allow-all-auth';

/** The tenant of clients whose username does not name one. */
export const DEFAULT_TENANT = 'default';

/**
 * Who a client is for the dev-only provider: username `tenant/user` → tenant `tenant`, user
 * `user`; anything else → tenant `default`, user = the username, or the client id without one.
 */
export function devIdentity(request: Pick<AuthRequest, 'username' | 'clientId'>): { tenantId: string; userId: string } {
  const username = request.username;
  if (username !== undefined) {
    const slash = username.indexOf('/');
    if (slash > 0 && slash < username.length - 1) return { tenantId: username.slice(0, slash), userId: username.slice(slash + 1) };
    if (username !== '') return { tenantId: DEFAULT_TENANT, userId: username };
  }
  return { tenantId: DEFAULT_TENANT, userId: request.clientId };
}

/** DEV ONLY: accepts every client, whatever its credentials. Loaded when no auth plugin is configured. */
export function createDevAllowAllAuth(): AuthProvider {
  return {
    authenticate(request: AuthRequest): AuthResult {
      const { tenantId, userId } = devIdentity(request);
      return { type: 'ok', tenantId, userId };
    },
  };
}
