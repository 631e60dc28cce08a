import type { InboxAppendResult, InboxEntry, InboxLimit, InboxMessage } from '@bifro/spi';
import { copyInboxMessage } from './message-copy';

/** Compact the backing array once at least this many removed entries sit before the head (and they are at least half of it). */
const COMPACT_MIN_HEAD = 1024;

/**
 * The offline queue of one session: entries in an array with a moving head, so that append,
 * commit and count are O(1) amortised and read is a binary search plus a slice. Seqs start at 1
 * and grow by one per appended message; they are never reused (dropped and committed ones
 * included).
 */
export class InboxQueue {
  private entries: InboxEntry[] = [];
  private head = 0;
  private nextSeq = 1;

  /** Number of entries, O(1). */
  get size(): number {
    return this.entries.length - this.head;
  }

  /** Appends copies of `messages` under `limit` (see `InboxStore.append`). */
  append(messages: readonly InboxMessage[], limit: InboxLimit): InboxAppendResult {
    const n = messages.length;
    const maxSize = Math.max(0, limit.maxSize);
    if (!limit.dropOldest) {
      const appended = Math.min(n, Math.max(0, maxSize - this.size));
      for (let i = 0; i < appended; i++) this.push(messages[i]);
      return { appended, dropped: n - appended };
    }
    const dropped = Math.max(0, this.size + n - maxSize);
    const skipFromBatch = Math.max(0, n - maxSize);
    this.head += dropped - skipFromBatch;
    this.nextSeq += skipFromBatch;
    for (let i = skipFromBatch; i < n; i++) this.push(messages[i]);
    this.compact();
    return { appended: n, dropped };
  }

  /** Up to `max` entries with seq greater than `afterSeq`, oldest first. */
  read(afterSeq: number, max: number): InboxEntry[] {
    if (max <= 0) return [];
    const from = this.indexAfter(afterSeq);
    return this.entries.slice(from, from + max);
  }

  /** Removes every entry with seq up to and including `uptoSeq`. */
  commit(uptoSeq: number): void {
    this.head = this.indexAfter(uptoSeq);
    this.compact();
  }

  private push(message: InboxMessage): void {
    this.entries.push({ ...copyInboxMessage(message), seq: this.nextSeq++ });
  }

  /** Index of the first live entry with seq greater than `seq`. */
  private indexAfter(seq: number): number {
    let lo = this.head;
    let hi = this.entries.length;
    while (lo < hi) {
      const mid = (lo + hi) >>> 1;
      if (this.entries[mid].seq <= seq) lo = mid + 1;
      else hi = mid;
    }
    return lo;
  }

  private compact(): void {
    if (this.head === this.entries.length) {
      this.entries = [];
      this.head = 0;
    } else if (this.head >= COMPACT_MIN_HEAD && this.head * 2 >= this.entries.length) {
      this.entries = this.entries.slice(this.head);
      this.head = 0;
    }
  }
}
