import { definePlugin } from '@bifro/spi';
import { AUTH_POSTGRES_ERRORS } from './errors';
import { parseAclOptions, parseAuthOptions } from './options';
import { PostgresAcl } from './postgres-acl';
import { PostgresAuthProvider } from './postgres-auth';

export { AUTH_POSTGRES_ERRORS, AuthPostgresError, PLUGIN_NAME, type AuthPostgresErrorCode } from './errors';
export { DEFAULT_ACL_QUERY, DEFAULT_AUTH_QUERY, DEFAULTS, maskConnectionString, parseAclOptions, parseAuthOptions } from './options';
export type { AclPostgresOptions, AuthPostgresOptions, SslOptions } from './options';
export { HASH_FORMATS, hashPassword, parsePasswordHash, verifyPassword, type HashFormat, type PasswordHash } from './password-hash';
export { compileQuery, PLACEHOLDERS, type CompiledQuery, type Placeholder } from './query-template';
export { rulesFromRows, userFromRows, type QueryRows, type UserRecord } from './rows';
export { TtlCache } from './ttl-cache';
export { PostgresAuthProvider } from './postgres-auth';
export { PostgresAcl } from './postgres-acl';

/**
 * `@bifro/plugin-auth-postgres`: credentials and ACL rules from PostgreSQL (README.md).
 * - `auth`: `authQuery` finds the user (tenant, password hash, attrs), `aclQuery` its rules; a
 *   `pg` pool, a short TTL cache, fail closed when the database cannot answer.
 * - `acl`: answers from the rules the auth kind attached to the client, from memory.
 */
export default definePlugin({
  auth: (ctx) => new PostgresAuthProvider(parseAuthOptions(ctx.options, ctx.configDir), ctx.logger),
  acl: (ctx) => new PostgresAcl(parseAclOptions(ctx.options)),
  errors: AUTH_POSTGRES_ERRORS,
});
