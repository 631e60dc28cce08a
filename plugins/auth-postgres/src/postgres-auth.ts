import { ACL_RULES_ATTR, aclRulesAttr, type AuthProvider, type AuthRequest, type AuthResult, type PluginLogger } from '@bifro/spi';
import { Database } from './database';
import { AuthPostgresError, describeError, PLUGIN_NAME } from './errors';
import { FailureLog } from './failure-log';
import type { AuthPostgresOptions } from './options';
import { dummyHash, verifyPassword, type PasswordHash } from './password-hash';
import { rulesFromRows, userFromRows, type UserRecord } from './rows';
import { TtlCache, type Clock } from './ttl-cache';

/** What the database says about one login (cached for `cache.ttlMs`). */
export type Lookup =
  | { readonly found: false }
  | {
      readonly found: true;
      readonly user: UserRecord;
      /** `attrs[ACL_RULES_ATTR]`: the rules of aclQuery as JSON; undefined when aclQuery is off. */
      readonly aclAttr: string | undefined;
    };

const DEFER: AuthResult = { type: 'defer' };
const BAD_CREDENTIALS: AuthResult = { type: 'reject', reason: 'badCredentials', text: 'bad user name or password' };
const NOT_FOUND: Lookup = { found: false };
/** Logins (user name, plus the client id when a query uses it) longer than this are looked up every time. */
export const MAX_CACHED_KEY_LENGTH = 1024;

/** Test seams: the clock of the cache and of the log's rate limit. */
export interface PostgresAuthDeps {
  readonly now?: Clock;
}

/**
 * Authenticates CONNECTs against PostgreSQL (see the README): the auth query finds the user's
 * row (tenant, password hash, attrs), the ACL query its rules, which travel to the ACL kind in
 * `attrs[ACL_RULES_ATTR]`. Lookups are cached for `cache.ttlMs` and shared by concurrent CONNECTs
 * of the same login; the password is checked on every CONNECT (the hash, not the verdict, is
 * cached). When the database cannot answer, `authenticate` throws a coded error: the broker refuses
 * the client with the `error` outcome (v5 0x80, v3 3), logs it and reports `pluginCallFailed`.
 */
export class PostgresAuthProvider implements AuthProvider {
  private readonly db: Database;
  private readonly cache: TtlCache<string, Lookup>;
  private readonly inflight = new Map<string, Promise<Lookup>>();
  private readonly failures: FailureLog;
  private readonly keyUsesClientId: boolean;
  /** Checked for logins without a usable row: the parameters of the last real hash checked (see {@link dummyHash}). */
  private dummy: PasswordHash = dummyHash();
  private dummySource: PasswordHash | undefined;

  constructor(
    private readonly options: AuthPostgresOptions,
    private readonly logger: PluginLogger,
    deps: PostgresAuthDeps = {},
  ) {
    const now = deps.now ?? Date.now;
    this.cache = new TtlCache(options.cache.ttlMs, options.cache.maxEntries, now);
    this.failures = new FailureLog(logger, options.target, now);
    this.db = new Database(options, (err) => this.failures.idleConnectionFailed(err));
    this.keyUsesClientId = options.authQuery.uses('clientId') || (options.aclQuery?.uses('clientId') ?? false);
  }

  /** Checks the database answers; a database that does not is logged, not fatal (clients are refused until it answers). */
  async init(): Promise<void> {
    try {
      await this.db.ping();
      this.logger.info(`${PLUGIN_NAME}: connected to ${this.options.target}`, {
        target: this.options.target,
        cacheTtlMs: this.options.cache.ttlMs,
        acl: this.options.aclQuery !== undefined,
      });
    } catch (err) {
      const error = err instanceof AuthPostgresError ? err : new AuthPostgresError('BIFRO_AUTH_POSTGRES_UNAVAILABLE', describeError(err));
      this.failures.failed(error);
    }
  }

  async authenticate(request: AuthRequest): Promise<AuthResult> {
    const username = request.username;
    if (username === undefined) return DEFER;
    // PostgreSQL text cannot hold U+0000: no row can match such a login.
    const lookup =
      username.includes('\u0000') || request.clientId.includes('\u0000') ? NOT_FOUND : await this.lookup(username, request.clientId);
    const password = request.password ?? new Uint8Array();
    // A login without a usable row costs the same KDF as a wrong password, deferred or rejected alike.
    if (!lookup.found) {
      await verifyPassword(password, this.dummy);
      return this.options.unknownUser === 'defer' ? DEFER : BAD_CREDENTIALS;
    }
    const { user } = lookup;
    if (user.hash === null) {
      await verifyPassword(password, this.dummy);
      return BAD_CREDENTIALS;
    }
    if (user.hash !== this.dummySource) {
      this.dummySource = user.hash;
      this.dummy = dummyHash(user.hash);
    }
    const matches = await verifyPassword(password, user.hash);
    if (!matches) return BAD_CREDENTIALS;
    const attrs = lookup.aclAttr === undefined ? user.attrs : { ...user.attrs, [ACL_RULES_ATTR]: lookup.aclAttr };
    return { type: 'ok', tenantId: user.tenantId, userId: user.userId, attrs };
  }

  async close(): Promise<void> {
    this.cache.clear();
    await this.db.close();
  }

  /** The cached lookup of a login, or one query round trip shared by concurrent CONNECTs. */
  private lookup(username: string, clientId: string): Promise<Lookup> | Lookup {
    const key = this.keyUsesClientId ? `${username}\u0000${clientId}` : username;
    const cached = this.cache.get(key);
    if (cached !== undefined) return cached;
    const pending = this.inflight.get(key);
    if (pending !== undefined) return pending;
    const fetch = this.fetch(username, clientId).then(
      (lookup) => {
        this.inflight.delete(key);
        // Long keys are not kept: 10,000 entries of 64 KiB user names would be a memory attack.
        if (key.length <= MAX_CACHED_KEY_LENGTH) this.cache.set(key, lookup);
        this.failures.succeeded();
        return lookup;
      },
      (err: unknown) => {
        this.inflight.delete(key);
        const error =
          err instanceof AuthPostgresError
            ? err
            : new AuthPostgresError('BIFRO_AUTH_POSTGRES_UNAVAILABLE', `lookup failed: ${describeError(err)}`, { cause: err });
        if (error.code !== 'BIFRO_AUTH_POSTGRES_UNAVAILABLE') this.failures.succeeded();
        this.failures.failed(error);
        throw error;
      },
    );
    this.inflight.set(key, fetch);
    return fetch;
  }

  private fetch(username: string, clientId: string): Promise<Lookup> {
    const { authQuery, aclQuery, passwordHash } = this.options;
    return this.db.session(async (query) => {
      const user = userFromRows(await query(authQuery, { username, clientId }), username, passwordHash);
      if (user === undefined) return NOT_FOUND;
      if (aclQuery === undefined) return { found: true, user, aclAttr: undefined };
      const rows = await query(aclQuery, { username, clientId, tenant: user.tenantId, userId: user.userId });
      return { found: true, user, aclAttr: aclRulesAttr(rulesFromRows(rows, username)) };
    });
  }
}
