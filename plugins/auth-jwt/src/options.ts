import * as path from 'node:path';
import { ACL_RULES_ATTR } from '@bifro/spi';
import { JwtPluginError } from './errors';

/** HMAC algorithms: a shared `secret`. */
export const HMAC_ALGORITHMS = ['HS256', 'HS384', 'HS512'] as const;
/** RSA algorithms (PKCS#1 v1.5 and PSS), keys of 2048 bits or more. */
export const RSA_ALGORITHMS = ['RS256', 'RS384', 'RS512', 'PS256', 'PS384', 'PS512'] as const;
/** ECDSA algorithms: P-256, P-384, P-521. */
export const EC_ALGORITHMS = ['ES256', 'ES384', 'ES512'] as const;
/** Ed25519 (`EdDSA`, and its RFC 9864 name `Ed25519`). */
export const OKP_ALGORITHMS = ['EdDSA', 'Ed25519'] as const;
/** Algorithms verified with public keys (`publicKeyFile`, `jwksUrl`). */
export const ASYMMETRIC_ALGORITHMS = [...RSA_ALGORITHMS, ...EC_ALGORITHMS, ...OKP_ALGORITHMS] as const;
/** Every algorithm the plugin verifies. `none` never is. */
export const SUPPORTED_ALGORITHMS = [...HMAC_ALGORITHMS, ...ASYMMETRIC_ALGORITHMS] as const;

export type JwtAlgorithm = (typeof SUPPORTED_ALGORITHMS)[number];

/** Where the verification keys come from (exactly one of `secret`, `publicKeyFile`, `jwksUrl`). */
export type KeySource =
  | { readonly kind: 'secret'; readonly secret: Uint8Array }
  | { readonly kind: 'file'; readonly file: string; readonly pollMs: number }
  | {
      readonly kind: 'jwks';
      readonly url: URL;
      readonly cacheMaxAgeMs: number;
      readonly cooldownMs: number;
      readonly timeoutMs: number;
      readonly failureBackoffMs: number;
    };

/** The auth options, after defaults and checks. */
export interface JwtAuthOptions {
  readonly key: KeySource;
  /** The allow-list given, or undefined: the default of the key source (see {@link defaultAlgorithms}). */
  readonly algorithms: readonly JwtAlgorithm[] | undefined;
  readonly issuer: string | string[] | undefined;
  readonly audience: string | string[] | undefined;
  readonly clockSkewSeconds: number;
  readonly requireExp: boolean;
  readonly tenantClaim: string;
  readonly defaultTenant: string | undefined;
  readonly userClaim: string;
  readonly aclClaim: string;
  /** Claims copied into `attrs`: [claim, attribute name]. */
  readonly attrsClaims: ReadonlyArray<readonly [claim: string, attr: string]>;
  /** The MQTT 5 Authentication Method, or undefined (enhanced authentication off). */
  readonly authMethod: string | undefined;
  readonly maxTokenBytes: number;
}

/** The acl options, after defaults and checks. */
export interface JwtAclOptions {
  /** Whether the plugin is the only ACL: it then grants connect and unsubscribe and denies what no token rule allows. */
  readonly standalone: boolean;
}

export const DEFAULTS = {
  clockSkewSeconds: 30,
  requireExp: true,
  tenantClaim: 'tenant',
  userClaim: 'sub',
  aclClaim: 'acl',
  authMethod: 'JWT',
  maxTokenBytes: 8192,
  keyFilePollMs: 1000,
  jwks: { cacheMaxAgeMs: 600_000, cooldownMs: 30_000, timeoutMs: 3000, failureBackoffMs: 1000 },
} as const;

/** The smallest HMAC secret accepted, in bytes (RFC 7518 §3.2: at least the hash size; 32 for HS256). */
export const MIN_SECRET_BYTES = 32;

const AUTH_KEYS = [
  'secret',
  'publicKeyFile',
  'jwksUrl',
  'algorithms',
  'issuer',
  'audience',
  'clockSkewSeconds',
  'requireExp',
  'tenantClaim',
  'defaultTenant',
  'userClaim',
  'aclClaim',
  'attrsClaims',
  'authMethod',
  'maxTokenBytes',
  'keyFilePollMs',
  'jwks',
];
const JWKS_KEYS = ['cacheMaxAgeMs', 'cooldownMs', 'timeoutMs', 'failureBackoffMs', 'allowHttp'];
const ACL_KEYS = ['standalone'];
const LOOPBACK_HOSTS = new Set(['127.0.0.1', '[::1]', 'localhost']);

function invalid(key: string, message: string): JwtPluginError {
  return new JwtPluginError('BIFRO_AUTH_JWT_OPTIONS_INVALID', `options.${key} ${message}`);
}

/** A value as an error message shows it (never a secret: callers do not pass one). */
function describe(value: unknown): string {
  if (value === undefined) return 'nothing';
  if (value === null) return 'null';
  if (typeof value === 'string') return JSON.stringify(value.length > 60 ? `${value.slice(0, 60)}...` : value);
  if (Array.isArray(value)) return 'a list';
  if (typeof value === 'object') return 'an object';
  return `${typeof value} ${String(value)}`;
}

function unknownKeys(options: Readonly<Record<string, unknown>>, known: readonly string[], prefix: string): void {
  for (const key of Object.keys(options)) {
    if (!known.includes(key)) throw invalid(`${prefix}${key}`, `is not an option (known: ${known.join(', ')})`);
  }
}

function nonEmptyString(options: Readonly<Record<string, unknown>>, key: string, fallback?: string): string {
  const value = options[key] ?? fallback;
  if (typeof value !== 'string' || value.trim() === '') throw invalid(key, `must be a non-empty string (got ${describe(value)})`);
  return value;
}

function optionalString(options: Readonly<Record<string, unknown>>, key: string): string | undefined {
  return options[key] === undefined ? undefined : nonEmptyString(options, key);
}

function integer(options: Readonly<Record<string, unknown>>, key: string, fallback: number, min: number, max: number, label = key): number {
  const value = options[key] ?? fallback;
  if (typeof value !== 'number' || !Number.isInteger(value) || value < min || value > max) {
    throw invalid(label, `must be an integer from ${min} to ${max} (got ${describe(value)})`);
  }
  return value;
}

function boolean(options: Readonly<Record<string, unknown>>, key: string, fallback: boolean, label = key): boolean {
  const value = options[key] ?? fallback;
  if (typeof value !== 'boolean') throw invalid(label, `must be true or false (got ${describe(value)})`);
  return value;
}

/** A string or a non-empty list of strings (issuer, audience). */
function stringOrList(options: Readonly<Record<string, unknown>>, key: string): string | string[] | undefined {
  const value = options[key];
  if (value === undefined) return undefined;
  if (typeof value === 'string' && value !== '') return value;
  if (Array.isArray(value) && value.length > 0 && value.every((v) => typeof v === 'string' && v !== '')) return [...(value as string[])];
  throw invalid(key, `must be a non-empty string or a non-empty list of them (got ${describe(value)})`);
}

function record(value: unknown, key: string): Readonly<Record<string, unknown>> {
  if (typeof value !== 'object' || value === null || Array.isArray(value)) throw invalid(key, `must be a mapping (got ${describe(value)})`);
  return value as Record<string, unknown>;
}

function keySource(options: Readonly<Record<string, unknown>>, configDir: string): KeySource {
  const given = ['secret', 'publicKeyFile', 'jwksUrl'].filter((k) => options[k] !== undefined);
  if (given.length !== 1) {
    throw invalid(
      given.length === 0 ? 'secret' : given.join('/'),
      given.length === 0
        ? 'is missing: give exactly one of secret, publicKeyFile or jwksUrl'
        : 'are exclusive: give exactly one of secret, publicKeyFile or jwksUrl',
    );
  }
  if (options.keyFilePollMs !== undefined && given[0] !== 'publicKeyFile')
    throw invalid('keyFilePollMs', 'only applies with publicKeyFile');
  if (options.jwks !== undefined && given[0] !== 'jwksUrl') throw invalid('jwks', 'only applies with jwksUrl');
  switch (given[0]) {
    case 'secret': {
      const secret = options.secret;
      if (typeof secret !== 'string') throw invalid('secret', `must be a string (got ${typeof secret})`);
      const bytes = new TextEncoder().encode(secret);
      if (bytes.length < MIN_SECRET_BYTES) {
        throw invalid('secret', `must be at least ${MIN_SECRET_BYTES} bytes long (got ${bytes.length}; the value is not shown)`);
      }
      return { kind: 'secret', secret: bytes };
    }
    case 'publicKeyFile': {
      const file = nonEmptyString(options, 'publicKeyFile');
      return {
        kind: 'file',
        file: path.resolve(configDir, file),
        pollMs: integer(options, 'keyFilePollMs', DEFAULTS.keyFilePollMs, 100, 3_600_000),
      };
    }
    default: {
      const raw = nonEmptyString(options, 'jwksUrl');
      let url: URL;
      try {
        url = new URL(raw);
      } catch {
        throw invalid('jwksUrl', `must be an absolute http(s) URL (got ${describe(raw)})`);
      }
      const jwks = record(options.jwks ?? {}, 'jwks');
      unknownKeys(jwks, JWKS_KEYS, 'jwks.');
      const allowHttp = boolean(jwks, 'allowHttp', false, 'jwks.allowHttp');
      if (url.protocol !== 'https:' && url.protocol !== 'http:') throw invalid('jwksUrl', `must be an http(s) URL (got ${describe(raw)})`);
      if (url.protocol === 'http:' && !allowHttp && !LOOPBACK_HOSTS.has(url.hostname)) {
        throw invalid(
          'jwksUrl',
          `must use https (plain http is accepted for a loopback host, or with jwks.allowHttp: true) (got ${describe(raw)})`,
        );
      }
      const d = DEFAULTS.jwks;
      return {
        kind: 'jwks',
        url,
        cacheMaxAgeMs: integer(jwks, 'cacheMaxAgeMs', d.cacheMaxAgeMs, 1000, 7 * 24 * 3_600_000, 'jwks.cacheMaxAgeMs'),
        cooldownMs: integer(jwks, 'cooldownMs', d.cooldownMs, 0, 24 * 3_600_000, 'jwks.cooldownMs'),
        timeoutMs: integer(jwks, 'timeoutMs', d.timeoutMs, 100, 60_000, 'jwks.timeoutMs'),
        failureBackoffMs: integer(jwks, 'failureBackoffMs', d.failureBackoffMs, 0, 3_600_000, 'jwks.failureBackoffMs'),
      };
    }
  }
}

function algorithms(options: Readonly<Record<string, unknown>>, key: KeySource): JwtAlgorithm[] | undefined {
  const value = options.algorithms;
  if (value === undefined) return undefined;
  if (!Array.isArray(value) || value.length === 0)
    throw invalid('algorithms', `must be a non-empty list of algorithms (got ${describe(value)})`);
  const fitting: readonly string[] = key.kind === 'secret' ? HMAC_ALGORITHMS : ASYMMETRIC_ALGORITHMS;
  const out: JwtAlgorithm[] = [];
  value.forEach((alg: unknown, i) => {
    if (typeof alg !== 'string') throw invalid(`algorithms[${i}]`, `must be an algorithm name (got ${describe(alg)})`);
    if (alg.toLowerCase() === 'none') throw invalid(`algorithms[${i}]`, 'must not be "none": unsigned tokens are never accepted');
    if (!(SUPPORTED_ALGORITHMS as readonly string[]).includes(alg)) {
      throw invalid(`algorithms[${i}]`, `must be one of ${SUPPORTED_ALGORITHMS.join(', ')} (got ${describe(alg)})`);
    }
    if (!fitting.includes(alg)) {
      throw invalid(
        `algorithms[${i}]`,
        key.kind === 'secret'
          ? `must be an HMAC algorithm (${HMAC_ALGORITHMS.join(', ')}) with a secret (got ${describe(alg)})`
          : `must be a public key algorithm (${ASYMMETRIC_ALGORITHMS.join(', ')}) with ${key.kind === 'file' ? 'publicKeyFile' : 'jwksUrl'} (got ${describe(alg)})`,
      );
    }
    if (!out.includes(alg as JwtAlgorithm)) out.push(alg as JwtAlgorithm);
  });
  return out;
}

function attrsClaims(options: Readonly<Record<string, unknown>>): Array<readonly [string, string]> {
  const value = options.attrsClaims;
  if (value === undefined) return [];
  let pairs: Array<readonly [string, unknown]>;
  if (Array.isArray(value)) pairs = value.map((claim: unknown) => [typeof claim === 'string' ? claim : '', claim] as const);
  else pairs = Object.entries(record(value, 'attrsClaims'));
  const out: Array<readonly [string, string]> = [];
  const seen = new Set<string>();
  for (const [claim, attr] of pairs) {
    const where = Array.isArray(value) ? `attrsClaims[${out.length}]` : `attrsClaims.${claim}`;
    if (claim === '' || typeof attr !== 'string' || attr === '') {
      throw invalid(
        where,
        `must be ${Array.isArray(value) ? 'a claim name' : 'the name of an attribute'} (a non-empty string, got ${describe(attr)})`,
      );
    }
    if (attr === ACL_RULES_ATTR) throw invalid(where, `must not name the attribute ${ACL_RULES_ATTR} (the ACL rules of aclClaim go there)`);
    if (seen.has(attr)) throw invalid(where, `names the attribute ${JSON.stringify(attr)} twice`);
    seen.add(attr);
    out.push([claim, attr]);
  }
  return out;
}

/** Reads the options of the plugin's auth entry. Throws a BIFRO_AUTH_JWT_OPTIONS_INVALID error naming the key. */
export function parseAuthOptions(options: Readonly<Record<string, unknown>>, configDir: string): JwtAuthOptions {
  unknownKeys(options, AUTH_KEYS, '');
  const key = keySource(options, configDir);
  const authMethodValue = options.authMethod;
  let authMethod: string | undefined;
  if (authMethodValue === false || authMethodValue === null) authMethod = undefined;
  else if (authMethodValue === undefined) authMethod = DEFAULTS.authMethod;
  else authMethod = nonEmptyString(options, 'authMethod');
  const tenantClaim = nonEmptyString(options, 'tenantClaim', DEFAULTS.tenantClaim);
  const userClaim = nonEmptyString(options, 'userClaim', DEFAULTS.userClaim);
  const aclClaim = nonEmptyString(options, 'aclClaim', DEFAULTS.aclClaim);
  return {
    key,
    algorithms: algorithms(options, key),
    issuer: stringOrList(options, 'issuer'),
    audience: stringOrList(options, 'audience'),
    clockSkewSeconds: integer(options, 'clockSkewSeconds', DEFAULTS.clockSkewSeconds, 0, 600),
    requireExp: boolean(options, 'requireExp', DEFAULTS.requireExp),
    tenantClaim,
    defaultTenant: optionalString(options, 'defaultTenant'),
    userClaim,
    aclClaim,
    attrsClaims: attrsClaims(options),
    authMethod,
    maxTokenBytes: integer(options, 'maxTokenBytes', DEFAULTS.maxTokenBytes, 256, 65535),
  };
}

/** Reads the options of the plugin's acl entry. Throws a BIFRO_AUTH_JWT_OPTIONS_INVALID error naming the key. */
export function parseAclOptions(options: Readonly<Record<string, unknown>>): JwtAclOptions {
  unknownKeys(options, ACL_KEYS, '');
  return { standalone: boolean(options, 'standalone', false) };
}
