import * as fs from 'node:fs';
import * as path from 'node:path';
import { optionsError } from './errors';
import { HASH_FORMATS, type HashFormat } from './password-hash';
import { compileQuery, type CompiledQuery } from './query-template';

/** Default of `authQuery`: one row per user name. */
export const DEFAULT_AUTH_QUERY = 'SELECT tenant, password_hash, attrs FROM mqtt_users WHERE username = ${username}';
/** Default of `aclQuery`: the user's rules, in order (the first rule that matches decides). */
export const DEFAULT_ACL_QUERY = 'SELECT permission, action, topic FROM mqtt_acls WHERE username = ${username} ORDER BY priority, id';

export const DEFAULTS = {
  poolMax: 10,
  idleTimeoutMs: 10_000,
  connectionTimeoutMs: 2_000,
  queryTimeoutMs: 1_000,
  cacheTtlMs: 5_000,
  cacheMaxEntries: 10_000,
} as const;

/** TLS settings handed to `pg` (the contents of files already read). */
export interface SslOptions {
  readonly rejectUnauthorized: boolean;
  readonly ca?: string;
  readonly cert?: string;
  readonly key?: string;
  readonly servername?: string;
}

/** Options of the auth kind, after defaults and checks. */
export interface AuthPostgresOptions {
  readonly connectionString: string;
  /** The connection string with its password masked, for messages. */
  readonly target: string;
  readonly authQuery: CompiledQuery;
  /** Undefined when `aclQuery: false`. */
  readonly aclQuery: CompiledQuery | undefined;
  readonly passwordHash: readonly HashFormat[];
  readonly unknownUser: 'defer' | 'badCredentials';
  readonly pool: { readonly max: number; readonly idleTimeoutMs: number; readonly connectionTimeoutMs: number };
  readonly queryTimeoutMs: number;
  readonly cache: { readonly ttlMs: number; readonly maxEntries: number };
  /** `false`: no TLS (or what `sslmode` in the connection string says). */
  readonly ssl: false | SslOptions;
}

/** Options of the acl kind. */
export interface AclPostgresOptions {
  readonly connect: 'granted' | 'defer';
  readonly unmatched: 'defer' | 'denied' | 'granted';
}

const AUTH_KEYS = ['connectionString', 'authQuery', 'aclQuery', 'passwordHash', 'unknownUser', 'pool', 'queryTimeoutMs', 'cache', 'ssl'];
const ACL_KEYS = ['connect', 'unmatched'];

type Options = Readonly<Record<string, unknown>>;

function show(value: unknown): string {
  if (typeof value === 'string') return JSON.stringify(value.length > 60 ? `${value.slice(0, 60)}...` : value);
  if (value === null) return 'null';
  if (Array.isArray(value)) return 'an array';
  return typeof value === 'object' ? 'an object' : String(value);
}

function checkKeys(options: Options, own: readonly string[], other: readonly string[], where: string, kind: string): void {
  for (const key of Object.keys(options)) {
    if (own.includes(key) || other.includes(key)) continue;
    throw optionsError(`unknown option ${where}${key} (the ${kind} kind knows ${own.map((k) => where + k).join(', ')})`);
  }
}

function objectOption(options: Options, key: string): Options {
  const value = options[key];
  if (value === undefined || value === null) return {};
  if (typeof value !== 'object' || Array.isArray(value)) throw optionsError(`options.${key} must be a mapping, got ${show(value)}`);
  return value as Options;
}

function integer(options: Options, key: string, where: string, def: number, min: number, max: number): number {
  const value = options[key] ?? def;
  if (typeof value !== 'number' || !Number.isInteger(value) || value < min || value > max) {
    throw optionsError(`options.${where}${key} must be an integer from ${min} to ${max}, got ${show(value)}`);
  }
  return value;
}

function oneOf<T extends string>(options: Options, key: string, values: readonly T[], def: T): T {
  const value = options[key] ?? def;
  if (typeof value !== 'string' || !(values as readonly string[]).includes(value)) {
    throw optionsError(`options.${key} must be one of ${values.join(', ')}, got ${show(value)}`);
  }
  return value as T;
}

/** The connection string with the password replaced by `***`. */
export function maskConnectionString(connectionString: string): string {
  try {
    const url = new URL(connectionString);
    if (url.password !== '') url.password = '***';
    return url.toString();
  } catch {
    return '(unparseable connection string)';
  }
}

function parseConnectionString(options: Options): { connectionString: string; target: string; sslmode: boolean } {
  const value = options.connectionString;
  if (value === undefined || value === null) {
    throw optionsError('options.connectionString is required: a URL like postgres://user:password@host:5432/database');
  }
  if (typeof value !== 'string' || value.trim() === '') {
    throw optionsError(
      `options.connectionString must be a URL like postgres://user:password@host:5432/database, got ${typeof value === 'string' ? 'an empty string' : show(value)}`,
    );
  }
  let url: URL;
  try {
    url = new URL(value);
  } catch {
    throw optionsError(
      'options.connectionString is not a URL: write postgres://user:password@host:5432/database (percent-encode special characters of the password)',
    );
  }
  if (url.protocol !== 'postgres:' && url.protocol !== 'postgresql:') {
    throw optionsError(`options.connectionString must start with postgres:// or postgresql://, got ${url.protocol}//`);
  }
  return { connectionString: value, target: maskConnectionString(value), sslmode: url.searchParams.has('sslmode') };
}

function pem(value: unknown, key: string, configDir: string): string | undefined {
  if (value === undefined || value === null) return undefined;
  if (typeof value !== 'string' || value.trim() === '')
    throw optionsError(`options.ssl.${key} must be a file path or PEM text, got ${show(value)}`);
  if (value.includes('-----BEGIN')) return value;
  const file = path.resolve(configDir, value);
  try {
    return fs.readFileSync(file, 'utf8');
  } catch (err) {
    throw optionsError(`options.ssl.${key}: cannot read ${file} (${err instanceof Error ? err.message : String(err)})`);
  }
}

function parseSsl(options: Options, configDir: string, sslmode: boolean): false | SslOptions {
  const value = options.ssl;
  if (value === undefined || value === null || value === false) return false;
  if (sslmode) throw optionsError('options.ssl and sslmode in options.connectionString both set TLS: keep one of them');
  if (value === true) return { rejectUnauthorized: true };
  if (typeof value !== 'object' || Array.isArray(value))
    throw optionsError(`options.ssl must be true, false or a mapping, got ${show(value)}`);
  const ssl = value as Options;
  for (const key of Object.keys(ssl)) {
    if (!['rejectUnauthorized', 'ca', 'cert', 'key', 'servername'].includes(key)) {
      throw optionsError(`unknown option options.ssl.${key} (known: rejectUnauthorized, ca, cert, key, servername)`);
    }
  }
  const rejectUnauthorized = ssl.rejectUnauthorized ?? true;
  if (typeof rejectUnauthorized !== 'boolean')
    throw optionsError(`options.ssl.rejectUnauthorized must be true or false, got ${show(rejectUnauthorized)}`);
  const servername = ssl.servername;
  if (servername !== undefined && (typeof servername !== 'string' || servername === '')) {
    throw optionsError(`options.ssl.servername must be a host name, got ${show(servername)}`);
  }
  const cert = pem(ssl.cert, 'cert', configDir);
  const key = pem(ssl.key, 'key', configDir);
  if ((cert === undefined) !== (key === undefined))
    throw optionsError('options.ssl.cert and options.ssl.key go together: give both or neither');
  const out: { -readonly [K in keyof SslOptions]: SslOptions[K] } = { rejectUnauthorized };
  const ca = pem(ssl.ca, 'ca', configDir);
  if (ca !== undefined) out.ca = ca;
  if (cert !== undefined) out.cert = cert;
  if (key !== undefined) out.key = key;
  if (typeof servername === 'string') out.servername = servername;
  return out;
}

function parseQuery(options: Options, key: 'authQuery' | 'aclQuery', def: string): CompiledQuery {
  const value = options[key] ?? def;
  if (typeof value !== 'string')
    throw optionsError(`options.${key} must be an SQL query (a string)${key === 'aclQuery' ? ' or false' : ''}, got ${show(value)}`);
  const query =
    key === 'authQuery'
      ? compileQuery(value, key, ['username', 'clientId'])
      : compileQuery(value, key, ['username', 'clientId', 'tenant', 'userId']);
  if (key === 'authQuery' && !query.uses('username')) {
    throw optionsError('options.authQuery must select the user by ${username} (without it every login would find the same rows)');
  }
  return query;
}

function parsePasswordHash(options: Options): readonly HashFormat[] {
  const value = options.passwordHash ?? [...HASH_FORMATS];
  const list = typeof value === 'string' ? [value] : value;
  if (!Array.isArray(list) || list.length === 0) {
    throw optionsError(
      `options.passwordHash must be a hash format or a non-empty list of them (${HASH_FORMATS.join(', ')}), got ${show(value)}`,
    );
  }
  for (const format of list as unknown[]) {
    if (typeof format !== 'string' || !(HASH_FORMATS as readonly string[]).includes(format)) {
      throw optionsError(
        `options.passwordHash: ${show(format)} is not a hash format (${HASH_FORMATS.join(', ')}; plain text and fast digests are not supported)`,
      );
    }
  }
  return [...new Set(list as HashFormat[])];
}

/**
 * Reads the auth kind's options. Throws `BIFRO_AUTH_POSTGRES_OPTIONS_INVALID` naming the key on an
 * unknown option or a bad value; the acl kind's options (`connect`, `unmatched`) are ignored, so
 * both kinds may share one options mapping.
 */
export function parseAuthOptions(options: Options, configDir: string): AuthPostgresOptions {
  checkKeys(options, AUTH_KEYS, ACL_KEYS, 'options.', 'auth');
  const { connectionString, target, sslmode } = parseConnectionString(options);
  const authQuery = parseQuery(options, 'authQuery', DEFAULT_AUTH_QUERY);
  const aclQuery = options.aclQuery === false ? undefined : parseQuery(options, 'aclQuery', DEFAULT_ACL_QUERY);
  const pool = objectOption(options, 'pool');
  checkKeys(pool, ['max', 'idleTimeoutMs', 'connectionTimeoutMs'], [], 'options.pool.', 'auth');
  const cache = objectOption(options, 'cache');
  checkKeys(cache, ['ttlMs', 'maxEntries'], [], 'options.cache.', 'auth');
  return {
    connectionString,
    target,
    authQuery,
    aclQuery,
    passwordHash: parsePasswordHash(options),
    unknownUser: oneOf(options, 'unknownUser', ['defer', 'badCredentials'], 'defer'),
    pool: {
      max: integer(pool, 'max', 'pool.', DEFAULTS.poolMax, 1, 1000),
      idleTimeoutMs: integer(pool, 'idleTimeoutMs', 'pool.', DEFAULTS.idleTimeoutMs, 0, 86_400_000),
      connectionTimeoutMs: integer(pool, 'connectionTimeoutMs', 'pool.', DEFAULTS.connectionTimeoutMs, 100, 60_000),
    },
    queryTimeoutMs: integer(options, 'queryTimeoutMs', '', DEFAULTS.queryTimeoutMs, 10, 60_000),
    cache: {
      ttlMs: integer(cache, 'ttlMs', 'cache.', DEFAULTS.cacheTtlMs, 0, 300_000),
      maxEntries: integer(cache, 'maxEntries', 'cache.', DEFAULTS.cacheMaxEntries, 1, 10_000_000),
    },
    ssl: parseSsl(options, configDir, sslmode),
  };
}

/** Reads the acl kind's options; the auth kind's are ignored (one mapping may serve both). */
export function parseAclOptions(options: Options): AclPostgresOptions {
  checkKeys(options, ACL_KEYS, AUTH_KEYS, 'options.', 'acl');
  return {
    connect: oneOf(options, 'connect', ['granted', 'defer'], 'granted'),
    unmatched: oneOf(options, 'unmatched', ['defer', 'denied', 'granted'], 'defer'),
  };
}
