import type { Level } from 'level';
import type { GroupCommit } from './group-commit';
import { prefixEnd } from './key-codec';
import type { SessionStates } from './session-states';

/** The level database with byte keys and byte values. */
export type Db = Level<Buffer, Buffer>;

/** Counters the stores keep (for tests and metrics). */
export interface StoreCounters {
  /** Retained index entries a `match` iterated, over all calls. */
  retainedIndexKeysScanned: number;
  /** Range reads of a session's inbox, inflight records or inbound QoS 2 ids, over all calls. */
  sessionRangeReads: number;
}

/** What the stores of one {@link LevelStorage} share. */
export interface StoreContext {
  /** The open database; throws BIFRO_STORAGE_CLOSED before init() and after close(). */
  db(): Db;
  /** The group commit of the open database; same errors as `db()`. */
  commit(): GroupCommit;
  readonly sessions: SessionStates;
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
