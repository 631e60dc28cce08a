/**
 * A bounded map whose entries expire: at most `maxEntries` entries, the least recently used
 * dropped first, each entry dropped once its time to live has passed. Time comes from `now`
 * (injected by tests). Every operation is O(1).
 */
export class TtlCache<V> {
  private readonly entries = new Map<string, { readonly value: V; readonly expiresAt: number }>();

  constructor(
    private readonly maxEntries: number,
    private readonly now: () => number,
  ) {}

  /** The value stored under `key`, unless it expired (then it is dropped). */
  get(key: string): V | undefined {
    const entry = this.entries.get(key);
    if (entry === undefined) return undefined;
    this.entries.delete(key);
    if (this.now() >= entry.expiresAt) return undefined;
    this.entries.set(key, entry); // most recently used last
    return entry.value;
  }

  /** Stores `value` for `ttlMs` milliseconds; a TTL of 0 (or less), or a cache of size 0, stores nothing. */
  set(key: string, value: V, ttlMs: number): void {
    if (ttlMs <= 0 || this.maxEntries <= 0) return;
    this.entries.delete(key);
    while (this.entries.size >= this.maxEntries) {
      const oldest = this.entries.keys().next();
      if (oldest.done === true) break;
      this.entries.delete(oldest.value);
    }
    this.entries.set(key, { value, expiresAt: this.now() + ttlMs });
  }

  /** Entries held now (expired ones included until they are looked up or pushed out). */
  get size(): number {
    return this.entries.size;
  }

  clear(): void {
    this.entries.clear();
  }
}
