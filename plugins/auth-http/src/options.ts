import { describe, optionError } from './errors';
import { parseTemplate, type PlaceholderName, type Template } from './template';

/** HTTP methods the plugin sends. GET carries the body fields as query parameters. */
export const METHODS = ['POST', 'PUT', 'GET'] as const;
export type Method = (typeof METHODS)[number];

/** The default `body`: the fields sent when the options name none. `remotePort` is left out on purpose (it would defeat the cache). */
export const DEFAULT_BODY: Readonly<Record<string, string>> = {
  clientId: '{clientId}',
  username: '{username}',
  password: '{password}',
  remoteAddress: '{remoteAddress}',
  listener: '{listener}',
  protocolVersion: '{protocolVersion}',
  certCN: '{certCN}',
};

export const DEFAULTS = {
  method: 'POST' as Method,
  bodyFormat: 'json' as const,
  mode: 'json' as const,
  timeoutMs: 2000,
  connections: 16,
  keepAliveTimeoutMs: 30_000,
  allowTtlMs: 60_000,
  denyTtlMs: 5_000,
  maxEntries: 10_000,
  failOpen: false,
  user: '{username}',
  maxResponseBytes: 65_536,
  rejectUnauthorized: true,
} as const;

/** A header sent with every request: its name and its value template. */
export interface HeaderTemplate {
  readonly name: string;
  readonly value: Template;
}

/** A body field: its name and its value template. */
export interface FieldTemplate {
  readonly name: string;
  readonly value: Template;
}

/** TLS material for an https service: each a file path (resolved against the config folder) or PEM text. */
export interface TlsOptions {
  readonly ca?: string;
  readonly cert?: string;
  readonly key?: string;
  readonly rejectUnauthorized: boolean;
  /** The name the service's certificate must carry (SNI and verification), when it is not the URL's host. */
  readonly servername?: string;
}

/** The options of the auth kind, after defaults and checks. */
export interface AuthHttpOptions {
  /** `http://host:port` or `https://host:port` of the service (no placeholders). */
  readonly origin: string;
  readonly https: boolean;
  /** Path and query of the URL, a template (values percent-encoded). */
  readonly path: Template;
  readonly method: Method;
  readonly headers: readonly HeaderTemplate[];
  readonly body: readonly FieldTemplate[];
  readonly bodyFormat: 'json' | 'form';
  /** `json`: a 2xx answer carries the decision in a JSON body; `status`: the status code alone decides. */
  readonly mode: 'json' | 'status';
  readonly timeoutMs: number;
  readonly pool: { readonly connections: number; readonly keepAliveTimeoutMs: number };
  readonly cache: { readonly allowTtlMs: number; readonly denyTtlMs: number; readonly maxEntries: number };
  readonly failOpen: boolean;
  readonly tls: TlsOptions | undefined;
  /** The tenant when the answer names none (required in `status` mode). */
  readonly tenant: Template | undefined;
  /** The user when the answer names none. */
  readonly user: Template;
  readonly maxResponseBytes: number;
  /** Every placeholder some template uses (what the request depends on). */
  readonly uses: ReadonlySet<PlaceholderName>;
}

/** What the acl kind answers in the cases its rules do not decide. */
export type AclFallback = 'defer' | 'grant' | 'deny';

/** The options of the acl kind, after defaults and checks. */
export interface AclHttpOptions {
  /** The answer for `connect` (unless the attached rules are malformed: then denied). */
  readonly connect: 'grant' | 'defer';
  /** The answer for a client that carries no rules. */
  readonly withoutRules: AclFallback;
  /** The answer when the client's rules match nothing. */
  readonly unmatched: AclFallback;
}

const AUTH_KEYS = [
  'url',
  'method',
  'headers',
  'body',
  'bodyFormat',
  'mode',
  'timeoutMs',
  'pool',
  'cache',
  'failOpen',
  'tls',
  'tenant',
  'user',
  'maxResponseBytes',
];
const ACL_KEYS = ['connect', 'withoutRules', 'unmatched'];
/** Headers the plugin manages itself. */
const MANAGED_HEADERS = new Set(['host', 'content-length', 'transfer-encoding', 'connection', 'keep-alive', 'upgrade', 'te', 'trailer']);
const HEADER_NAME = /^[!#$%&'*+.^_`|~0-9A-Za-z-]+$/;

type Options = Readonly<Record<string, unknown>>;

function isRecord(value: unknown): value is Options {
  return typeof value === 'object' && value !== null && !Array.isArray(value);
}

function checkKeys(options: Options, known: readonly string[], where: string): void {
  for (const key of Object.keys(options)) {
    if (!known.includes(key)) throw optionError(`${where}${key}`, `is not an option (known: ${known.join(', ')})`);
  }
}

function int(options: Options, key: string, where: string, def: number, min: number, max: number): number {
  const value = options[key] ?? def;
  if (typeof value !== 'number' || !Number.isInteger(value) || value < min || value > max) {
    throw optionError(`${where}${key}`, `must be an integer from ${min} to ${max}, got ${describe(value)}`);
  }
  return value;
}

function bool(options: Options, key: string, where: string, def: boolean): boolean {
  const value = options[key] ?? def;
  if (typeof value !== 'boolean') throw optionError(`${where}${key}`, `must be true or false, got ${describe(value)}`);
  return value;
}

function oneOf<T extends string>(options: Options, key: string, where: string, def: T, values: readonly T[]): T {
  const value = options[key] ?? def;
  if (typeof value !== 'string' || !values.includes(value as T)) {
    throw optionError(`${where}${key}`, `must be one of ${values.join(', ')}, got ${describe(value)}`);
  }
  return value as T;
}

function template(value: unknown, key: string): Template {
  if (typeof value !== 'string')
    throw optionError(key, `must be a string (a template with placeholders like {username}), got ${describe(value)}`);
  try {
    return parseTemplate(value);
  } catch (err) {
    throw optionError(key, `is not a valid template: ${(err as Error).message}`);
  }
}

function parseUrl(value: unknown): { origin: string; https: boolean; path: Template } {
  if (typeof value !== 'string' || value === '') throw optionError('url', `must be an http:// or https:// URL, got ${describe(value)}`);
  const m = /^(https?):\/\/([^/?#]*)(.*)$/i.exec(value);
  if (m === null) throw optionError('url', `must be an http:// or https:// URL, got ${describe(value)}`);
  const authority = m[2]!;
  const rest = m[3]!;
  if (authority.includes('{') || authority.includes('}'))
    throw optionError('url', 'may use placeholders in its path and query only, not in the host or port');
  if (authority.includes('@')) throw optionError('url', 'must not carry credentials (user:password@): send them in `headers` instead');
  if (rest.includes('#')) throw optionError('url', 'must not have a fragment (#...)');
  let origin: URL;
  try {
    origin = new URL(`${m[1]!.toLowerCase()}://${authority}`);
  } catch {
    throw optionError('url', `has an invalid host or port: ${describe(value)}`);
  }
  if (origin.hostname === '') throw optionError('url', `has no host: ${describe(value)}`);
  const path = template(rest === '' ? '/' : rest.startsWith('?') ? `/${rest}` : rest, 'url');
  // Every literal part must already be valid URL text: what placeholders add is percent-encoded.
  for (const part of path.parts) {
    if (typeof part === 'string' && /[\s"<>\\^`{|}]/.test(part))
      throw optionError('url', 'has characters that must be percent-encoded in its path or query');
  }
  return { origin: origin.origin, https: origin.protocol === 'https:', path };
}

function parseHeaders(value: unknown): HeaderTemplate[] {
  if (value === undefined) return [];
  if (!isRecord(value)) throw optionError('headers', `must be a map of header names to value templates, got ${describe(value)}`);
  const out: HeaderTemplate[] = [];
  const seen = new Set<string>();
  for (const [name, raw] of Object.entries(value)) {
    const key = `headers.${name}`;
    if (!HEADER_NAME.test(name)) throw optionError(key, 'is not a valid HTTP header name');
    const lower = name.toLowerCase();
    if (MANAGED_HEADERS.has(lower)) throw optionError(key, 'is set by the plugin itself and cannot be configured');
    if (seen.has(lower)) throw optionError(key, 'is given twice (header names are case-insensitive)');
    seen.add(lower);
    const t = template(raw, key);
    for (const part of t.parts) {
      if (typeof part === 'string' && /[^\x20-\x7e\t]/.test(part)) throw optionError(key, 'must contain printable ASCII only');
    }
    out.push({ name: lower, value: t });
  }
  return out;
}

function parseBody(value: unknown): FieldTemplate[] {
  const source = value ?? DEFAULT_BODY;
  if (!isRecord(source)) throw optionError('body', `must be a map of field names to value templates, got ${describe(value)}`);
  return Object.entries(source).map(([name, raw]) => {
    if (name === '') throw optionError('body', 'has an empty field name');
    return { name, value: template(raw, `body.${name}`) };
  });
}

/** Whether a string is PEM text (else it is a file path). */
export function isPem(value: string): boolean {
  return value.includes('-----BEGIN ');
}

function parseTls(value: unknown, https: boolean): TlsOptions | undefined {
  if (value === undefined) return undefined;
  if (!isRecord(value)) throw optionError('tls', `must be a map { ca, cert, key, rejectUnauthorized, servername }, got ${describe(value)}`);
  checkKeys(value, ['ca', 'cert', 'key', 'rejectUnauthorized', 'servername'], 'tls.');
  if (!https) throw optionError('tls', 'applies to an https:// url only');
  const text = (key: 'ca' | 'cert' | 'key' | 'servername'): string | undefined => {
    const v = value[key];
    if (v === undefined) return undefined;
    if (typeof v !== 'string' || v.trim() === '')
      throw optionError(`tls.${key}`, `must be a non-empty string (a file path, or PEM text), got ${describe(v)}`);
    return v;
  };
  const tls: TlsOptions = {
    ca: text('ca'),
    cert: text('cert'),
    key: text('key'),
    servername: text('servername'),
    rejectUnauthorized: bool(value, 'rejectUnauthorized', 'tls.', DEFAULTS.rejectUnauthorized),
  };
  if ((tls.cert === undefined) !== (tls.key === undefined))
    throw optionError(tls.cert === undefined ? 'tls.cert' : 'tls.key', 'is needed too: a client certificate needs both cert and key');
  return tls;
}

/**
 * Reads the `options` of the auth kind. Throws a `BIFRO_AUTH_HTTP_OPTIONS_INVALID` error naming
 * the key on an unknown option or a value of the wrong type or range.
 */
export function parseAuthOptions(options: Options): AuthHttpOptions {
  checkKeys(options, AUTH_KEYS, '');
  if (options.url === undefined)
    throw optionError('url', 'is required: the URL of the auth service, e.g. "https://auth.example.com/mqtt/auth"');
  const url = parseUrl(options.url);
  const method = oneOf(options, 'method', '', DEFAULTS.method, METHODS);
  const headers = parseHeaders(options.headers);
  const body = parseBody(options.body);
  const bodyFormat = oneOf(options, 'bodyFormat', '', DEFAULTS.bodyFormat, ['json', 'form']);
  if (method === 'GET' && options.bodyFormat !== undefined)
    throw optionError('bodyFormat', 'does not apply to GET (the body fields go into the query string)');
  const mode = oneOf(options, 'mode', '', DEFAULTS.mode, ['json', 'status']);
  const timeoutMs = int(options, 'timeoutMs', '', DEFAULTS.timeoutMs, 1, 60_000);

  const pool = options.pool ?? {};
  if (!isRecord(pool)) throw optionError('pool', `must be a map { connections, keepAliveTimeoutMs }, got ${describe(pool)}`);
  checkKeys(pool, ['connections', 'keepAliveTimeoutMs'], 'pool.');
  const cache = options.cache ?? {};
  if (!isRecord(cache)) throw optionError('cache', `must be a map { allowTtlMs, denyTtlMs, maxEntries }, got ${describe(cache)}`);
  checkKeys(cache, ['allowTtlMs', 'denyTtlMs', 'maxEntries'], 'cache.');

  const tenant = options.tenant === undefined ? undefined : template(options.tenant, 'tenant');
  if (mode === 'status' && tenant === undefined) throw optionError('tenant', 'is required with mode "status" (the answer names no tenant)');
  const user = template(options.user ?? DEFAULTS.user, 'user');

  const uses = new Set<PlaceholderName>();
  for (const t of [url.path, ...headers.map((h) => h.value), ...body.map((f) => f.value), user, ...(tenant ? [tenant] : [])]) {
    for (const name of t.uses) uses.add(name);
  }
  return {
    origin: url.origin,
    https: url.https,
    path: url.path,
    method,
    headers,
    body,
    bodyFormat,
    mode,
    timeoutMs,
    pool: {
      connections: int(pool, 'connections', 'pool.', DEFAULTS.connections, 1, 1024),
      keepAliveTimeoutMs: int(pool, 'keepAliveTimeoutMs', 'pool.', DEFAULTS.keepAliveTimeoutMs, 1, 3_600_000),
    },
    cache: {
      allowTtlMs: int(cache, 'allowTtlMs', 'cache.', DEFAULTS.allowTtlMs, 0, 86_400_000),
      denyTtlMs: int(cache, 'denyTtlMs', 'cache.', DEFAULTS.denyTtlMs, 0, 86_400_000),
      maxEntries: int(cache, 'maxEntries', 'cache.', DEFAULTS.maxEntries, 0, 10_000_000),
    },
    failOpen: bool(options, 'failOpen', '', DEFAULTS.failOpen),
    tls: parseTls(options.tls, url.https),
    tenant,
    user,
    maxResponseBytes: int(options, 'maxResponseBytes', '', DEFAULTS.maxResponseBytes, 64, 16 * 1024 * 1024),
    uses,
  };
}

/** Reads the `options` of the acl kind (see {@link AclHttpOptions}); throws like {@link parseAuthOptions}. */
export function parseAclOptions(options: Options): AclHttpOptions {
  checkKeys(options, ACL_KEYS, '');
  return {
    connect: oneOf(options, 'connect', '', 'grant', ['grant', 'defer']),
    withoutRules: oneOf<AclFallback>(options, 'withoutRules', '', 'defer', ['defer', 'grant', 'deny']),
    unmatched: oneOf<AclFallback>(options, 'unmatched', '', 'defer', ['defer', 'grant', 'deny']),
  };
}
