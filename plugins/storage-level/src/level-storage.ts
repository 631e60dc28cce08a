import { promises as fs } from 'node:fs';
import { join } from 'node:path';
import type { PluginLogger, Storage, StorageHealth } from '@bifro/spi';
import { Level } from 'level';
import { LevelBanStore } from './ban-store';
import { repairInPlace } from './check';
import { GroupCommit, type BatchOp, type GroupCommitStats } from './group-commit';
import { LevelInboxStore } from './inbox-store';
import { LevelInflightStore } from './inflight-store';
import { FORMAT_KEY } from './key-codec';
import { LevelRetainStore } from './retain-store';
import { LevelSessionStore } from './session-store';
import { recoveryFindings, recoveryLost, withShadow, type RecoveryReport } from './shadow';
import { StorageError } from './storage-errors';
import { Generation, type Db, type StoreContext, type StoreCounters } from './store-context';
import { BATCHES_KEY, WATERMARK_FILE, Watermark, decodeBatches, encodeBatches } from './watermark';

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
  /** Where to log opening, closing and recovery; silent when absent. */
  readonly logger?: PluginLogger;
}

export const DEFAULTS = {
  sync: true,
  groupCommitMs: 0,
  maxBatchOps: 10_000,
  maxCachedSessions: 100_000,
} as const;

/** How long a call made while the database reopens waits for it before it fails with BIFRO_STORAGE_UNAVAILABLE. */
const RECOVERY_WAIT_MS = 1000;
/** The first and the longest pause between two attempts to open the database again. */
const RETRY_FIRST_MS = 100;
const RETRY_MAX_MS = 5000;
/** How often a recovery that keeps failing is logged again. */
const RETRY_LOG_MS = 30_000;

/** Counters of a {@link LevelStorage} (for tests and metrics). */
export interface LevelStorageStats extends GroupCommitStats, StoreCounters {
  /** Per-session states cached in memory. */
  readonly cachedSessions: number;
  /** Times the database was opened again after a failed write or damaged data. */
  readonly recoveries: number;
  /** Times damaged table data was repaired while running. */
  readonly repairs: number;
}

/** A recovery in progress: why, since when, how it goes. */
interface Recovery {
  readonly since: number;
  readonly cause: Error;
  /** Damaged data was met: the tables are repaired before the database opens again. */
  corruption: boolean;
  attempts: number;
  lastError: unknown;
  lastLogged: number;
}

/**
 * A durable {@link Storage} in an embedded LevelDB (the `level` package). Every call's writes go
 * into one atomic batch; batches of the same millisecond are grouped (group commit) and, with
 * `sync` on, fsync'ed before the calls resolve. The key layout, the retained index, the fsync
 * policy and the errors are described in docs/storage.md.
 *
 * It heals: a failed write (disk full, an I/O error) makes LevelDB refuse every later write, so
 * the storage closes the database and opens it again, retrying until it can (calls made meanwhile
 * wait a moment, then fail with BIFRO_STORAGE_UNAVAILABLE); damaged data met while running is
 * repaired the same way, dropping only what cannot be read. `health()` tells which. At open, a
 * recovery that lost acknowledged writes (a damaged or truncated write-ahead log) is refused
 * with BIFRO_STORAGE_RECOVERY_LOSS, leaving the data as it is for `bifro storage check|repair`.
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
  private readonly maxCachedSessions: number;
  private readonly logger: PluginLogger | undefined;
  private readonly counters: StoreCounters = { retainedIndexKeysScanned: 0, sessionRangeReads: 0 };
  private state: 'closed' | 'open' | 'recovering' = 'closed';
  private current: Generation | undefined;
  private recovery: Recovery | undefined;
  private recoveryDone: Promise<void> = Promise.resolve();
  private waiters: Array<() => void> = [];
  /** Batches written so far (the database's `meta!batches`), and the watermark file that follows it. */
  private batches = 0;
  private watermark: Watermark | undefined;
  private finishedStats: GroupCommitStats = { batches: 0, ops: 0, writes: 0 };
  private recoveries = 0;
  private repairs = 0;

  constructor(options: LevelStorageOptions) {
    this.path = options.path;
    this.sync = options.sync ?? DEFAULTS.sync;
    this.groupCommitMs = options.groupCommitMs ?? DEFAULTS.groupCommitMs;
    this.maxBatchOps = options.maxBatchOps ?? DEFAULTS.maxBatchOps;
    this.maxCachedSessions = options.maxCachedSessions ?? DEFAULTS.maxCachedSessions;
    this.logger = options.logger;
    // eslint-disable-next-line @typescript-eslint/no-this-alias
    const storage = this;
    const ctx: StoreContext = {
      get gen() {
        return storage.current;
      },
      opened: () => this.opened(),
      readFailed: (g, err) => this.readFailed(g, err),
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
    const g = this.current?.group.stats ?? { batches: 0, ops: 0, writes: 0 };
    return {
      batches: this.finishedStats.batches + g.batches,
      ops: this.finishedStats.ops + g.ops,
      writes: this.finishedStats.writes + g.writes,
      retainedIndexKeysScanned: this.counters.retainedIndexKeysScanned,
      sessionRangeReads: this.counters.sessionRangeReads,
      cachedSessions: this.current?.sessions.size ?? 0,
      recoveries: this.recoveries,
      repairs: this.repairs,
    };
  }

  /** Whether calls can be served now (SPI 1.6.0); while the database reopens, why not. */
  health(): StorageHealth {
    if (this.state === 'open') return { ok: true };
    const r = this.recovery;
    if (r === undefined) return { ok: false, reason: `level storage ${this.path} is not open` };
    const last = r.lastError === undefined || r.lastError === r.cause ? '' : `; last attempt: ${describe(r.lastError)}`;
    return {
      ok: false,
      reason:
        `level storage ${this.path} is ${r.corruption ? 'repairing damaged data and reopening' : 'reopening'} after: ${describe(r.cause)} ` +
        `(${Math.round((Date.now() - r.since) / 1000)} s, ${r.attempts} attempts${last})`,
    };
  }

  /**
   * Opens the database, creating it (with the format marker) when the directory is new or empty.
   * Throws BIFRO_STORAGE_LOCKED, BIFRO_STORAGE_CORRUPT, BIFRO_STORAGE_VERSION,
   * BIFRO_STORAGE_RECOVERY_LOSS or BIFRO_STORAGE_OPEN_FAILED; it never starts over an unreadable
   * directory with an empty store, nor over one whose recovery lost acknowledged writes.
   */
  async init(): Promise<void> {
    if (this.state !== 'closed') return;
    const existing = await checkDirectory(this.path);
    // Private: the directory 0700 (LevelDB would create it with the process's umask), its files 0600 below.
    await fs.mkdir(this.path, { recursive: true, mode: 0o700 }).catch(() => undefined);
    if (existing) await this.checkRecovery();
    await this.openGeneration();
    this.state = 'open';
    await restrictPermissions(this.path, this.logger);
    this.logger?.info('level storage open', { path: this.path, sync: this.sync, groupCommitMs: this.groupCommitMs, batches: this.batches });
    if (!this.sync)
      this.logger?.warn(
        'level storage runs with sync: false: a power loss or OS crash can lose the writes of the last seconds that were already acknowledged',
        { path: this.path },
      );
  }

  /** Writes what is queued, then closes the database. Later calls fail with BIFRO_STORAGE_CLOSED. */
  async close(): Promise<void> {
    if (this.state === 'closed') return;
    const g = this.current;
    this.state = 'closed';
    this.current = undefined;
    this.wake();
    if (g === undefined) {
      // Closed while reopening: the recovery stops at its next step.
      await this.recoveryDone;
      return;
    }
    await this.closeGeneration(g);
    this.logger?.info('level storage closed', { path: this.path });
  }

  /**
   * LevelDB's recovery of an existing database, tried on a shadow first (shadow.ts): when it would
   * drop damaged write-ahead log records, or hold fewer batches than the watermark says were
   * acknowledged, the database is not opened (with `sync: false` such a loss is expected after a
   * power loss: logged, not refused).
   */
  private async checkRecovery(): Promise<void> {
    let report: RecoveryReport;
    try {
      report = await withShadow(this.path, async (_db, r) => r);
    } catch (err) {
      throw openError(err, this.path);
    }
    if (report.watermark.kind === 'invalid')
      this.logger?.warn(
        'the level storage watermark file is unreadable: writes lost by a damaged write-ahead log cannot be detected this time',
        {
          path: this.path,
        },
      );
    if (!recoveryLost(report)) return;
    const findings = recoveryFindings(report, this.path);
    if (!this.sync) {
      this.logger?.error('level storage lost acknowledged writes at recovery (sync: false allows it after a power loss)', {
        path: this.path,
        findings,
      });
      return;
    }
    throw new StorageError(
      'BIFRO_STORAGE_RECOVERY_LOSS',
      `${findings.join('; ')}. Nothing was changed. See what is damaged with \`npx bifro storage check --path ${this.path}\`, ` +
        `then repair it (keeping what can be read, after a copy of the directory) with \`npx bifro storage repair --path ${this.path}\`, ` +
        'or restore the directory from a backup',
    );
  }

  /** Opens the database as the current generation (throws the coded open errors). */
  private async openGeneration(): Promise<void> {
    const db: Db = new Level<Buffer, Buffer>(this.path, { keyEncoding: 'buffer', valueEncoding: 'buffer' });
    try {
      await db.open({ createIfMissing: true });
    } catch (err) {
      throw openError(err, this.path);
    }
    let g: Generation | undefined;
    try {
      await checkFormat(db, this.path);
      const [batches] = await db.getMany([BATCHES_KEY]);
      this.batches = decodeBatches(batches);
      const group = new GroupCommit(
        (ops) => this.writeBatch(db, ops),
        this.groupCommitMs,
        this.maxBatchOps,
        this.path,
        (err) => this.writeFailed(g!, err),
      );
      g = new Generation(db, group, this.maxCachedSessions);
      await g.sessions.load(db);
      this.watermark = new Watermark(this.path, this.batches);
    } catch (err) {
      await db.close().catch(() => undefined);
      throw err instanceof StorageError ? err : openError(err, this.path);
    }
    this.current = g;
  }

  private async closeGeneration(g: Generation): Promise<void> {
    await g.group.close();
    const s = g.group.stats;
    this.finishedStats = {
      batches: this.finishedStats.batches + s.batches,
      ops: this.finishedStats.ops + s.ops,
      writes: this.finishedStats.writes + s.writes,
    };
    await g.db.close().catch(() => undefined);
    this.watermark?.close();
    this.watermark = undefined;
  }

  /** The open generation, after waiting a moment while the database reopens. */
  private async opened(): Promise<Generation> {
    if (this.state === 'recovering') {
      await new Promise<void>((resolve) => {
        const timer = setTimeout(resolve, RECOVERY_WAIT_MS);
        this.waiters.push(() => {
          clearTimeout(timer);
          resolve();
        });
      });
    }
    if (this.current !== undefined) return this.current;
    if (this.state === 'recovering')
      throw new StorageError('BIFRO_STORAGE_UNAVAILABLE', `${this.health().reason ?? 'level storage is reopening'}; try again later`);
    throw new StorageError('BIFRO_STORAGE_CLOSED', `level storage ${this.path} is not open (call init() first; close() was called?)`);
  }

  private wake(): void {
    const waiters = this.waiters;
    this.waiters = [];
    for (const w of waiters) w();
  }

  /** A batch of `g` failed: its database refuses writes from now on, so it is opened again. */
  private writeFailed(g: Generation, err: StorageError): void {
    if (g !== this.current) return;
    this.recover(err, isCorruption(err.cause));
  }

  /** A read of `g` failed: damaged data is repaired (it also stops LevelDB's compactions, and with them every write). */
  private readFailed(g: Generation, err: unknown): unknown {
    if (!isCorruption(err)) return err;
    const damaged = new StorageError(
      'BIFRO_STORAGE_CORRUPT',
      `reading level storage ${this.path} met damaged data (${describe(err)}); the storage repairs the database, dropping only what cannot be read`,
      { cause: err },
    );
    if (g === this.current) this.recover(damaged, true);
    else if (this.recovery !== undefined) this.recovery.corruption = true;
    return damaged;
  }

  private recover(cause: Error, corruption: boolean): void {
    if (this.state !== 'open') {
      if (this.recovery !== undefined && corruption) this.recovery.corruption = true;
      return;
    }
    const old = this.current!;
    this.state = 'recovering';
    this.current = undefined;
    this.recoveries++;
    const now = Date.now();
    this.recovery = { since: now, cause, corruption, attempts: 0, lastError: undefined, lastLogged: now };
    this.logger?.error(
      corruption
        ? 'level storage met damaged data: calls are refused while it repairs the database and opens it again'
        : 'level storage write failed: calls are refused while it opens the database again',
      { path: this.path, error: describe(cause) },
    );
    this.recoveryDone = this.reopen(old);
  }

  /** Closes the failed generation, then (repairs and) opens the database until it works or the storage is closed. */
  private async reopen(old: Generation): Promise<void> {
    await this.closeGeneration(old);
    const r = this.recovery!;
    // Batches acknowledged before the failure: the reopened database must hold them all.
    const acknowledged = this.batches;
    let pause = RETRY_FIRST_MS;
    while (this.state === 'recovering') {
      r.attempts++;
      try {
        if (r.corruption) await this.repair();
        if (this.state !== 'recovering') return;
        await this.openGeneration();
        if (this.batches < acknowledged && !r.corruption)
          this.logger?.error('level storage lost acknowledged writes while opening its database again', {
            path: this.path,
            missingBatches: acknowledged - this.batches,
          });
        this.state = 'open';
        this.recovery = undefined;
        this.wake();
        this.logger?.warn('level storage is open again', {
          path: this.path,
          afterMs: Date.now() - r.since,
          attempts: r.attempts,
          repaired: r.corruption,
        });
        return;
      } catch (err) {
        r.lastError = err;
        if (isCorruption(err) || (err instanceof StorageError && err.code === 'BIFRO_STORAGE_CORRUPT')) r.corruption = true;
        if (r.attempts === 1 || Date.now() - r.lastLogged >= RETRY_LOG_MS) {
          r.lastLogged = Date.now();
          this.logger?.error('level storage cannot open its database again yet; retrying', {
            path: this.path,
            attempts: r.attempts,
            error: describe(err),
          });
        }
        await new Promise((resolve) => setTimeout(resolve, pause));
        pause = Math.min(RETRY_MAX_MS, pause * 2);
      }
    }
  }

  /** Repairs damaged data in place while running: what cannot be read is dropped, and said. */
  private async repair(): Promise<void> {
    const done = await repairInPlace(this.path, 'online');
    this.repairs++;
    this.logger?.error('level storage repaired damaged data', {
      path: this.path,
      lost: done.loses,
      findings: done.findings,
      done: done.done,
    });
  }

  /**
   * One atomic write, with the batch count. A chained batch, not `db.batch(array)`: level 10's
   * array form clones and re-validates every operation in JS, which measured 2.7× slower for 1 KiB values.
   */
  private async writeBatch(db: Db, ops: BatchOp[]): Promise<void> {
    const batch = db.batch();
    const count = this.batches + 1;
    try {
      for (const op of ops) {
        if (op.type === 'put') batch.put(op.key, op.value);
        else batch.del(op.key);
      }
      batch.put(BATCHES_KEY, encodeBatches(count));
    } catch (err) {
      await batch.close();
      throw err;
    }
    await batch.write({ sync: this.sync });
    this.batches = count;
    this.watermark?.record(count);
  }
}

/** Whether a LevelDB error means damaged data (a repair's business) rather than a failing disk. */
function isCorruption(err: unknown): boolean {
  const cause =
    typeof err === 'object' && err !== null && (err as { cause?: unknown }).cause !== undefined ? (err as { cause: unknown }).cause : err;
  const code = typeof cause === 'object' && cause !== null ? (cause as { code?: unknown }).code : undefined;
  if (code === 'LEVEL_CORRUPTION') return true;
  // A table file that is gone or cut short: only a repair can take it out of the database.
  return code === 'LEVEL_IO_ERROR' && /\.(ldb|sst)\b/.test(describe(cause)) && /no such file|truncated|corrupt/i.test(describe(cause));
}

/** LevelDB's own files; a directory holding some of them but no CURRENT is a damaged database. */
const LEVELDB_FILE = /^(MANIFEST-\d+|\d+\.(log|ldb|sst))$/;

/**
 * Refuses a path that is not a directory, a non-empty directory that is not a LevelDB database,
 * and a LevelDB directory without its CURRENT file (LevelDB would start an empty database there
 * and delete the old table files).
 */
async function checkDirectory(path: string): Promise<boolean> {
  let entries: string[];
  try {
    const stat = await fs.stat(path);
    if (!stat.isDirectory())
      throw new StorageError('BIFRO_STORAGE_OPEN_FAILED', `the level storage path ${path} exists and is not a directory`);
    entries = await fs.readdir(path);
  } catch (err) {
    if (err instanceof StorageError) throw err;
    if ((err as NodeJS.ErrnoException).code === 'ENOENT') return false;
    throw new StorageError('BIFRO_STORAGE_OPEN_FAILED', `cannot read the level storage directory ${path}: ${describe(err)}`, {
      cause: err,
    });
  }
  if (entries.includes('CURRENT')) return true;
  if (entries.some((e) => LEVELDB_FILE.test(e)))
    throw new StorageError(
      'BIFRO_STORAGE_CORRUPT',
      `the level storage directory ${path} holds LevelDB files but no CURRENT file, so it cannot be opened. ` +
        `See what can be saved with \`npx bifro storage check --path ${path}\` and repair it with \`npx bifro storage repair --path ${path}\`, ` +
        `or move the directory aside (mv ${path} ${path}.damaged) and start again with an empty one`,
    );
  const foreign = entries.filter((e) => e !== 'LOCK' && e !== 'LOG' && e !== 'LOG.old' && e !== WATERMARK_FILE);
  if (foreign.length > 0)
    throw new StorageError(
      'BIFRO_STORAGE_OPEN_FAILED',
      `the level storage directory ${path} is not empty and is not a level storage directory (it holds ${foreign.slice(0, 3).join(', ')}${foreign.length > 3 ? ', ...' : ''}); point the storage \`path\` at an empty or level storage directory`,
    );
  return false;
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
  // Damage: LevelDB's corruption, or one of its files missing. A full disk, an I/O error or a
  // permission problem is not: the directory may be whole.
  if (code === 'LEVEL_CORRUPTION' || (code === 'LEVEL_IO_ERROR' && /no such file/i.test(detail)))
    return new StorageError(
      'BIFRO_STORAGE_CORRUPT',
      `the level storage directory ${path} cannot be read (${detail}). ` +
        `See what is damaged with \`npx bifro storage check --path ${path}\` and repair it (keeping what can be read, after a copy of the directory) with \`npx bifro storage repair --path ${path}\`, ` +
        `or move the directory aside (mv ${path} ${path}.damaged) and start again with an empty one; the broker does not start empty on its own`,
      { cause: err },
    );
  return new StorageError('BIFRO_STORAGE_OPEN_FAILED', `cannot open the level storage directory ${path}: ${detail}`, { cause: err });
}

function describe(err: unknown): string {
  const message = typeof err === 'object' && err !== null ? (err as { message?: unknown }).message : undefined;
  return typeof message === 'string' ? message : String(err);
}
