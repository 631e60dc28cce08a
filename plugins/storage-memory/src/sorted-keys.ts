/**
 * The keys of a map in ascending order (UTF-16 code unit order, as `<` compares strings),
 * sorted lazily and kept until a key is added or removed. Paging reads the sorted array; writes
 * that replace a value under an existing key keep it.
 */
export class SortedKeys {
  private sorted: string[] | undefined;

  constructor(private readonly keys: () => Iterable<string>) {}

  /** Call when a key was added or removed. */
  invalidate(): void {
    this.sorted = undefined;
  }

  /** The keys in ascending order. Do not mutate. */
  all(): readonly string[] {
    if (this.sorted === undefined) this.sorted = [...this.keys()].sort(compareKeys);
    return this.sorted;
  }

  /** Up to `limit` keys greater than `after` (all keys when `after` is undefined), ascending. */
  page(after: string | undefined, limit: number): string[] {
    const all = this.all();
    const start = after === undefined ? 0 : firstGreater(all, after);
    return all.slice(start, start + Math.max(0, limit));
  }
}

/** Ascending string order by UTF-16 code units. */
export function compareKeys(a: string, b: string): number {
  return a < b ? -1 : a > b ? 1 : 0;
}

/** Index of the first element of the ascending array greater than `key` (binary search). */
export function firstGreater(sorted: readonly string[], key: string): number {
  let lo = 0;
  let hi = sorted.length;
  while (lo < hi) {
    const mid = (lo + hi) >>> 1;
    if (sorted[mid] <= key) lo = mid + 1;
    else hi = mid;
  }
  return lo;
}
