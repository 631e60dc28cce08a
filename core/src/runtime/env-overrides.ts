import { LOG_LEVELS, NODE_ID_EXPECTED, NODE_ID_PATTERN } from './config-schema';
import type { ConfigIssue } from './config-errors';
import type { LogConfig } from '../base/config-types';

/**
 * The BIFRO_* environment variables that override the configuration file (see config.ts for the
 * precedence). An empty variable counts as unset.
 */
export const ENV_VARS = {
  BIFRO_CONFIG: 'configuration file (like --config); relative to the working directory',
  BIFRO_NODE_ID: `node id (${NODE_ID_EXPECTED})`,
  BIFRO_DATA_DIR: 'data directory (like --data-dir); relative to the working directory',
  BIFRO_PLUGINS_DIR: 'plugins directory (like --plugins-dir); relative to the working directory',
  BIFRO_LOG_LEVEL: `log level (${LOG_LEVELS.join(', ')})`,
  BIFRO_LOG_PRETTY: 'human-readable logs (true/false)',
  BIFRO_PORT: 'port of the first tcp listener (like --port; 0 = any free port)',
} as const;

export type EnvVarName = keyof typeof ENV_VARS;

/** Overrides read from the environment; paths are as written (config.ts resolves them against the cwd). */
export interface EnvOverrides {
  readonly file?: string;
  readonly nodeId?: string;
  readonly dataDir?: string;
  readonly pluginsDir?: string;
  readonly logLevel?: LogConfig['level'];
  readonly logPretty?: boolean;
  readonly port?: number;
}

const TRUE_WORDS = new Set(['true', '1', 'yes', 'on']);
const FALSE_WORDS = new Set(['false', '0', 'no', 'off']);

/** Parses a port written as decimal digits: 0..65535, or undefined. */
export function parsePort(text: string): number | undefined {
  if (!/^\d{1,5}$/.test(text.trim())) return undefined;
  const port = Number(text.trim());
  return port <= 65535 ? port : undefined;
}

/** Reads the BIFRO_* variables; every invalid one becomes a BIFRO_CONFIG_ENV_INVALID issue. */
export function readEnvOverrides(env: NodeJS.ProcessEnv): { overrides: EnvOverrides; issues: ConfigIssue[] } {
  const issues: ConfigIssue[] = [];
  const overrides: {
    -readonly [K in keyof EnvOverrides]: EnvOverrides[K];
  } = {};
  const get = (name: EnvVarName): string | undefined => {
    const value = env[name];
    return value === undefined || value.trim() === '' ? undefined : value;
  };
  const invalid = (name: EnvVarName, expected: string, got: string): void => {
    issues.push({
      code: 'BIFRO_CONFIG_ENV_INVALID',
      path: name,
      message: `environment variable ${name}: expected ${expected}, got ${JSON.stringify(got)}`,
    });
  };

  const file = get('BIFRO_CONFIG');
  if (file !== undefined) overrides.file = file;

  const nodeId = get('BIFRO_NODE_ID');
  if (nodeId !== undefined) {
    if (new RegExp(NODE_ID_PATTERN).test(nodeId)) overrides.nodeId = nodeId;
    else invalid('BIFRO_NODE_ID', NODE_ID_EXPECTED, nodeId);
  }

  const dataDir = get('BIFRO_DATA_DIR');
  if (dataDir !== undefined) overrides.dataDir = dataDir;
  const pluginsDir = get('BIFRO_PLUGINS_DIR');
  if (pluginsDir !== undefined) overrides.pluginsDir = pluginsDir;

  const level = get('BIFRO_LOG_LEVEL');
  if (level !== undefined) {
    const normalized = level.trim().toLowerCase();
    const match = LOG_LEVELS.find((l) => l === normalized);
    if (match) overrides.logLevel = match;
    else invalid('BIFRO_LOG_LEVEL', `one of ${LOG_LEVELS.join(', ')}`, level);
  }

  const pretty = get('BIFRO_LOG_PRETTY');
  if (pretty !== undefined) {
    const word = pretty.trim().toLowerCase();
    if (TRUE_WORDS.has(word)) overrides.logPretty = true;
    else if (FALSE_WORDS.has(word)) overrides.logPretty = false;
    else invalid('BIFRO_LOG_PRETTY', 'true or false', pretty);
  }

  const port = get('BIFRO_PORT');
  if (port !== undefined) {
    const parsed = parsePort(port);
    if (parsed !== undefined) overrides.port = parsed;
    else invalid('BIFRO_PORT', 'integer 0..65535', port);
  }

  return { overrides, issues };
}
