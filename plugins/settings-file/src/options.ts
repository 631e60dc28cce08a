import * as path from 'node:path';

/** Options of the plugin, after defaults and checks. */
export interface FileSettingsOptions {
  /** Absolute path of the settings file. */
  readonly file: string;
  /** Milliseconds between two checks of the file's size and modification time (fallback of `watch`). */
  readonly pollMs: number;
  /** Whether a missing file is fine (registry defaults for everyone) or fails the plugin's init. */
  readonly missingOk: boolean;
  /** Whether to listen to file system events (`fs.watch` on the file's folder) besides polling. */
  readonly watch: boolean;
  /** Milliseconds to wait after the last change seen before reading the file. */
  readonly debounceMs: number;
}

/** Default of the `file` option, resolved against the broker config folder. */
export const DEFAULT_FILE = 'settings.yml';
/** Default of the `pollMs` option. */
export const DEFAULT_POLL_MS = 500;
/** Bounds of `pollMs`: a change must be applied within 2 s even when only polling sees it. */
export const MIN_POLL_MS = 10;
export const MAX_POLL_MS = 1800;
/** Quiet time after the last change seen before the file is read (editors write in several steps). */
export const DEBOUNCE_MS = 100;

const KNOWN = ['file', 'pollMs', 'missingOk', 'watch'];

/**
 * Reads the plugin's `options` block. Throws (failing the plugin's load) on an unknown option or a
 * value of the wrong type, naming the option.
 */
export function parseOptions(options: Readonly<Record<string, unknown>>, configDir: string): FileSettingsOptions {
  for (const key of Object.keys(options)) {
    if (!KNOWN.includes(key)) throw new Error(`settings-file: unknown option ${JSON.stringify(key)} (known: ${KNOWN.join(', ')})`);
  }
  const file = options.file ?? DEFAULT_FILE;
  if (typeof file !== 'string' || file.trim() === '') {
    throw new Error(`settings-file: option file must be a non-empty path, got ${JSON.stringify(file)}`);
  }
  const pollMs = options.pollMs ?? DEFAULT_POLL_MS;
  if (typeof pollMs !== 'number' || !Number.isInteger(pollMs) || pollMs < MIN_POLL_MS || pollMs > MAX_POLL_MS) {
    throw new Error(`settings-file: option pollMs must be an integer from ${MIN_POLL_MS} to ${MAX_POLL_MS}, got ${JSON.stringify(pollMs)}`);
  }
  const missingOk = options.missingOk ?? true;
  if (typeof missingOk !== 'boolean')
    throw new Error(`settings-file: option missingOk must be true or false, got ${JSON.stringify(missingOk)}`);
  const watch = options.watch ?? true;
  if (typeof watch !== 'boolean') throw new Error(`settings-file: option watch must be true or false, got ${JSON.stringify(watch)}`);
  return { file: path.resolve(configDir, file), pollMs, missingOk, watch, debounceMs: DEBOUNCE_MS };
}
