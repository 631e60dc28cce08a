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
    summary:
      'The level storage directory cannot be read: LevelDB reports corruption or missing files. Met while running, the storage repairs the damaged data itself (dropping only what cannot be read) and says what was lost.',
    remedy:
      'At start: run `npx bifro storage check --path <dir>` to see what is damaged, then `npx bifro storage repair --path <dir>` (it keeps a copy of the directory first), or restore a backup. The broker never starts empty on its own.',
  },
  BIFRO_STORAGE_RECOVERY_LOSS: {
    summary:
      "LevelDB's recovery of the write-ahead log would lose acknowledged writes: damaged log records it drops, or fewer write batches than the watermark file (BIFRO-BATCHES) says were acknowledged (a truncated log). The storage does not open, and nothing was changed.",
    remedy:
      'Run `npx bifro storage check --path <dir>` to see what would be lost, restore the directory from a backup if you have one, or accept the loss with `npx bifro storage repair --path <dir>` (it keeps a copy of the directory first).',
  },
  BIFRO_STORAGE_UNAVAILABLE: {
    summary:
      'A storage call came while the level storage was opening its database again after a failed write (disk full, an I/O error) or repairing damaged data; the call waited a moment and gave up.',
    remedy:
      'Nothing to do when it is brief: the storage retries by itself and `/ready` says when it is back. When it lasts, the log line "level storage cannot open its database again yet" names the cause (free disk space, fix permissions).',
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
    summary:
      'A write batch failed (I/O error, disk full): it and the writes queued behind it were refused to their callers; the storage then opens the database again, retrying until it can.',
    remedy:
      'Fix the disk problem named in the message (free space, permissions): the storage heals without a restart once it can write again. Writes that were acknowledged are on disk.',
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
