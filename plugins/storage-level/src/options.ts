import { isAbsolute, join, resolve } from 'node:path';
import type { PluginContext } from '@bifro/spi';
import { DEFAULTS, type LevelStorageOptions } from './level-storage';
import { StorageError } from './storage-errors';

/** The folder under the broker's data directory used when no `path` is configured. */
export const DEFAULT_DIR_NAME = 'storage-level';

const KNOWN = ['path', 'sync', 'groupCommitMs', 'maxBatchOps', 'maxCachedSessions'];

function invalid(message: string): StorageError {
  return new StorageError('BIFRO_STORAGE_OPTIONS_INVALID', `@bifro/plugin-storage-level: ${message}`);
}

function integer(options: Readonly<Record<string, unknown>>, name: string, min: number, max: number): number | undefined {
  const v = options[name];
  if (v === undefined) return undefined;
  if (typeof v !== 'number' || !Number.isInteger(v) || v < min || v > max)
    throw invalid(`option \`${name}\` must be an integer from ${min} to ${max}, got ${JSON.stringify(v)}`);
  return v;
}

/**
 * The {@link LevelStorageOptions} of a plugin context: `path` defaults to
 * `<dataDir>/storage-level`, and a relative `path` is resolved against the config file's folder.
 * Unknown options and wrong types are refused (BIFRO_STORAGE_OPTIONS_INVALID).
 */
export function resolveOptions(ctx: PluginContext): LevelStorageOptions {
  const o = ctx.options;
  const unknown = Object.keys(o).filter((k) => !KNOWN.includes(k));
  if (unknown.length > 0) throw invalid(`unknown option(s) ${unknown.map((k) => `\`${k}\``).join(', ')}; known: ${KNOWN.join(', ')}`);
  if (o.path !== undefined && (typeof o.path !== 'string' || o.path.length === 0))
    throw invalid(`option \`path\` must be a non-empty string, got ${JSON.stringify(o.path)}`);
  if (o.sync !== undefined && typeof o.sync !== 'boolean')
    throw invalid(`option \`sync\` must be true or false, got ${JSON.stringify(o.sync)}`);
  const configured = o.path as string | undefined;
  const path =
    configured === undefined
      ? join(ctx.dataDir, DEFAULT_DIR_NAME)
      : isAbsolute(configured)
        ? configured
        : resolve(ctx.configDir, configured);
  return {
    path,
    sync: (o.sync as boolean | undefined) ?? DEFAULTS.sync,
    groupCommitMs: integer(o, 'groupCommitMs', 0, 1000) ?? DEFAULTS.groupCommitMs,
    maxBatchOps: integer(o, 'maxBatchOps', 1, 10_000_000) ?? DEFAULTS.maxBatchOps,
    maxCachedSessions: integer(o, 'maxCachedSessions', 0, 100_000_000) ?? DEFAULTS.maxCachedSessions,
    logger: ctx.logger,
  };
}
