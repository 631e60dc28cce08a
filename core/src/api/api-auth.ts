import { createHash } from 'node:crypto';
import type { FastifyRequest } from 'fastify';
import type { ApiTokenConfig } from '../base/config-types';
import { ApiError } from './api-errors';

/** Who made a request: the configured token it carried. */
export interface ApiPrincipal {
  readonly name: string;
  /** Set for a tenant token: it sees and touches only this tenant. */
  readonly tenant?: string;
}

declare module 'fastify' {
  interface FastifyRequest {
    /** The token of the request, undefined when it carried none or a wrong one. */
    principal: ApiPrincipal | undefined;
  }
  interface FastifyContextConfig {
    /** Served without a token (health, readiness, the OpenAPI document). */
    public?: boolean;
  }
}

/** The `hash` of a token as `api.tokens` holds it: `sha256:` and the hex SHA-256 of its UTF-8 bytes. */
export function tokenHash(token: string): string {
  return `sha256:${createHash('sha256').update(token, 'utf8').digest('hex')}`;
}

/**
 * The configured tokens by hash. A presented token is hashed and looked up: the config holds no
 * token, only hashes, and the lookup compares hashes, so its timing tells nothing about a token.
 */
export class TokenTable {
  private readonly byHash = new Map<string, ApiPrincipal>();

  constructor(tokens: readonly ApiTokenConfig[]) {
    for (const t of tokens) this.byHash.set(t.hash, t.tenant === undefined ? { name: t.name } : { name: t.name, tenant: t.tenant });
  }

  /** The principal of an `Authorization` header value, undefined when it is not a configured bearer token. */
  resolve(header: string | undefined): ApiPrincipal | undefined {
    if (header === undefined) return undefined;
    const match = /^Bearer\s+(\S+)\s*$/i.exec(header);
    if (match === null) return undefined;
    return this.byHash.get(tokenHash(match[1]!));
  }
}

/** The principal of an authenticated route (the auth hook ran before the handler). */
export function principalOf(request: FastifyRequest): ApiPrincipal {
  const p = request.principal;
  if (p === undefined) throw new ApiError('BIFRO_API_UNAUTHORIZED', 'a bearer token is required');
  return p;
}

/** Throws 403 unless the request's token may act on `tenant` (an admin token, or that tenant's token). */
export function requireTenant(request: FastifyRequest, tenant: string): ApiPrincipal {
  const p = principalOf(request);
  if (p.tenant !== undefined && p.tenant !== tenant)
    throw new ApiError('BIFRO_API_FORBIDDEN', `token "${p.name}" is scoped to tenant "${p.tenant}" and may not act on tenant "${tenant}"`);
  return p;
}

/** Throws 403 unless the request's token is an admin token (no tenant). */
export function requireAdmin(request: FastifyRequest): ApiPrincipal {
  const p = principalOf(request);
  if (p.tenant !== undefined)
    throw new ApiError('BIFRO_API_FORBIDDEN', `token "${p.name}" is scoped to tenant "${p.tenant}"; this resource needs an admin token`);
  return p;
}
