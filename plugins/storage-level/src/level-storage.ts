import { promises as fs } from 'node:fs';
import { join } from 'node:path';
import type { PluginLogger, Storage } from '@bifro/spi';
import { Level } from 'level';
import { LevelBanStore } from './ban-store';
import { GroupCommit, type BatchOp, type GroupCommitStats } from './group-commit';
import { LevelInboxStore } from './inbox-store';
import { LevelInflightStore } from './inflight-store';
import { FORMAT_KEY } from './key-codec';
import { LevelRetainStore } from './retain-store';
import { SessionStates } from './session-states';
import { LevelSessionStore } from './session-store';
import { StorageError } from './storage-errors';
import type { Db, StoreContext, StoreCounters } from './store-context';

/** The data format this version writes and reads (the value of the `meta!format` key). */
export const FORMAT_VERSION = 1;

/** Options of {@link LevelStorage}; see docs/storage.md. */
export interface LevelStorageOptions {
  /** The database directory (absolute, or relative to the process's working directory). */
  readonly path: string;
  /** fsync every batch before its writes resolve (default true). */
  readonly sync?: boolean;
  /** How long the first write of a batch waits for others to join it, in ms (default 1; 0: until the next event-loop turn). */
  readonly groupCommitMs?: number;
  /** Most operations per batch; the writes of one call always share a batch (default 10000). */
  readonly maxBatchOps?: number;
  /** Most per-session states (inbox meta, inflight order) kept in memory (default 100000). */
  readonly maxCachedSessions?: number;
  /** Where to log opening and closing; silent when absent. */
  readonly logger?: PluginLogger;
}

export const DEFAULTS = {
  sync: true,
  groupCommitMs: 0,
  maxBatchOps: 10_000,
  maxCachedSessions: 100_000,
} as const;

/** Counters of a {@link LevelStorage} (for tests and metrics). */
export interface LevelStorageStats extends GroupCommitStats, StoreCounters {
  /** Per-session states cached in memory. */
  readonly cachedSessions: number;
}

/**
 * A durable {@link Storage} in an embedded LevelDB (the `level` package). Every call's writes go
 * into one atomic batch; batches of the same millisecond are grouped (group commit) and, with
 * `sync` on, fsync'ed before the calls resolve. The key layout, the retained index, the fsync
 * policy and the errors are described in docs/storage.md.
 *
 * @example
 * ```ts
 * const storage = new LevelStorage({ path: '/var/lib/bifro/storage-level' });
 * await storage.init();
 * await storage.inbox.append('t1', 'c1', [message], { maxSize: 1000, dropOldest: false }); // on disk now
 * await storage.close();
 * ```
 */
export class LevelStorage implements Storage {
  readonly durable = true;
  readonly path: string;
  readonly sessions: LevelSessionStore;
  readonly inbox: LevelInboxStore;
  readonly inflight: LevelInflightStore;
  readonly retained: LevelRetainStore;
  /** Bans (SPI 1.3.0), durable like the rest. */
  readonly bans: LevelBanStore;

  private readonly sync: boolean;
  private readonly groupCommitMs: number;
  private readonly maxBatchOps: number;
  private readonly logger: PluginLogger | undefined;
  private readonly states: SessionStates;
  private readonly counters: StoreCounters = { retainedIndexKeysScanned: 0, sessionRangeReads: 0 };
  private database: Db | undefined;
  private group: GroupCommit | undefined;
  private finishedStats: GroupCommitStats = { batches: 0, ops: 0, writes: 0 };

  constructor(options: LevelStorageOptions) {
    this.path = options.path;
    this.sync = options.sync ?? DEFAULTS.sync;
    this.groupCommitMs = options.groupCommitMs ?? DEFAULTS.groupCommitMs;
    this.maxBatchOps = options.maxBatchOps ?? DEFAULTS.maxBatchOps;
    this.logger = options.logger;
    this.states = new SessionStates(options.maxCachedSessions ?? DEFAULTS.maxCachedSessions);
    const ctx: StoreContext = {
      db: () => this.openDb(),
      commit: () => {
        this.openDb();
        return this.group as GroupCommit;
      },
      sessions: this.states,
      counters: this.counters,
    };
    this.sessions = new LevelSessionStore(ctx);
    this.inbox = new LevelInboxStore(ctx);
    this.inflight = new LevelInflightStore(ctx);
    this.retained = new LevelRetainStore(ctx);
    this.bans = new LevelBanStore(ctx);
  }

  /** Counters since creation. */
  get stats(): LevelStorageStats {
    const g = this.group?.stats ?? { batches: 0, ops: 0, writes: 0 };
    return {
      batches: this.finishedStats.batches + g.batches,
      ops: this.finishedStats.ops + g.ops,
      writes: this.finishedStats.writes + g.writes,
      retainedIndexKeysScanned: this.counters.retainedIndexKeysScanned,
      sessionRangeReads: this.counters.sessionRangeReads,
      cachedSessions: this.states.size,
    };
  }

  /**
   * Opens the database, creating it (with the format marker) when the directory is new or empty.
   * Throws BIFRO_STORAGE_LOCKED, BIFRO_STORAGE_CORRUPT, BIFRO_STORAGE_VERSION or
   * BIFRO_STORAGE_OPEN_FAILED; it never starts over an unreadable directory with an empty store.
   */
  async init(): Promise<void> {
    if (this.database !== undefined) return;
    await checkDirectory(this.path);
    // Private: the directory 0700 (LevelDB would create it with the process's umask), its files 0600 below.
    await fs.mkdir(this.path, { recursive: true, mode: 0o700 }).catch(() => undefined);
    const db: Db = new Level<Buffer, Buffer>(this.path, { keyEncoding: 'buffer', valueEncoding: 'buffer' });
    try {
      await db.open({ createIfMissing: true });
    } catch (err) {
      throw openError(err, this.path);
    }
    try {
      await checkFormat(db, this.path);
    } catch (err) {
      await db.close();
      throw err;
    }
    try {
      await this.states.load(db);
    } catch (err) {
      await db.close();
      throw openError(err, this.path);
    }
    await restrictPermissions(this.path, this.logger);
    this.database = db;
    this.group = new GroupCommit((ops) => this.writeBatch(db, ops), this.groupCommitMs, this.maxBatchOps, this.path);
    this.logger?.info('level storage open', { path: this.path, sync: this.sync, groupCommitMs: this.groupCommitMs });
    if (!this.sync)
      this.logger?.warn(
        'level storage runs with sync: false: a power loss or OS crash can lose the writes of the last seconds that were already acknowledged',
        { path: this.path },
      );
  }

  /** Writes what is queued, then closes the database. Later calls fail with BIFRO_STORAGE_CLOSED. */
  async close(): Promise<void> {
    const db = this.database;
    const group = this.group;
    if (db === undefined || group === undefined) return;
    await group.close();
    const s = group.stats;
    this.finishedStats = {
      batches: this.finishedStats.batches + s.batches,
      ops: this.finishedStats.ops + s.ops,
      writes: this.finishedStats.writes + s.writes,
    };
    this.database = undefined;
    this.group = undefined;
    this.states.clear();
    this.retained.clear();
    await db.close();
    this.logger?.info('level storage closed', { path: this.path });
  }

  private openDb(): Db {
    if (this.database === undefined)
      throw new StorageError('BIFRO_STORAGE_CLOSED', `level storage ${this.path} is not open (call init() first; close() was called?)`);
    return this.database;
  }

  /**
   * One atomic write. A chained batch, not `db.batch(array)`: level 10's array form clones and
   * re-validates every operation in JS, which measured 2.7× slower for 1 KiB values.
   */
  private async writeBatch(db: Db, ops: BatchOp[]): Promise<void> {
    const batch = db.batch();
    try {
      for (const op of ops) {
        if (op.type === 'put') batch.put(op.key, op.value);
        else batch.del(op.key);
      }
    } catch (err) {
      await batch.close();
      throw err;
    }
    await batch.write({ sync: this.sync });
  }
}

/** LevelDB's own files; a directory holding some of them but no CURRENT is a damaged database. */
const LEVELDB_FILE = /^(MANIFEST-\d+|\d+\.(log|ldb|sst))$/;

/**
 * Refuses a path that is not a directory, a non-empty directory that is not a LevelDB database,
 * and a LevelDB directory without its CURRENT file (LevelDB would start an empty database there
 * and delete the old table files).
 */
async function checkDirectory(path: string): Promise<void> {
  let entries: string[];
  try {
    const stat = await fs.stat(path);
    if (!stat.isDirectory())
      throw new StorageError('BIFRO_STORAGE_OPEN_FAILED', `the level storage path ${path} exists and is not a directory`);
    entries = await fs.readdir(path);
  } catch (err) {
    if (err instanceof StorageError) throw err;
    if ((err as NodeJS.ErrnoException).code === 'ENOENT') return;
    throw new StorageError('BIFRO_STORAGE_OPEN_FAILED', `cannot read the level storage directory ${path}: ${describe(err)}`, {
      cause: err,
    });
  }
  if (entries.includes('CURRENT')) return;
  if (entries.some((e) => LEVELDB_FILE.test(e)))
    throw new StorageError(
      'BIFRO_STORAGE_CORRUPT',
      `the level storage directory ${path} holds LevelDB files but no CURRENT file, so it cannot be opened. ` +
        `Stop the broker, move the directory aside (mv ${path} ${path}.damaged) and start again with an empty one; docs/storage.md explains how to try a repair of the copy`,
    );
  const foreign = entries.filter((e) => e !== 'LOCK' && e !== 'LOG' && e !== 'LOG.old');
  if (foreign.length > 0)
    throw new StorageError(
      'BIFRO_STORAGE_OPEN_FAILED',
      `the level storage directory ${path} is not empty and is not a level storage directory (it holds ${foreign.slice(0, 3).join(', ')}${foreign.length > 3 ? ', ...' : ''}); point the storage \`path\` at an empty or level storage directory`,
    );
}

/**
 * Takes group and other permissions off the database directory and the files LevelDB created in it
 * with the process's umask (0644 → 0600). Files LevelDB creates later follow the umask (`bifro
 * start` runs with 077) and stay behind the 0700 directory either way.
 */
async function restrictPermissions(path: string, logger: PluginLogger | undefined): Promise<void> {
  try {
    const dir = await fs.stat(path);
    if ((dir.mode & 0o077) !== 0) await fs.chmod(path, dir.mode & 0o7700);
    for (const name of await fs.readdir(path)) {
      const file = join(path, name);
      const stat = await fs.lstat(file);
      if (stat.isFile() && (stat.mode & 0o077) !== 0) await fs.chmod(file, stat.mode & 0o7700);
    }
  } catch (err) {
    logger?.warn('cannot restrict the permissions of the level storage directory', { path, err: describe(err) });
  }
}

/** Checks the format marker, writing it into a new (empty) database. */
async function checkFormat(db: Db, path: string): Promise<void> {
  const marker = await db.get(FORMAT_KEY);
  if (marker === undefined) {
    const anyKey = await db.keys({ limit: 1 }).all();
    if (anyKey.length > 0)
      throw new StorageError(
        'BIFRO_STORAGE_VERSION',
        `the level storage directory ${path} holds data but no format marker (meta!format): it was not written by @bifro/plugin-storage-level. ` +
          `Point the storage \`path\` at another directory, or move this one aside`,
      );
    await db.put(FORMAT_KEY, Buffer.from(String(FORMAT_VERSION)), { sync: true });
    return;
  }
  const found = marker.toString('utf8');
  if (found !== String(FORMAT_VERSION))
    throw new StorageError(
      'BIFRO_STORAGE_VERSION',
      `the level storage directory ${path} has data format ${JSON.stringify(found)}, this plugin version reads format ${FORMAT_VERSION}. ` +
        `Run the plugin version that wrote it (or a newer one that migrates it), or point the storage \`path\` at another directory; nothing was changed`,
    );
}

/** The coded error for a failed open. */
function openError(err: unknown, path: string): StorageError {
  // Duck-typed, not instanceof: errors may come from another realm (e.g. a test sandbox).
  const wrapped = typeof err === 'object' && err !== null ? (err as { cause?: unknown }).cause : undefined;
  const cause = typeof wrapped === 'object' && wrapped !== null ? wrapped : err;
  const code = typeof cause === 'object' && cause !== null ? (cause as { code?: unknown }).code : undefined;
  const detail = describe(cause);
  if (code === 'LEVEL_LOCKED')
    return new StorageError(
      'BIFRO_STORAGE_LOCKED',
      `the level storage directory ${path} is locked by another process (${detail}): another broker is probably running with the same --data-dir (or storage \`path\`). ` +
        `Stop it or give this broker its own data directory`,
      { cause: err },
    );
  if (code === 'LEVEL_CORRUPTION' || (code === 'LEVEL_IO_ERROR' && !/permission denied|read-only/i.test(detail)))
    return new StorageError(
      'BIFRO_STORAGE_CORRUPT',
      `the level storage directory ${path} cannot be read (${detail}). ` +
        `Stop the broker, move the directory aside (mv ${path} ${path}.damaged) and start again with an empty one; the broker does not start empty on its own. docs/storage.md explains how to try a repair of the copy`,
      { cause: err },
    );
  return new StorageError('BIFRO_STORAGE_OPEN_FAILED', `cannot open the level storage directory ${path}: ${detail}`, { cause: err });
}

function describe(err: unknown): string {
  const message = typeof err === 'object' && err !== null ? (err as { message?: unknown }).message : undefined;
  return typeof message === 'string' ? message : String(err);
}
