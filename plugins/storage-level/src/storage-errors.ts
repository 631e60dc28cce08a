import type { ErrorCatalogue } from '@bifro/spi';

/**
 * The error codes of the level storage. Every error it throws has a message starting with
 * `<CODE>: ` (the convention of the broker's catalogue, docs/errors.md) and a `code` property.
 * A plugin cannot import core's BifroError; the plugin declares these codes in its definition
 * (`errors`, the SPI's {@link ErrorCatalogue}), so the broker knows them once it loaded the plugin
 * and docs/errors.md lists them.
 */
export const STORAGE_ERRORS = {
  BIFRO_STORAGE_LOCKED: {
    summary: 'The level storage directory is locked by another process (LevelDB LOCK file).',
    remedy:
      'Another broker is probably running with the same --data-dir (or storage `path`): stop it, or give this broker its own data directory. The lock is released when that process exits.',
  },
  BIFRO_STORAGE_CORRUPT: {
    summary: 'The level storage directory cannot be read: LevelDB reports corruption or missing files.',
    remedy:
      'Stop the broker, move the directory named in the message aside (keep it for recovery), and start again with an empty one; see docs/storage.md for repairing a copy. The broker never starts empty on its own.',
  },
  BIFRO_STORAGE_VERSION: {
    summary: 'The level storage directory was written in a data format this plugin version does not know (or has no format marker).',
    remedy:
      'Run the plugin version that wrote the directory (or a newer one that migrates it), or point `path` at another directory; see the migration policy in docs/storage.md.',
  },
  BIFRO_STORAGE_OPEN_FAILED: {
    summary: 'The level storage directory could not be created or opened (permissions, a file in the way, disk full).',
    remedy: 'Check that the path named in the message is a directory the broker user may create and write; the cause is in the message.',
  },
  BIFRO_STORAGE_WRITE_FAILED: {
    summary: 'A write batch failed (I/O error, disk full); the storage refuses further writes until restarted.',
    remedy:
      'Fix the disk problem named in the message and restart the broker: writes that were acknowledged are on disk, the failed batch and later ones were rejected to their callers.',
  },
  BIFRO_STORAGE_CLOSED: {
    summary: 'A storage call arrived before init() or after close().',
    remedy: 'A bug in the caller: storage may only be used between init() and close().',
  },
  BIFRO_STORAGE_OPTIONS_INVALID: {
    summary: 'An option of the level storage plugin has the wrong type or range.',
    remedy: 'Fix `plugins.storage.options` in the broker config: see the option table in docs/storage.md.',
  },
} as const satisfies ErrorCatalogue;

/** A code of the level storage. */
export type StorageErrorCode = keyof typeof STORAGE_ERRORS;

/** An error of the level storage: `message` starts with the code; `cause` keeps LevelDB's error. */
export class StorageError extends Error {
  override readonly name = 'StorageError';

  constructor(
    readonly code: StorageErrorCode,
    message: string,
    options?: { cause?: unknown },
  ) {
    super(`${code}: ${message}`, options);
  }
}
