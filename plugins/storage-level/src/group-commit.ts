import { StorageError } from './storage-errors';

/** One write of a batch. */
export type BatchOp =
  { readonly type: 'put'; readonly key: Buffer; readonly value: Buffer } | { readonly type: 'del'; readonly key: Buffer };

/** Writes one batch atomically (and fsync'ed when the storage is configured so). */
export type BatchWriter = (ops: BatchOp[]) => Promise<void>;

const RESOLVED: Promise<void> = Promise.resolve();

/**
 * Serialises the calls that change one unit of state (a session, or the retained messages of a
 * tenant), so that each computes its writes from the state the previous one left, in call order.
 * The lock is held while a call computes and hands its writes to the {@link GroupCommit}, not
 * while they are written: calls of one scope queue up in the same batch.
 */
export class Scope {
  private tail: Promise<unknown> = RESOLVED;
  private running = 0;
  private unwritten = 0;
  private flushWaiters: Array<() => void> = [];

  /** True while a call holds or awaits the lock or a handed-over write is not on disk yet. */
  get busy(): boolean {
    return this.running > 0 || this.unwritten > 0;
  }

  /** Runs `step` once every earlier step of this scope finished; resolves with its result. */
  run<T>(step: () => T | Promise<T>): Promise<T> {
    this.running++;
    const result = this.tail.then(step);
    this.tail = result.then(
      () => this.running--,
      () => this.running--,
    );
    return result;
  }

  /** Resolves once every write handed over by this scope so far is on disk (or has failed). */
  flushed(): Promise<void> {
    if (this.unwritten === 0) return RESOLVED;
    return new Promise((resolve) => this.flushWaiters.push(resolve));
  }

  /** @internal called by the group commit. */
  writeQueued(): void {
    this.unwritten++;
  }

  /** @internal called by the group commit. */
  writeSettled(): void {
    if (--this.unwritten > 0) return;
    const waiters = this.flushWaiters;
    this.flushWaiters = [];
    for (const w of waiters) w();
  }
}

/** What a step under a {@link Scope} returns: its result and the promise of its writes. */
export interface Handed<T> {
  readonly value: T;
  readonly written: Promise<void>;
}

/**
 * Runs `step` under `scope`'s lock and resolves with its value once its writes are on disk. The
 * lock is released as soon as the writes are handed over.
 */
export async function locked<T>(scope: Scope, step: () => Handed<T> | Promise<Handed<T>>): Promise<T> {
  const handed = await scope.run(step);
  await handed.written;
  return handed.value;
}

/** A step result without writes. */
export function nothingToWrite<T>(value: T): Handed<T> {
  return { value, written: RESOLVED };
}

interface Queued {
  readonly ops: BatchOp[];
  readonly scopes: readonly Scope[];
  readonly resolve: () => void;
  readonly reject: (error: Error) => void;
}

/** Counters of the group commit (for tests and metrics). */
export interface GroupCommitStats {
  /** Batches written. */
  readonly batches: number;
  /** Operations written, over all batches. */
  readonly ops: number;
  /** Calls whose writes were written, over all batches. */
  readonly writes: number;
}

/**
 * Group commit: writes handed over within `windowMs` of the first one go to the database in ONE
 * batch (`db.batch`, fsync'ed when `sync` is on), and each caller's promise resolves once that
 * batch is written. One batch is written at a time, in hand-over order; writes handed over while
 * a batch is being written form the next one, which starts as soon as the current one is done.
 * A batch is cut at `maxBatchOps` operations, between calls (the writes of one call always go
 * into one batch, so one call is atomic). Once a batch fails, this group commit is done: that
 * batch, every queued one and every later write reject with BIFRO_STORAGE_WRITE_FAILED (LevelDB
 * itself refuses writes after an I/O error until reopened), and `failed` is told once, so the
 * storage opens the database again with a new group commit.
 */
export class GroupCommit {
  private queue: Queued[] = [];
  private queuedOps = 0;
  private timer: NodeJS.Timeout | NodeJS.Immediate | undefined;
  private writing = false;
  private failure: StorageError | undefined;
  private closed = false;
  private idleWaiters: Array<() => void> = [];
  private counters = { batches: 0, ops: 0, writes: 0 };

  constructor(
    private readonly writeBatch: BatchWriter,
    private readonly windowMs: number,
    private readonly maxBatchOps: number,
    private readonly where: string,
    /** Called once, with the error, when a batch fails. */
    private readonly failed: (error: StorageError) => void,
  ) {}

  /** Counters so far. */
  get stats(): GroupCommitStats {
    return { ...this.counters };
  }

  /**
   * Hands `ops` over for the next batch. Resolves once they are written; `scopes` are told
   * (for {@link Scope.flushed}). An empty `ops` resolves at once.
   */
  write(ops: BatchOp[], scopes: readonly Scope[]): Promise<void> {
    if (this.failure !== undefined) return Promise.reject(this.failure);
    if (this.closed) return Promise.reject(new StorageError('BIFRO_STORAGE_CLOSED', `level storage ${this.where} is closed`));
    if (ops.length === 0) return RESOLVED;
    return new Promise<void>((resolve, reject) => {
      for (const s of scopes) s.writeQueued();
      this.queue.push({ ops, scopes, resolve, reject });
      this.queuedOps += ops.length;
      this.schedule();
    });
  }

  /** Writes everything queued now, refuses later writes, and resolves once all is written (or failed). */
  async close(): Promise<void> {
    this.closed = true;
    await this.drain();
  }

  /** Resolves once nothing is queued or being written; writes what is queued without waiting for the window. */
  async drain(): Promise<void> {
    while (this.writing || this.queue.length > 0) {
      if (!this.writing) {
        this.clearTimer();
        void this.writeNext();
      }
      await new Promise<void>((resolve) => this.idleWaiters.push(resolve));
    }
  }

  private schedule(): void {
    if (this.writing) return; // the batch being written starts the next one when done
    if (this.queuedOps >= this.maxBatchOps) {
      this.clearTimer();
      void this.writeNext();
    } else if (this.timer === undefined) {
      const fire = (): void => {
        this.timer = undefined;
        void this.writeNext();
      };
      this.timer = this.windowMs > 0 ? setTimeout(fire, this.windowMs) : setImmediate(fire);
    }
  }

  private clearTimer(): void {
    if (this.timer === undefined) return;
    clearTimeout(this.timer as NodeJS.Timeout);
    clearImmediate(this.timer as NodeJS.Immediate);
    this.timer = undefined;
  }

  private async writeNext(): Promise<void> {
    if (this.writing || this.queue.length === 0) return;
    this.writing = true;
    let take = 0;
    let size = 0;
    while (take < this.queue.length && (take === 0 || size + this.queue[take].ops.length <= this.maxBatchOps)) {
      size += this.queue[take].ops.length;
      take++;
    }
    const batch = this.queue.splice(0, take);
    this.queuedOps -= size;
    const ops: BatchOp[] = batch.length === 1 ? batch[0].ops : new Array<BatchOp>(size);
    if (batch.length > 1) {
      let n = 0;
      for (const q of batch) for (const op of q.ops) ops[n++] = op;
    }
    try {
      await this.writeBatch(ops);
      this.counters.batches++;
      this.counters.ops += size;
      this.counters.writes += batch.length;
      for (const q of batch) q.resolve();
    } catch (err) {
      this.fail(err, batch);
    } finally {
      for (const q of batch) for (const s of q.scopes) s.writeSettled();
      this.writing = false;
    }
    if (this.queue.length > 0) {
      // Writes that queued up meanwhile have waited long enough: write them now.
      this.clearTimer();
      void this.writeNext();
    } else {
      const waiters = this.idleWaiters;
      this.idleWaiters = [];
      for (const w of waiters) w();
    }
  }

  private fail(err: unknown, batch: readonly Queued[]): void {
    const cause = err instanceof Error ? err.message : String(err);
    this.failure = new StorageError(
      'BIFRO_STORAGE_WRITE_FAILED',
      `writing a batch to level storage ${this.where} failed (${cause}); writes are refused until the database is open again`,
      { cause: err },
    );
    const queued = this.queue;
    this.queue = [];
    this.queuedOps = 0;
    this.clearTimer();
    for (const q of batch) q.reject(this.failure);
    for (const q of queued) {
      for (const s of q.scopes) s.writeSettled();
      q.reject(this.failure);
    }
    this.failed(this.failure);
  }
}
