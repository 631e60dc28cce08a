import { readFileSync } from 'node:fs';
import { isAbsolute, resolve } from 'node:path';
import type { PluginContext, PluginLogger } from '@bifro/spi';
import { NatsStorageError } from './errors';

/** The resolved options of the NATS storage. */
export interface NatsStorageOptions {
  /** nats:// or tls:// URLs; the client picks one and learns the rest of the cluster from it. */
  readonly servers: readonly string[];
  readonly user?: string;
  readonly password?: string;
  readonly token?: string;
  /** File paths (absolute once resolved), read when connecting. */
  readonly tls?: { readonly ca?: string; readonly cert?: string; readonly key?: string };
  /** Streams/buckets per kind of data (1..1024): bounds the work of one stream. */
  readonly partitions: number;
  /** JetStream replicas of every stream (1..5), capped at the servers the connection knows. */
  readonly replicas: number;
  /** Start of every bucket and stream name ([a-z0-9_]+). */
  readonly prefix: string;
  /** Most milliseconds one call waits for NATS. */
  readonly timeoutMs: number;
  readonly logger?: PluginLogger;
}

export const DEFAULTS = { partitions: 16, replicas: 3, prefix: 'bifro', timeoutMs: 5000 } as const;

const KNOWN = ['servers', 'user', 'password', 'token', 'tls', 'partitions', 'replicas', 'prefix', 'timeoutMs'];

function invalid(message: string): NatsStorageError {
  return new NatsStorageError('BIFRO_STORAGE_NATS_OPTIONS_INVALID', `@bifro/plugin-storage-nats: ${message}`);
}

function integer(o: Readonly<Record<string, unknown>>, name: string, min: number, max: number, fallback: number): number {
  const v = o[name];
  if (v === undefined) return fallback;
  if (typeof v !== 'number' || !Number.isInteger(v) || v < min || v > max)
    throw invalid(`${name}: must be an integer from ${min} to ${max}, got ${JSON.stringify(v)}`);
  return v;
}

function optionalString(o: Readonly<Record<string, unknown>>, name: string, what = name): string | undefined {
  const v = o[name];
  if (v === undefined) return undefined;
  if (typeof v !== 'string' || v.length === 0) throw invalid(`${what}: must be a non-empty string, got ${JSON.stringify(v)}`);
  return v;
}

/**
 * Checks plugin options (`plugins.storage.options`, or the cluster's NATS settings the broker
 * passes in cluster mode) and fills in the defaults. Every error names its field, e.g.
 * `servers[0]: "http://x" is not a nats:// or tls:// URL`. TLS file paths are resolved against
 * `baseDir` (the config file's folder) and must be readable now, so a typo fails at start.
 */
export function parseOptions(o: Readonly<Record<string, unknown>>, baseDir = process.cwd()): NatsStorageOptions {
  const unknown = Object.keys(o).filter((k) => !KNOWN.includes(k));
  if (unknown.length > 0) throw invalid(`unknown option(s) ${unknown.join(', ')}; known: ${KNOWN.join(', ')}`);
  const servers = o.servers;
  if (!Array.isArray(servers) || servers.length === 0)
    throw invalid(`servers: required, a non-empty list of nats:// URLs, got ${JSON.stringify(servers)}`);
  servers.forEach((s: unknown, i) => {
    if (typeof s !== 'string' || !/^(nats|tls):\/\/[^\s/]+(:\d+)?\/?$/.test(s))
      throw invalid(`servers[${i}]: ${JSON.stringify(s)} is not a nats:// or tls:// URL`);
  });
  const user = optionalString(o, 'user');
  const password = optionalString(o, 'password');
  const token = optionalString(o, 'token');
  if ((user === undefined) !== (password === undefined))
    throw invalid(`${user === undefined ? 'user' : 'password'}: user and password go together`);
  if (token !== undefined && user !== undefined) throw invalid('token: give either user/password or token, not both');
  let tls: NatsStorageOptions['tls'];
  if (o.tls !== undefined) {
    if (typeof o.tls !== 'object' || o.tls === null || Array.isArray(o.tls))
      throw invalid(`tls: must be a map {ca, cert, key} of file paths, got ${JSON.stringify(o.tls)}`);
    const t = o.tls as Record<string, unknown>;
    const extra = Object.keys(t).filter((k) => !['ca', 'cert', 'key'].includes(k));
    if (extra.length > 0) throw invalid(`tls.${extra[0]}: unknown; known: ca, cert, key`);
    const file = (k: 'ca' | 'cert' | 'key'): string | undefined => {
      const p = optionalString(t, k, `tls.${k}`);
      if (p === undefined) return undefined;
      const abs = isAbsolute(p) ? p : resolve(baseDir, p);
      try {
        readFileSync(abs);
      } catch (err) {
        throw invalid(`tls.${k}: cannot read ${abs}: ${(err as Error).message}`);
      }
      return abs;
    };
    tls = { ca: file('ca'), cert: file('cert'), key: file('key') };
    if ((tls.cert === undefined) !== (tls.key === undefined))
      throw invalid(`tls.${tls.cert === undefined ? 'cert' : 'key'}: cert and key go together`);
  }
  const prefix = o.prefix === undefined ? DEFAULTS.prefix : o.prefix;
  if (typeof prefix !== 'string' || !/^[a-z0-9_]{1,32}$/.test(prefix))
    throw invalid(`prefix: must be 1 to 32 characters of [a-z0-9_], got ${JSON.stringify(prefix)}`);
  return {
    servers: servers as string[],
    ...(user !== undefined ? { user, password } : {}),
    ...(token !== undefined ? { token } : {}),
    ...(tls !== undefined ? { tls } : {}),
    partitions: integer(o, 'partitions', 1, 1024, DEFAULTS.partitions),
    replicas: integer(o, 'replicas', 1, 5, DEFAULTS.replicas),
    prefix,
    timeoutMs: integer(o, 'timeoutMs', 100, 600_000, DEFAULTS.timeoutMs),
  };
}

/** The options of a plugin context (relative TLS paths from the config file's folder), with its logger. */
export function resolveOptions(ctx: PluginContext): NatsStorageOptions {
  return { ...parseOptions(ctx.options, ctx.configDir), logger: ctx.logger };
}
