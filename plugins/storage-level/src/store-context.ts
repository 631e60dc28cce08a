import type { Level } from 'level';
import { Scope, type GroupCommit } from './group-commit';
import { prefixEnd } from './key-codec';
import type { RetainedTenant } from './retain-store';
import { SessionStates } from './session-states';

/** The level database with byte keys and byte values. */
export type Db = Level<Buffer, Buffer>;

/** Counters the stores keep (for tests and metrics). */
export interface StoreCounters {
  /** Retained index entries a `match` iterated, over all calls. */
  retainedIndexKeysScanned: number;
  /** Range reads of a session's inbox, inflight records or inbound QoS 2 ids, over all calls. */
  sessionRangeReads: number;
}

/**
 * One opening of the database: the handle, its group commit and every cache the stores keep of
 * its contents (session states, retained totals, the ban lock). A failed write ends a generation
 * (its group commit refuses every later write); the storage then opens the database again as a
 * new generation whose caches are read back from disk. A call takes the generation once, when it
 * starts, and uses only it: a call computed from the caches of a failed generation can never
 * write into the next one.
 */
export class Generation {
  readonly sessions: SessionStates;
  /** Per tenant: the lock, totals and pending writes of its retained messages. */
  readonly retained = new Map<string, RetainedTenant>();
  /** Orders the ban calls. */
  readonly bans = new Scope();

  constructor(
    readonly db: Db,
    readonly group: GroupCommit,
    maxCachedSessions: number,
  ) {
    this.sessions = new SessionStates(maxCachedSessions);
  }
}

/** What the stores of one {@link LevelStorage} share. */
export interface StoreContext {
  /** The open generation; undefined while the storage recovers or is closed (then call {@link opened}). */
  readonly gen: Generation | undefined;
  /**
   * The generation once the storage is open again: waits a moment while it recovers, then
   * rejects with BIFRO_STORAGE_UNAVAILABLE; BIFRO_STORAGE_CLOSED before init() and after close().
   */
  opened(): Promise<Generation>;
  /** A read of `g` failed with `err`: returns the error to throw (corruption starts a repair). */
  readFailed(g: Generation, err: unknown): unknown;
  readonly counters: StoreCounters;
}

/** Range options covering every key that starts with `prefix`. */
export function prefixRange(prefix: Buffer): { gte: Buffer; lt?: Buffer } {
  const end = prefixEnd(prefix);
  return end === undefined ? { gte: prefix } : { gte: prefix, lt: end };
}

/** A `limit` for a level iterator: -1 (no limit) for anything not a finite number. */
export function iteratorLimit(limit: number): number {
  return Number.isFinite(limit) ? Math.max(0, Math.floor(limit)) : -1;
}
