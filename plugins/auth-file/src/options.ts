import * as path from 'node:path';
import { AuthFileError, PLUGIN_NAME } from './errors';
import { tenantNameProblem } from './password-file';

/** Where a client certificate names the user. */
export const CERT_USER_SOURCES = ['CN', 'SAN:DNS', 'SAN:URI', 'SAN:EMAIL'] as const;
export type CertUserSource = (typeof CERT_USER_SOURCES)[number];
/** Subject fields that can name the tenant; any other `certificate.tenant` string is a fixed tenant. */
export const CERT_TENANT_FIELDS = ['O', 'OU'] as const;
export type CertTenantField = (typeof CERT_TENANT_FIELDS)[number];

/** Identity from a verified client certificate (option `certificate`). */
export interface CertificateOptions {
  readonly user: CertUserSource;
  /** A subject field, or a fixed tenant. */
  readonly tenant: { readonly field: CertTenantField } | { readonly fixed: string };
  /** Whether the certificate's user must also be a user of the password file (its attributes are attached either way when it is). */
  readonly requireListed: boolean;
}

/** Options of the plugin, after defaults and checks. */
export interface AuthFileOptions {
  /** Absolute path of the password file. */
  readonly file: string;
  /** Tenant of lines that name none (mosquitto lines); also the tenant of bare login names. */
  readonly tenant: string;
  /** What an unknown user gets: `defer` (the next auth plugin decides) or `reject` (bad credentials). */
  readonly unknownUser: 'defer' | 'reject';
  /** Whether SCRAM-SHA-256/512 are offered over MQTT 5 AUTH. */
  readonly scram: boolean;
  /** Identity from verified client certificates; undefined: off. */
  readonly certificate: CertificateOptions | undefined;
  /** How long a successful password check is remembered (0: never). */
  readonly cacheTtlMs: number;
  /** At most this many remembered checks. */
  readonly cacheMaxEntries: number;
  /** Milliseconds between two stat checks of the file (the fallback of `watch`). */
  readonly pollMs: number;
  /** Whether to listen to fs.watch events of the file's folder besides polling. */
  readonly watch: boolean;
  /** Quiet time after the last change seen before the file is read. */
  readonly debounceMs: number;
}

export const DEFAULT_TENANT = 'default';
export const DEFAULT_CACHE_TTL_MS = 30_000;
export const DEFAULT_CACHE_MAX_ENTRIES = 10_000;
export const DEFAULT_POLL_MS = 1000;
export const DEBOUNCE_MS = 100;

const KNOWN = ['file', 'tenant', 'unknownUser', 'scram', 'certificate', 'cacheTtlMs', 'cacheMaxEntries', 'pollMs', 'watch'];
const CERT_KNOWN = ['user', 'tenant', 'requireListed'];

function invalid(key: string, message: string): AuthFileError {
  return new AuthFileError('BIFRO_AUTH_FILE_OPTIONS_INVALID', `${PLUGIN_NAME}: options.${key} ${message}`);
}

function integer(options: Readonly<Record<string, unknown>>, key: string, fallback: number, min: number, max: number): number {
  const value = options[key] ?? fallback;
  if (typeof value !== 'number' || !Number.isInteger(value) || value < min || value > max)
    throw invalid(key, `must be an integer from ${min} to ${max}, got ${JSON.stringify(value)}`);
  return value;
}

function boolean(options: Readonly<Record<string, unknown>>, key: string, fallback: boolean): boolean {
  const value = options[key] ?? fallback;
  if (typeof value !== 'boolean') throw invalid(key, `must be true or false, got ${JSON.stringify(value)}`);
  return value;
}

function parseCertificate(value: unknown, defaultTenant: string): CertificateOptions | undefined {
  if (value === undefined || value === false || value === null) return undefined;
  if (typeof value !== 'object' || Array.isArray(value))
    throw invalid('certificate', `must be a map { user, tenant?, requireListed? } or false, got ${JSON.stringify(value)}`);
  const cert = value as Record<string, unknown>;
  for (const key of Object.keys(cert)) {
    if (!CERT_KNOWN.includes(key)) throw invalid(`certificate.${key}`, `is not an option (known: ${CERT_KNOWN.join(', ')})`);
  }
  const user = cert.user;
  if (typeof user !== 'string' || !(CERT_USER_SOURCES as readonly string[]).includes(user))
    throw invalid('certificate.user', `must be one of ${CERT_USER_SOURCES.join(', ')}, got ${JSON.stringify(user)}`);
  const tenantValue = cert.tenant;
  let tenant: CertificateOptions['tenant'] | undefined;
  if (tenantValue !== undefined) {
    if (typeof tenantValue !== 'string')
      throw invalid('certificate.tenant', `must be O, OU or a fixed tenant name, got ${JSON.stringify(tenantValue)}`);
    if ((CERT_TENANT_FIELDS as readonly string[]).includes(tenantValue)) tenant = { field: tenantValue as CertTenantField };
    else {
      const problem = tenantNameProblem(tenantValue);
      if (problem !== undefined) throw invalid('certificate.tenant', `${problem}: ${JSON.stringify(tenantValue)}`);
      tenant = { fixed: tenantValue };
    }
  }
  const requireListed = cert.requireListed ?? false;
  if (typeof requireListed !== 'boolean')
    throw invalid('certificate.requireListed', `must be true or false, got ${JSON.stringify(requireListed)}`);
  return { user: user as CertUserSource, tenant: tenant ?? { fixed: defaultTenant }, requireListed };
}

/**
 * Reads the plugin's `options` block; throws BIFRO_AUTH_FILE_OPTIONS_INVALID naming the key on a
 * missing `file`, an unknown option or a value of the wrong type. `file` is resolved against the
 * broker config's folder.
 */
export function parseOptions(options: Readonly<Record<string, unknown>>, configDir: string): AuthFileOptions {
  for (const key of Object.keys(options)) {
    if (!KNOWN.includes(key)) throw invalid(key, `is not an option (known: ${KNOWN.join(', ')})`);
  }
  const file = options.file;
  if (typeof file !== 'string' || file.trim() === '')
    throw invalid('file', `must be the path of the password file, got ${JSON.stringify(file)}`);
  const tenant = options.tenant ?? DEFAULT_TENANT;
  if (typeof tenant !== 'string') throw invalid('tenant', `must be a tenant name, got ${JSON.stringify(tenant)}`);
  const tenantProblem = tenantNameProblem(tenant);
  if (tenantProblem !== undefined) throw invalid('tenant', `${tenantProblem}: ${JSON.stringify(tenant)}`);
  const unknownUser = options.unknownUser ?? 'defer';
  if (unknownUser !== 'defer' && unknownUser !== 'reject')
    throw invalid('unknownUser', `must be defer or reject, got ${JSON.stringify(unknownUser)}`);
  const certificate = parseCertificate(options.certificate, tenant);
  return {
    file: path.resolve(configDir, file),
    tenant,
    unknownUser,
    scram: boolean(options, 'scram', true),
    certificate,
    cacheTtlMs: integer(options, 'cacheTtlMs', DEFAULT_CACHE_TTL_MS, 0, 3_600_000),
    cacheMaxEntries: integer(options, 'cacheMaxEntries', DEFAULT_CACHE_MAX_ENTRIES, 1, 1_000_000),
    pollMs: integer(options, 'pollMs', DEFAULT_POLL_MS, 10, 60_000),
    watch: boolean(options, 'watch', true),
    debounceMs: DEBOUNCE_MS,
  };
}
