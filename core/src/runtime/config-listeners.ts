/**
 * Listeners: building each from its raw entry (defaults, names, paths), `--port`, and the rules
 * the schema cannot state: kinds and their tls/path blocks, duplicates, workers, the secure-defaults
 * exposure check (no auth plugin: loopback only) and readable TLS files.
 */
import { constants as fsConstants, promises as fs } from 'node:fs';
import type { BrokerConfig, ListenerConfig } from '../base/config-types';
import type { ConfigIssue } from './config-errors';
import type { RawConfig, RawListener } from './config-schema';
import type { Locator } from './config-file';
import { DEFAULT_PORTS, DEFAULT_WS_PATH } from './config-defaults';
import { isLoopbackHost } from '../security/secure-defaults';

function isRecord(value: unknown): value is Record<string, unknown> {
  return typeof value === 'object' && value !== null && !Array.isArray(value);
}

/** tls/wss need a tls block; tls only for tls/wss; path only for ws/wss. Runs on raw (maybe invalid) input. */
export function checkListenerKinds(raw: RawConfig, where: Locator): ConfigIssue[] {
  const issues: ConfigIssue[] = [];
  const listeners: unknown = isRecord(raw) ? raw.listeners : undefined;
  if (!Array.isArray(listeners)) return issues;
  listeners.forEach((listener: unknown, i) => {
    if (!isRecord(listener)) return;
    const type = listener.type ?? 'tcp';
    const secure = type === 'tls' || type === 'wss';
    const web = type === 'ws' || type === 'wss';
    if (typeof type !== 'string') return;
    if (secure && listener.tls === undefined) {
      issues.push(
        where.issue('BIFRO_CONFIG_MISSING_KEY', ['listeners', i, 'tls'], `missing; a ${type} listener needs tls.cert and tls.key`),
      );
    }
    if (!secure && listener.tls !== undefined) {
      issues.push(
        where.issue(
          'BIFRO_CONFIG_INVALID_VALUE',
          ['listeners', i, 'tls'],
          `applies only to tls and wss listeners; this listener is ${type}`,
        ),
      );
    }
    if (!web && listener.path !== undefined) {
      issues.push(
        where.issue(
          'BIFRO_CONFIG_INVALID_VALUE',
          ['listeners', i, 'path'],
          `applies only to ws and wss listeners; this listener is ${type}`,
        ),
      );
    }
  });
  return issues;
}

const WILDCARD_HOSTS = new Set(['0.0.0.0', '::', '[::]', '*']);

export function checkDuplicateListeners(listeners: readonly ListenerConfig[], where: Locator): ConfigIssue[] {
  const issues: ConfigIssue[] = [];
  listeners.forEach((listener, i) => {
    for (let j = 0; j < i; j++) {
      const other = listeners[j]!;
      if (other.name === listener.name) {
        issues.push(
          where.issue(
            'BIFRO_CONFIG_DUPLICATE_LISTENER',
            ['listeners', i, 'name'],
            `"${listener.name}" is already the name of listeners[${j}]`,
          ),
        );
        return;
      }
      const sameHost = other.host === listener.host || WILDCARD_HOSTS.has(other.host) || WILDCARD_HOSTS.has(listener.host);
      if (listener.port !== 0 && other.port === listener.port && sameHost) {
        issues.push(
          where.issue(
            'BIFRO_CONFIG_DUPLICATE_LISTENER',
            ['listeners', i, 'port'],
            `${listener.host}:${listener.port} ("${listener.name}") conflicts with listeners[${j}] ("${other.name}" on ${other.host}:${other.port})`,
          ),
        );
        return;
      }
    }
  });
  return issues;
}

/**
 * With `workers` > 1 every listener must be plain tcp: a connection is handed to the worker that
 * owns its tenant, and a TLS session or WebSocket cannot leave the process that accepted it.
 */
export function checkWorkerListeners(config: BrokerConfig, fromOption: boolean, where: Locator): ConfigIssue[] {
  const workers = config.workers ?? 1;
  if (workers <= 1) return [];
  const source = fromOption ? ' (--workers)' : '';
  const api =
    config.api === undefined
      ? []
      : [
          where.issue(
            'BIFRO_CONFIG_WORKERS_API',
            ['api'],
            `the admin API cannot be used with workers: ${workers}${source} yet: each worker serves only its own tenants, so no one process could answer for the broker (use workers: 1 with api, or leave api out; docs/api.md § Limits)`,
          ),
        ];
  return [
    ...api,
    ...config.listeners.flatMap((listener, i) =>
      listener.type === 'tcp'
        ? []
        : [
            where.issue(
              'BIFRO_CONFIG_WORKERS_LISTENER',
              ['listeners', i, 'type'],
              `a ${listener.type} listener ("${listener.name}") cannot be used with workers: ${workers}${source}; only tcp connections can be handed between worker processes (use workers: 1, or a TLS/WebSocket proxy in front of a tcp listener; docs/multicore.md)`,
            ),
          ],
    ),
  ];
}

/**
 * Without an auth plugin every client is accepted (dev-only allow-all): such a broker listens on
 * loopback only, unless `security.allowAnonymousOnPublicInterfaces` opts in.
 */
export function checkAnonymousExposure(config: BrokerConfig, where: Locator): ConfigIssue[] {
  if (config.plugins.auth.length > 0 || config.security.allowAnonymousOnPublicInterfaces) return [];
  return config.listeners.flatMap((listener, i) =>
    isLoopbackHost(listener.host)
      ? []
      : [
          where.issue(
            'BIFRO_CONFIG_ANONYMOUS_EXPOSED',
            ['listeners', i, 'host'],
            `listener "${listener.name}" would expose the DEV-ONLY allow-all auth on ${listener.host} (plugins.auth is empty, so every client is accepted); configure plugins.auth, bind 127.0.0.1, or opt in with security.allowAnonymousOnPublicInterfaces: true`,
          ),
        ],
  );
}

/** The admin API needs at least one token, each with its own name and hash. */
export function checkApiTokens(config: BrokerConfig, where: Locator): ConfigIssue[] {
  const api = config.api;
  if (api === undefined) return [];
  if (api.tokens.length === 0)
    return [
      where.issue(
        'BIFRO_CONFIG_API_TOKENS',
        ['api', 'tokens'],
        'the admin API is enabled (an `api` section is present) but has no token: create one with `bifro token create --name NAME` and paste it under api.tokens',
      ),
    ];
  const issues: ConfigIssue[] = [];
  const names = new Set<string>();
  const hashes = new Set<string>();
  for (const [i, token] of api.tokens.entries()) {
    if (names.has(token.name))
      issues.push(where.issue('BIFRO_CONFIG_API_TOKENS', ['api', 'tokens', i, 'name'], `token name "${token.name}" is used twice`));
    else if (hashes.has(token.hash))
      issues.push(
        where.issue('BIFRO_CONFIG_API_TOKENS', ['api', 'tokens', i, 'hash'], `token "${token.name}" has the hash of an earlier token`),
      );
    names.add(token.name);
    hashes.add(token.hash);
  }
  return issues;
}

/** The certificate files of tls/wss listeners, of the admin API and of the NATS connection must be readable. */
export async function checkTlsFiles(config: BrokerConfig, where: Locator): Promise<ConfigIssue[]> {
  const issues: ConfigIssue[] = [];
  const owners: { readonly path: (string | number)[]; readonly tls: { cert?: string; key?: string; ca?: string } | undefined }[] = [
    ...config.listeners.map((l, i) => ({ path: ['listeners', i, 'tls'], tls: l.tls })),
    { path: ['api', 'tls'], tls: config.api?.tls },
    { path: ['cluster', 'tls'], tls: config.cluster?.tls },
  ];
  for (const { path: at, tls } of owners) {
    if (tls === undefined) continue;
    for (const key of ['cert', 'key', 'ca'] as const) {
      const file = tls[key];
      if (file === undefined) continue;
      try {
        await fs.access(file, fsConstants.R_OK);
      } catch (err) {
        const reason = (err as NodeJS.ErrnoException).code ?? String(err);
        issues.push(where.issue('BIFRO_CONFIG_TLS_FILE', [...at, key], `cannot read ${file} (${reason})`));
      }
    }
  }
  return issues;
}

export type MutableListener = { -readonly [K in keyof ListenerConfig]: ListenerConfig[K] };

export function buildListener(
  l: RawListener,
  index: number,
  all: readonly RawListener[],
  fromFile: (p: string) => string,
  defaultHost: string,
): MutableListener {
  const type = l.type ?? 'tcp';
  const sameType = all.filter((o) => (o.type ?? 'tcp') === type);
  const name =
    l.name ?? (sameType.length === 1 ? type : `${type}-${all.slice(0, index + 1).filter((o) => (o.type ?? 'tcp') === type).length}`);
  const listener: MutableListener = {
    name,
    type,
    host: l.host ?? defaultHost,
    port: l.port ?? DEFAULT_PORTS[type],
    proxyProtocol: l.proxyProtocol ?? false,
  };
  if (l.tls) {
    listener.tls = {
      cert: fromFile(l.tls.cert),
      key: fromFile(l.tls.key),
      ...(l.tls.ca !== undefined ? { ca: fromFile(l.tls.ca) } : {}),
      requestCert: l.tls.requestCert ?? false,
      rejectUnauthorized: l.tls.rejectUnauthorized ?? true,
    };
  }
  if (type === 'ws' || type === 'wss') listener.path = l.path ?? DEFAULT_WS_PATH;
  return listener;
}

/** --port / BIFRO_PORT: the first tcp listener gets the port; without one, a tcp listener is added. */
export function applyPort(listeners: MutableListener[], port: number, host: string): void {
  const tcp = listeners.find((l) => l.type === 'tcp');
  if (tcp) {
    tcp.port = port;
    return;
  }
  const names = new Set(listeners.map((l) => l.name));
  let name = 'tcp';
  for (let n = 2; names.has(name); n++) name = `tcp-${n}`;
  listeners.push({ name, type: 'tcp', host, port, proxyProtocol: false });
}
