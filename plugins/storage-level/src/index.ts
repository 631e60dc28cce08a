import { definePlugin, type StorageReport } from '@bifro/spi';
import { checkDatabase, repairDatabase, type CheckOutcome } from './check';
import { LevelStorage } from './level-storage';
import { resolveOptions } from './options';
import { STORAGE_ERRORS } from './storage-errors';

export { LevelStorage, FORMAT_VERSION, type LevelStorageOptions, type LevelStorageStats } from './level-storage';
export { resolveOptions, DEFAULT_DIR_NAME } from './options';
export { STORAGE_ERRORS, StorageError, type StorageErrorCode } from './storage-errors';
export { checkDatabase, repairDatabase, type CheckOutcome } from './check';
export { WATERMARK_FILE } from './watermark';

function report(o: CheckOutcome): StorageReport {
  return { location: o.location, healthy: o.healthy, findings: o.findings, holds: o.holds, loses: o.loses };
}

/**
 * The embedded durable storage plugin (`plugins.storage: "@bifro/plugin-storage-level"`).
 * Options: `path` (default `<dataDir>/storage-level`; relative to the config file's folder),
 * `sync` (default true), `groupCommitMs` (default 0), `maxBatchOps` (default 10000),
 * `maxCachedSessions` (default 100000). The database opens in `init()`. It declares its error
 * codes (`errors`, SPI 1.1.0; a 1.0 broker ignores the member), which docs/errors.md lists, and
 * the offline check and repair `bifro storage check|repair` run (`storageTools`, SPI 1.6.0).
 */
export default definePlugin({
  storage: (ctx) => new LevelStorage(resolveOptions(ctx)),
  errors: STORAGE_ERRORS,
  storageTools: {
    check: async (ctx) => report(await checkDatabase(resolveOptions(ctx).path)),
    repair: async (ctx, options) => report(await repairDatabase(resolveOptions(ctx).path, options.backup)),
  },
});
