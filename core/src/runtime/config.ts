/**
 * Loading the broker configuration (conf/bifro.yml) into a {@link BrokerConfig}.
 *
 * Where the file comes from: `--config F` (the `file` option), else the BIFRO_CONFIG variable, else
 * `<cwd>/conf/bifro.yml` when it exists, else built-in defaults only (`file` is then undefined).
 * A file named by --config or BIFRO_CONFIG that does not exist is an error.
 *
 * Precedence, highest first: command-line overrides > environment > file > built-in defaults.
 *
 * Environment variables (an empty variable counts as unset):
 *   BIFRO_CONFIG       the configuration file, like --config
 *   BIFRO_NODE_ID      node id: 1-64 letters, digits, "_" or "-"
 *   BIFRO_DATA_DIR     data directory, like --data-dir
 *   BIFRO_PLUGINS_DIR  plugins directory, like --plugins-dir
 *   BIFRO_LOG_LEVEL    fatal | error | warn | info | debug | trace | silent
 *   BIFRO_LOG_PRETTY   true | false (also 1/0, yes/no, on/off)
 *   BIFRO_PORT         port of the first tcp listener, like --port (0 = any free port)
 * An invalid value is a BIFRO_CONFIG_ENV_INVALID error naming the variable.
 *
 * Paths: relative paths written in the file resolve against the file's directory; relative paths
 * from the environment or the command line resolve against the working directory. `pidFile`
 * defaults to `<dataDir>/bifro.pid`, following a dataDir changed by the environment or --data-dir.
 *
 * `--port N` / BIFRO_PORT set the port of the first tcp listener, adding a tcp listener named
 * "tcp" on the default host when the configuration has none.
 *
 * A listener without `host` binds 0.0.0.0 when an auth plugin is configured, and 127.0.0.1 when
 * none is (the dev-only allow-all auth); a non-loopback host without an auth plugin is an error
 * (BIFRO_CONFIG_ANONYMOUS_EXPOSED) unless `security.allowAnonymousOnPublicInterfaces` is true.
 *
 * Every problem is collected (schema, listeners, environment, overrides) and thrown together as
 * one {@link ConfigError}; each message names the file and line, the key path and what was expected.
 */
import path from 'node:path';
import {
  DEFAULT_METRICS,
  type ApiConfig,
  type BrokerConfig,
  type MetricsConfig,
  type PluginRef,
  type PluginsConfig,
  type SecurityConfig,
} from '../base/config-types';
import { ConfigError, type ConfigIssue } from './config-errors';
import { MAX_WORKERS, type RawConfig, type RawListener, type RawPluginRef } from './config-schema';
import { readEnvOverrides } from './env-overrides';
import {
  DEFAULT_ANONYMOUS_HOST,
  DEFAULT_API_AUTH_FAILURES_PER_MINUTE,
  DEFAULT_API_HOST,
  DEFAULT_API_PORT,
  DEFAULT_CALL_TIMEOUT_MS,
  DEFAULT_CONNECT_TIMEOUT_MS,
  DEFAULT_HOST,
  DEFAULT_INIT_TIMEOUT_MS,
  DEFAULT_MAX_CLIENT_ID_LENGTH,
  DEFAULT_MAX_KEEP_ALIVE_SECONDS,
  DEFAULT_MAX_QUEUED_BYTES_PER_CONNECTION,
  DEFAULT_PACKET_TIMEOUT_MS,
  DEFAULT_PLUGINS_SUBDIR,
  DEFAULT_SECURITY,
  DEFAULT_SYS_INTERVAL_SECONDS,
  defaultNodeId,
} from './config-defaults';
import { Locator, byPosition, describeValue, locateFile, parseFile, validateRaw, type SourceMap } from './config-file';
import {
  applyPort,
  buildListener,
  checkAnonymousExposure,
  checkApiTokens,
  checkDuplicateListeners,
  checkListenerKinds,
  checkTlsFiles,
  checkWorkerListeners,
} from './config-listeners';
import { buildCluster, checkCluster } from './config-cluster';

export { ConfigError } from './config-errors';
export type { ConfigIssue } from './config-errors';
export * from './config-defaults';
export { describeValue, exists, formatKeyPath } from './config-file';

/** Values given on the command line; they win over the environment and the file. */
export interface ConfigOverrides {
  /** Port of the first tcp listener (one is added when there is none); 0 = any free port. */
  readonly port?: number;
  /** Relative to `cwd`. */
  readonly dataDir?: string;
  /** Relative to `cwd`. */
  readonly pluginsDir?: string;
  /** `--workers`: worker processes (docs/multicore.md). */
  readonly workers?: number;
}

export interface LoadConfigOptions {
  /** `--config`: a file that must exist; relative to `cwd`. */
  readonly file?: string;
  readonly cwd: string;
  readonly env: NodeJS.ProcessEnv;
  readonly overrides?: ConfigOverrides;
}

/** Loads, validates and completes the configuration. Throws a {@link ConfigError} listing every problem. */
export async function loadConfig(opts: LoadConfigOptions): Promise<BrokerConfig> {
  const cwd = path.resolve(opts.cwd);
  const { overrides: env, issues } = readEnvOverrides(opts.env);
  const overrides = opts.overrides ?? {};
  issues.push(...checkOverrides(overrides));

  const file = await locateFile(opts.file, env.file, cwd, issues);
  let raw: RawConfig = {};
  let source: SourceMap | undefined;
  if (file !== undefined) {
    const parsed = await parseFile(file, issues);
    raw = parsed.raw;
    source = parsed.source;
  }
  const where = new Locator(file, source);
  if (file !== undefined) {
    const fileIssues = [...validateRaw(raw, where), ...checkListenerKinds(raw, where)];
    issues.unshift(...fileIssues.sort(byPosition));
  }
  if (issues.length > 0) throw new ConfigError(issues, file);

  const configDir = file !== undefined ? path.dirname(file) : cwd;
  const config = build(raw, { cwd, configDir, file, env, overrides });
  const late = [
    ...checkDuplicateListeners(config.listeners, where),
    ...checkWorkerListeners(config, overrides.workers !== undefined, where),
    ...checkAnonymousExposure(config, where),
    ...checkApiTokens(config, where),
    ...checkCluster(config, overrides.workers !== undefined, where),
    ...(await checkTlsFiles(config, where)),
  ];
  if (late.length > 0) throw new ConfigError(late, file);
  return config;
}

function checkOverrides(overrides: ConfigOverrides): ConfigIssue[] {
  const issues: ConfigIssue[] = [];
  const { port, dataDir, pluginsDir, workers } = overrides;
  if (workers !== undefined && !(Number.isInteger(workers) && workers >= 1 && workers <= MAX_WORKERS)) {
    issues.push({
      code: 'BIFRO_CONFIG_OVERRIDE_INVALID',
      path: '--workers',
      message: `--workers: expected integer 1..${MAX_WORKERS}, got ${describeValue(workers)}`,
    });
  }
  if (port !== undefined && !(Number.isInteger(port) && port >= 0 && port <= 65535)) {
    issues.push({
      code: 'BIFRO_CONFIG_OVERRIDE_INVALID',
      path: '--port',
      message: `--port: expected integer 0..65535, got ${describeValue(port)}`,
    });
  }
  for (const [name, value] of [
    ['--data-dir', dataDir],
    ['--plugins-dir', pluginsDir],
  ] as const) {
    if (value !== undefined && value.trim() === '') {
      issues.push({ code: 'BIFRO_CONFIG_OVERRIDE_INVALID', path: name, message: `${name}: expected a non-empty path, got ""` });
    }
  }
  return issues;
}

// ---------------------------------------------------------------- defaults

interface BuildContext {
  readonly cwd: string;
  readonly configDir: string;
  readonly file: string | undefined;
  readonly env: ReturnType<typeof readEnvOverrides>['overrides'];
  readonly overrides: ConfigOverrides;
}

/** Applies defaults, environment and overrides to a schema-valid raw config. */
function build(raw: RawConfig, ctx: BuildContext): BrokerConfig {
  const { cwd, configDir, env, overrides } = ctx;
  const fromFile = (p: string): string => path.resolve(configDir, p);
  const fromCwd = (p: string): string => path.resolve(cwd, p);
  const pick = (override: string | undefined, envValue: string | undefined, fileValue: string | undefined, fallback: string): string => {
    if (override !== undefined) return fromCwd(override);
    if (envValue !== undefined) return fromCwd(envValue);
    return fromFile(fileValue ?? fallback);
  };

  const dataDir = pick(overrides.dataDir, env.dataDir, raw.dataDir, 'data');
  const pluginsDir = pick(overrides.pluginsDir, env.pluginsDir, raw.pluginsDir, path.join(dataDir, DEFAULT_PLUGINS_SUBDIR));
  const pidFile = raw.pidFile !== undefined ? fromFile(raw.pidFile) : path.join(dataDir, 'bifro.pid');
  const workers = overrides.workers ?? raw.workers;

  const rawListeners: readonly RawListener[] = raw.listeners ?? [{ name: 'tcp', type: 'tcp' }];
  // No auth plugin: the dev-only allow-all auth, reachable from this machine only (docs/security.md).
  const defaultHost = (raw.plugins?.auth ?? []).length === 0 ? DEFAULT_ANONYMOUS_HOST : DEFAULT_HOST;
  const listeners = rawListeners.map((l, i) => buildListener(l, i, rawListeners, fromFile, defaultHost));
  const port = overrides.port ?? env.port;
  if (port !== undefined) applyPort(listeners, port, defaultHost);

  const plugins = raw.plugins ?? {};
  const pluginsConfig: PluginsConfig = {
    packages: [...(plugins.packages ?? [])],
    initTimeoutMs: plugins.initTimeoutMs ?? DEFAULT_INIT_TIMEOUT_MS,
    callTimeoutMs: plugins.callTimeoutMs ?? DEFAULT_CALL_TIMEOUT_MS,
    auth: (plugins.auth ?? []).map(pluginRef),
    acl: (plugins.acl ?? []).map(pluginRef),
    events: (plugins.events ?? []).map(pluginRef),
    ...optionalRef('balancer', plugins.balancer),
    ...optionalRef('settings', plugins.settings),
    ...optionalRef('throttler', plugins.throttler),
    ...optionalRef('storage', plugins.storage),
  };

  const level = env.logLevel ?? raw.log?.level ?? 'info';
  const pretty = env.logPretty ?? raw.log?.pretty;

  return {
    file: ctx.file,
    configDir,
    nodeId: env.nodeId ?? raw.nodeId ?? defaultNodeId(),
    dataDir,
    pluginsDir,
    pidFile,
    ...(workers !== undefined ? { workers } : {}),
    listeners,
    plugins: pluginsConfig,
    mqtt: {
      connectTimeoutMs: raw.mqtt?.connectTimeoutMs ?? DEFAULT_CONNECT_TIMEOUT_MS,
      maxClientIdLength: raw.mqtt?.maxClientIdLength ?? DEFAULT_MAX_CLIENT_ID_LENGTH,
      writeHighWaterBytes: raw.mqtt?.writeHighWaterBytes ?? 1048576,
      slowConsumerTimeoutMs: raw.mqtt?.slowConsumerTimeoutMs ?? 30000,
      maxQueuedBytesPerConnection: raw.mqtt?.maxQueuedBytesPerConnection ?? DEFAULT_MAX_QUEUED_BYTES_PER_CONNECTION,
      redirectCheckIntervalMs: raw.mqtt?.redirectCheckIntervalMs ?? 60000,
      maxKeepAliveSeconds: raw.mqtt?.maxKeepAliveSeconds ?? DEFAULT_MAX_KEEP_ALIVE_SECONDS,
      packetTimeoutMs: raw.mqtt?.packetTimeoutMs ?? DEFAULT_PACKET_TIMEOUT_MS,
    },
    security: buildSecurity(raw.security),
    log: pretty === undefined ? { level } : { level, pretty },
    ...(raw.api !== undefined && raw.api !== null ? { api: buildApi(raw.api, fromFile) } : {}),
    ...(raw.cluster !== undefined && raw.cluster !== null ? { cluster: buildCluster(raw.cluster, fromFile) } : {}),
    sysInterval: raw.sysInterval ?? DEFAULT_SYS_INTERVAL_SECONDS,
    ...(raw.metrics !== undefined && raw.metrics !== null ? { metrics: buildMetrics(raw.metrics) } : {}),
  };
}

function buildMetrics(raw: NonNullable<RawConfig['metrics']>): MetricsConfig {
  const labels = raw.tenantLabels ?? {};
  return {
    tenantLabels: {
      top: labels.top ?? DEFAULT_METRICS.tenantLabels.top,
      include: [...(labels.include ?? DEFAULT_METRICS.tenantLabels.include)],
    },
  };
}

function buildApi(raw: NonNullable<RawConfig['api']>, fromFile: (p: string) => string): ApiConfig {
  const tls = raw.tls;
  return {
    host: raw.host ?? DEFAULT_API_HOST,
    port: raw.port ?? DEFAULT_API_PORT,
    tokens: (raw.tokens ?? []).map((t) => ({ name: t.name, hash: t.hash, ...(t.tenant !== undefined ? { tenant: t.tenant } : {}) })),
    ...(tls !== undefined
      ? { tls: { cert: fromFile(tls.cert), key: fromFile(tls.key), ...(tls.ca !== undefined ? { ca: fromFile(tls.ca) } : {}) } }
      : {}),
    authFailuresPerMinute: raw.authFailuresPerMinute ?? DEFAULT_API_AUTH_FAILURES_PER_MINUTE,
    docsPage: raw.docsPage ?? true,
    dashboard: raw.dashboard ?? true,
  };
}

function buildSecurity(raw: RawConfig['security']): SecurityConfig {
  const d = DEFAULT_SECURITY;
  const rate = raw?.connectionRate ?? {};
  const flap = raw?.flapping ?? {};
  const overload = raw?.overload ?? {};
  const login = raw?.loginFailures ?? {};
  return {
    allowAnonymousOnPublicInterfaces: raw?.allowAnonymousOnPublicInterfaces ?? d.allowAnonymousOnPublicInterfaces,
    connectionRate: {
      perAddressPerSecond: rate.perAddressPerSecond ?? d.connectionRate.perAddressPerSecond,
      burst: rate.burst ?? d.connectionRate.burst,
      maxTrackedAddresses: rate.maxTrackedAddresses ?? d.connectionRate.maxTrackedAddresses,
    },
    overload: {
      maxEventLoopLagMs: overload.maxEventLoopLagMs ?? d.overload.maxEventLoopLagMs,
      maxHeapUsedPercent: overload.maxHeapUsedPercent ?? d.overload.maxHeapUsedPercent,
    },
    flapping: {
      maxDisconnects: flap.maxDisconnects ?? d.flapping.maxDisconnects,
      windowSeconds: flap.windowSeconds ?? d.flapping.windowSeconds,
      banSeconds: flap.banSeconds ?? d.flapping.banSeconds,
      maxTrackedClients: flap.maxTrackedClients ?? d.flapping.maxTrackedClients,
    },
    loginFailures: {
      perLogin: login.perLogin ?? d.loginFailures.perLogin,
      perAddress: login.perAddress ?? d.loginFailures.perAddress,
      windowSeconds: login.windowSeconds ?? d.loginFailures.windowSeconds,
      backoffMs: login.backoffMs ?? d.loginFailures.backoffMs,
      maxBackoffMs: login.maxBackoffMs ?? d.loginFailures.maxBackoffMs,
      maxTrackedKeys: login.maxTrackedKeys ?? d.loginFailures.maxTrackedKeys,
    },
  };
}

function pluginRef(ref: RawPluginRef): PluginRef {
  if (typeof ref === 'string') return { use: ref, required: true, options: {} };
  return { use: ref.use, required: ref.required ?? true, options: { ...(ref.options ?? {}) } };
}

function optionalRef<K extends 'balancer' | 'settings' | 'throttler' | 'storage'>(
  kind: K,
  ref: RawPluginRef | null | undefined,
): Partial<Record<K, PluginRef>> {
  if (ref === null || ref === undefined) return {};
  return { [kind]: pluginRef(ref) } as Partial<Record<K, PluginRef>>;
}
