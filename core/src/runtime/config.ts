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
import { constants as fsConstants, promises as fs } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import Ajv, { type ErrorObject } from 'ajv';
import { LineCounter, isMap, isScalar, isSeq, parseDocument, type Document, type Node as YamlNode } from 'yaml';
import type { BrokerConfig, ListenerConfig, PluginRef, PluginsConfig, SecurityConfig } from './config-types';
import { ConfigError, type ConfigErrorCode, type ConfigIssue } from './config-errors';
import { CONFIG_SCHEMA, MAX_WORKERS, NODE_ID_PATTERN, type RawConfig, type RawListener, type RawPluginRef } from './config-schema';
import { readEnvOverrides } from './env-overrides';
import { isLoopbackHost } from '../security/secure-defaults';

export { ConfigError } from './config-errors';
export type { ConfigIssue } from './config-errors';

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

/** Where the broker looks for its configuration when none is named. */
export const DEFAULT_CONFIG_FILE = path.join('conf', 'bifro.yml');
/** The port a listener gets when it names none. */
export const DEFAULT_PORTS: Readonly<Record<ListenerConfig['type'], number>> = { tcp: 1883, tls: 8883, ws: 8083, wss: 8084 };
/** The host a listener binds when it names none and an auth plugin is configured. */
export const DEFAULT_HOST = '0.0.0.0';
/** The host a listener binds when it names none and no auth plugin is configured (dev-only allow-all auth). */
export const DEFAULT_ANONYMOUS_HOST = '127.0.0.1';
/** `security` when the file says nothing (docs/security.md). */
export const DEFAULT_SECURITY: SecurityConfig = {
  allowAnonymousOnPublicInterfaces: false,
  connectionRate: { perAddressPerSecond: 1000, burst: 2000, maxTrackedAddresses: 100_000 },
  flapping: { maxDisconnects: 15, windowSeconds: 60, banSeconds: 300, maxTrackedClients: 100_000 },
};
export const DEFAULT_WS_PATH = '/mqtt';
export const DEFAULT_INIT_TIMEOUT_MS = 10_000;
export const DEFAULT_CALL_TIMEOUT_MS = 5_000;
export const DEFAULT_CONNECT_TIMEOUT_MS = 10_000;
export const DEFAULT_MAX_CLIENT_ID_LENGTH = 65_535;
/**
 * mqtt.maxKeepAliveSeconds: one hour. Above AWS IoT Core's 1200 s and Azure IoT Hub's 1767 s, so
 * clients tuned for those keep their value, far below MQTT's 65535 s (18 h) so a silent or
 * keep-alive-0 connection is dropped within 90 minutes (docs/security.md § Time limits).
 */
export const DEFAULT_MAX_KEEP_ALIVE_SECONDS = 3600;
/** mqtt.packetTimeoutMs: a packet must be complete 30 s after its first byte (4 MiB at ~1.1 Mbit/s). */
export const DEFAULT_PACKET_TIMEOUT_MS = 30_000;
/**
 * mqtt.maxQueuedBytesPerConnection: twice the default largest payload (MaxUserPayloadBytes, 4 MiB),
 * so the socket's buffer (writeHighWaterBytes, 1 MiB, plus the packet written under it) and one
 * more message of the largest size fit; two stalled subscribers then hold ~20 MiB, not ~1 GB.
 */
export const DEFAULT_MAX_QUEUED_BYTES_PER_CONNECTION = 8 * 1024 * 1024;

/** The node id used when none is configured: the host name made safe, or "bifro-1". */
export function defaultNodeId(): string {
  const host = os
    .hostname()
    .replace(/[^A-Za-z0-9_-]+/g, '-')
    .replace(/^-+|-+$/g, '')
    .slice(0, 64);
  return host && new RegExp(NODE_ID_PATTERN).test(host) ? host : 'bifro-1';
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
    ...(await checkTlsFiles(config.listeners, where)),
  ];
  if (late.length > 0) throw new ConfigError(late, file);
  return config;
}

// ---------------------------------------------------------------- file

async function locateFile(
  explicit: string | undefined,
  fromEnv: string | undefined,
  cwd: string,
  issues: ConfigIssue[],
): Promise<string | undefined> {
  const named = explicit ?? fromEnv;
  if (named !== undefined) {
    const file = path.resolve(cwd, named);
    if (!(await exists(file))) {
      const origin = explicit !== undefined ? '--config' : 'BIFRO_CONFIG';
      issues.push({
        code: 'BIFRO_CONFIG_NOT_FOUND',
        path: origin,
        message: `configuration file not found: ${file} (given by ${origin})`,
      });
      throw new ConfigError(issues, file);
    }
    return file;
  }
  const conventional = path.join(cwd, DEFAULT_CONFIG_FILE);
  return (await exists(conventional)) ? conventional : undefined;
}

/** Whether a file or directory exists. */
export async function exists(file: string): Promise<boolean> {
  try {
    await fs.stat(file);
    return true;
  } catch {
    return false;
  }
}

interface SourceMap {
  readonly doc: Document;
  readonly lines: LineCounter;
  readonly text: string;
}

async function parseFile(file: string, issues: ConfigIssue[]): Promise<{ raw: RawConfig; source: SourceMap }> {
  let text: string;
  try {
    text = await fs.readFile(file, 'utf8');
  } catch (err) {
    const reason = (err as NodeJS.ErrnoException).code ?? String(err);
    issues.push({ code: 'BIFRO_CONFIG_READ', path: file, message: `cannot read configuration file ${file}: ${reason}` });
    throw new ConfigError(issues, file);
  }
  const lines = new LineCounter();
  const doc = parseDocument(text, { lineCounter: lines, prettyErrors: false, uniqueKeys: true });
  const parseIssues: ConfigIssue[] = doc.errors.map((err) => {
    const pos = lines.linePos(err.pos[0]);
    const sourceLine = (text.split(/\r?\n/)[pos.line - 1] ?? '').trim();
    const near = sourceLine ? ` (near ${JSON.stringify(sourceLine.slice(0, 60))})` : '';
    return {
      code: 'BIFRO_CONFIG_PARSE',
      path: '',
      message: `${file}:${pos.line}:${pos.col}: YAML syntax error: ${firstLine(err.message)}${near}`,
      line: pos.line,
      column: pos.col,
    };
  });
  if (parseIssues.length > 0) throw new ConfigError([...parseIssues, ...issues], file);
  let raw: unknown;
  try {
    raw = doc.toJS({ maxAliasCount: 100 });
  } catch (err) {
    issues.unshift({ code: 'BIFRO_CONFIG_PARSE', path: '', message: `${file}: YAML error: ${firstLine(String(err))}` });
    throw new ConfigError(issues, file);
  }
  // Validated against the schema right after; typed here so the schema check reads naturally.
  return { raw: (raw ?? {}) as RawConfig, source: { doc, lines, text } };
}

function firstLine(text: string): string {
  return text.split('\n')[0]!.trim();
}

// ---------------------------------------------------------------- positions

/** Turns a key path into `file:line:col` using the YAML document's source ranges. */
class Locator {
  constructor(
    readonly file: string | undefined,
    private readonly source: SourceMap | undefined,
  ) {}

  /** `file:line:col: ` prefix for the value at `segments` (or the key itself when `asKey`), as close as the document allows. */
  position(segments: readonly (string | number)[], asKey = false): { prefix: string; line?: number; column?: number } {
    if (!this.file) return { prefix: '' };
    if (!this.source) return { prefix: `${this.file}: ` };
    let node: unknown = this.source.doc.contents;
    let offset: number | undefined = rangeStart(node);
    for (let i = 0; i < segments.length; i++) {
      const seg = segments[i]!;
      const last = i === segments.length - 1;
      if (isMap(node)) {
        const pair = node.items.find((p) => isScalar(p.key) && String(p.key.value) === String(seg));
        if (!pair) break;
        if (last && asKey) {
          offset = rangeStart(pair.key) ?? offset;
          break;
        }
        node = pair.value;
      } else if (isSeq(node)) {
        const item = node.items[Number(seg)];
        if (item === undefined) break;
        node = item;
      } else {
        break;
      }
      offset = rangeStart(node) ?? offset;
    }
    if (offset === undefined) return { prefix: `${this.file}: ` };
    const pos = this.source.lines.linePos(offset);
    return { prefix: `${this.file}:${pos.line}:${pos.col}: `, line: pos.line, column: pos.col };
  }

  issue(code: ConfigErrorCode, segments: readonly (string | number)[], text: string, asKey = false): ConfigIssue {
    const keyPath = formatKeyPath(segments);
    const pos = this.position(segments, asKey);
    return {
      code,
      path: keyPath,
      message: `${pos.prefix}${keyPath}: ${text}`,
      ...(pos.line !== undefined ? { line: pos.line, column: pos.column } : {}),
    };
  }
}

function rangeStart(node: unknown): number | undefined {
  const range = (node as YamlNode | null | undefined)?.range;
  return Array.isArray(range) ? range[0] : undefined;
}

/** `['listeners', 0, 'port']` → `listeners[0].port`. */
export function formatKeyPath(segments: readonly (string | number)[]): string {
  let out = '';
  for (const seg of segments) {
    if (typeof seg === 'number' || /^\d+$/.test(seg)) out += `[${seg}]`;
    else if (/^[A-Za-z_$][\w$]*$/.test(seg)) out += out ? `.${seg}` : seg;
    else out += `[${JSON.stringify(seg)}]`;
  }
  return out || '(top level)';
}

function pointerToSegments(pointer: string): (string | number)[] {
  if (!pointer) return [];
  return pointer
    .slice(1)
    .split('/')
    .map((s) => s.replace(/~1/g, '/').replace(/~0/g, '~'))
    .map((s) => (/^\d+$/.test(s) ? Number(s) : s));
}

// ---------------------------------------------------------------- schema

const ajv = new Ajv({ allErrors: true, verbose: true, strict: true, allowUnionTypes: true });
ajv.addVocabulary(['expected']);
const validateSchema = ajv.compile<RawConfig>(CONFIG_SCHEMA);

interface SchemaNode {
  readonly expected?: string;
  readonly properties?: Readonly<Record<string, SchemaNode>>;
}

function validateRaw(raw: RawConfig, where: Locator): ConfigIssue[] {
  if (validateSchema(raw)) return [];
  const seen = new Set<string>();
  const issues: ConfigIssue[] = [];
  for (const err of validateSchema.errors ?? []) {
    const issue = schemaIssue(err, where);
    const key = `${issue.code} ${issue.path}`;
    if (seen.has(key)) continue;
    seen.add(key);
    issues.push(issue);
  }
  return issues;
}

function byPosition(a: ConfigIssue, b: ConfigIssue): number {
  return (a.line ?? 0) - (b.line ?? 0) || (a.column ?? 0) - (b.column ?? 0);
}

function schemaIssue(err: ErrorObject, where: Locator): ConfigIssue {
  const segments = pointerToSegments(err.instancePath);
  const parent = err.parentSchema as SchemaNode | undefined;
  if (err.keyword === 'additionalProperties') {
    const key = String((err.params as { additionalProperty: string }).additionalProperty);
    const allowed = Object.keys(parent?.properties ?? {});
    const hint = closest(key, allowed);
    return where.issue(
      'BIFRO_CONFIG_UNKNOWN_KEY',
      [...segments, key],
      `unknown key; expected one of ${allowed.join(', ')}${hint ? ` (did you mean "${hint}"?)` : ''}`,
      true,
    );
  }
  if (err.keyword === 'required') {
    const key = String((err.params as { missingProperty: string }).missingProperty);
    const expected = parent?.properties?.[key]?.expected;
    const issue = where.issue('BIFRO_CONFIG_MISSING_KEY', [...segments, key], `missing${expected ? `; expected ${expected}` : ''}`);
    return issue;
  }
  const expected = parent?.expected ?? err.message ?? 'a valid value';
  return where.issue('BIFRO_CONFIG_INVALID_VALUE', segments, `expected ${expected}, got ${describeValue(err.data)}`);
}

/** How a wrong value is shown: strings quoted, collections named. */
export function describeValue(value: unknown): string {
  if (value === null) return 'null';
  if (Array.isArray(value)) return 'a list';
  if (typeof value === 'object') return 'a map';
  if (typeof value === 'string') return JSON.stringify(value.length > 60 ? `${value.slice(0, 57)}...` : value);
  return String(value);
}

/** The allowed key nearest to a misspelt one (edit distance ≤ 2, or a case-insensitive match). */
function closest(key: string, allowed: readonly string[]): string | undefined {
  let best: string | undefined;
  let bestDistance = 3;
  for (const candidate of allowed) {
    if (candidate.toLowerCase() === key.toLowerCase()) return candidate;
    const d = editDistance(key.toLowerCase(), candidate.toLowerCase());
    if (d < bestDistance) {
      best = candidate;
      bestDistance = d;
    }
  }
  return best;
}

function editDistance(a: string, b: string): number {
  const row = Array.from({ length: b.length + 1 }, (_, j) => j);
  for (let i = 1; i <= a.length; i++) {
    let diagonal = row[0]!;
    row[0] = i;
    for (let j = 1; j <= b.length; j++) {
      const above = row[j]!;
      row[j] = Math.min(above + 1, row[j - 1]! + 1, diagonal + (a[i - 1] === b[j - 1] ? 0 : 1));
      diagonal = above;
    }
  }
  return row[b.length]!;
}

// ---------------------------------------------------------------- listener rules beyond the schema

function isRecord(value: unknown): value is Record<string, unknown> {
  return typeof value === 'object' && value !== null && !Array.isArray(value);
}

/** tls/wss need a tls block; tls only for tls/wss; path only for ws/wss. Runs on raw (maybe invalid) input. */
function checkListenerKinds(raw: RawConfig, where: Locator): ConfigIssue[] {
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

function checkDuplicateListeners(listeners: readonly ListenerConfig[], where: Locator): ConfigIssue[] {
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
function checkWorkerListeners(config: BrokerConfig, fromOption: boolean, where: Locator): ConfigIssue[] {
  const workers = config.workers ?? 1;
  if (workers <= 1) return [];
  const source = fromOption ? ' (--workers)' : '';
  return config.listeners.flatMap((listener, i) =>
    listener.type === 'tcp'
      ? []
      : [
          where.issue(
            'BIFRO_CONFIG_WORKERS_LISTENER',
            ['listeners', i, 'type'],
            `a ${listener.type} listener ("${listener.name}") cannot be used with workers: ${workers}${source}; only tcp connections can be handed between worker processes (use workers: 1, or a TLS/WebSocket proxy in front of a tcp listener; docs/multicore.md)`,
          ),
        ],
  );
}

/**
 * Without an auth plugin every client is accepted (dev-only allow-all): such a broker listens on
 * loopback only, unless `security.allowAnonymousOnPublicInterfaces` opts in.
 */
function checkAnonymousExposure(config: BrokerConfig, where: Locator): ConfigIssue[] {
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

async function checkTlsFiles(listeners: readonly ListenerConfig[], where: Locator): Promise<ConfigIssue[]> {
  const issues: ConfigIssue[] = [];
  for (const [i, listener] of listeners.entries()) {
    if (!listener.tls) continue;
    for (const key of ['cert', 'key', 'ca'] as const) {
      const file = listener.tls[key];
      if (file === undefined) continue;
      try {
        await fs.access(file, fsConstants.R_OK);
      } catch (err) {
        const reason = (err as NodeJS.ErrnoException).code ?? String(err);
        issues.push(where.issue('BIFRO_CONFIG_TLS_FILE', ['listeners', i, 'tls', key], `cannot read ${file} (${reason})`));
      }
    }
  }
  return issues;
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
  const pluginsDir = pick(overrides.pluginsDir, env.pluginsDir, raw.pluginsDir, 'plugins');
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
  };
}

type MutableListener = { -readonly [K in keyof ListenerConfig]: ListenerConfig[K] };

function buildSecurity(raw: RawConfig['security']): SecurityConfig {
  const d = DEFAULT_SECURITY;
  const rate = raw?.connectionRate ?? {};
  const flap = raw?.flapping ?? {};
  return {
    allowAnonymousOnPublicInterfaces: raw?.allowAnonymousOnPublicInterfaces ?? d.allowAnonymousOnPublicInterfaces,
    connectionRate: {
      perAddressPerSecond: rate.perAddressPerSecond ?? d.connectionRate.perAddressPerSecond,
      burst: rate.burst ?? d.connectionRate.burst,
      maxTrackedAddresses: rate.maxTrackedAddresses ?? d.connectionRate.maxTrackedAddresses,
    },
    flapping: {
      maxDisconnects: flap.maxDisconnects ?? d.flapping.maxDisconnects,
      windowSeconds: flap.windowSeconds ?? d.flapping.windowSeconds,
      banSeconds: flap.banSeconds ?? d.flapping.banSeconds,
      maxTrackedClients: flap.maxTrackedClients ?? d.flapping.maxTrackedClients,
    },
  };
}

function buildListener(
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
function applyPort(listeners: MutableListener[], port: number, host: string): void {
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
