import * as path from 'node:path';
import { AclFileError, PLUGIN_NAME } from './errors';

/** What the plugin answers when its rules do not decide: `defer` to the next ACL plugin, or decide. */
export type Otherwise = 'defer' | 'deny' | 'grant';

/** Options of the plugin, after defaults and checks. */
export interface AclFileOptions {
  /** Absolute path of the ACL file. */
  readonly file: string;
  /** The answer for a publish or subscribe no rule decides. */
  readonly otherwise: Otherwise;
  /** The answer for `connect` (the file has no connect rules). */
  readonly connect: 'grant' | 'defer';
  /** The answer for `unsubscribe` (the file has no unsubscribe rules). */
  readonly unsubscribe: 'grant' | 'defer';
  /** Milliseconds between two `stat` checks of the file (fallback of `watch`). */
  readonly pollMs: number;
  /** Whether to listen to `fs.watch` events on the file's folder besides polling. */
  readonly watch: boolean;
  /** Quiet time after the last change seen before the file is read. */
  readonly debounceMs: number;
}

/** Default of the `file` option, resolved against the broker config folder. */
export const DEFAULT_FILE = 'acl.conf';
export const DEFAULT_POLL_MS = 500;
/** Bounds of `pollMs`: a change applies within 2 s even when only polling sees it. */
export const MIN_POLL_MS = 10;
export const MAX_POLL_MS = 1800;
export const DEBOUNCE_MS = 100;

const KNOWN = ['file', 'otherwise', 'connect', 'unsubscribe', 'pollMs', 'watch'];

function invalid(message: string): AclFileError {
  return new AclFileError('BIFRO_ACL_FILE_OPTIONS_INVALID', `${PLUGIN_NAME}: ${message}`);
}

function oneOf<T extends string>(options: Readonly<Record<string, unknown>>, key: string, values: readonly T[], dflt: T): T {
  const value = options[key] ?? dflt;
  if (typeof value !== 'string' || !(values as readonly string[]).includes(value))
    throw invalid(`options.${key} must be one of ${values.map((v) => `"${v}"`).join(', ')} (got ${JSON.stringify(value)})`);
  return value as T;
}

/**
 * Reads the plugin's `options` block. Throws {@link AclFileError} `BIFRO_ACL_FILE_OPTIONS_INVALID`
 * (failing the plugin's load) on an unknown option or a value of the wrong type, naming the key.
 */
export function parseOptions(options: Readonly<Record<string, unknown>>, configDir: string): AclFileOptions {
  for (const key of Object.keys(options)) {
    if (!KNOWN.includes(key)) throw invalid(`unknown option options.${key} (known: ${KNOWN.join(', ')})`);
  }
  const file = options.file ?? DEFAULT_FILE;
  if (typeof file !== 'string' || file.trim() === '' || file.includes('\u0000'))
    throw invalid(`options.file must be a non-empty path (got ${JSON.stringify(file)})`);
  const pollMs = options.pollMs ?? DEFAULT_POLL_MS;
  if (typeof pollMs !== 'number' || !Number.isInteger(pollMs) || pollMs < MIN_POLL_MS || pollMs > MAX_POLL_MS)
    throw invalid(`options.pollMs must be an integer from ${MIN_POLL_MS} to ${MAX_POLL_MS} (got ${JSON.stringify(pollMs)})`);
  const watch = options.watch ?? true;
  if (typeof watch !== 'boolean') throw invalid(`options.watch must be true or false (got ${JSON.stringify(watch)})`);
  return {
    file: path.resolve(configDir, file),
    otherwise: oneOf(options, 'otherwise', ['defer', 'deny', 'grant'] as const, 'defer'),
    connect: oneOf(options, 'connect', ['grant', 'defer'] as const, 'grant'),
    unsubscribe: oneOf(options, 'unsubscribe', ['grant', 'defer'] as const, 'grant'),
    pollMs,
    watch,
    debounceMs: DEBOUNCE_MS,
  };
}
