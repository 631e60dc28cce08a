import { definePlugin } from '@bifro/spi';
import { LevelStorage } from './level-storage';
import { resolveOptions } from './options';
import { STORAGE_ERRORS } from './storage-errors';

export { LevelStorage, FORMAT_VERSION, type LevelStorageOptions, type LevelStorageStats } from './level-storage';
export { resolveOptions, DEFAULT_DIR_NAME } from './options';
export { STORAGE_ERRORS, StorageError, type StorageErrorCode } from './storage-errors';

/**
 * The embedded durable storage plugin (`plugins.storage: "@bifro/plugin-storage-level"`).
 * Options: `path` (default `<dataDir>/storage-level`; relative to the config file's folder),
 * `sync` (default true), `groupCommitMs` (default 0), `maxBatchOps` (default 10000),
 * `maxCachedSessions` (default 100000). The database opens in `init()`. It declares its error
 * codes (`errors`, SPI 1.1.0; a 1.0 broker ignores the member), which docs/errors.md lists.
 */
export default definePlugin({
  storage: (ctx) => new LevelStorage(resolveOptions(ctx)),
  errors: STORAGE_ERRORS,
});
