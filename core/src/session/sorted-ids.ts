/** Most ids in one chunk before it splits in two. */
const MAX_CHUNK = 1024;

/**
 * A set of strings kept in order (UTF-16 code units, JavaScript's `<`), in sorted chunks of at
 * most {@link MAX_CHUNK}: add and delete cost a binary search plus a splice within one chunk
 * (O(log n + chunk)), and reading in order from any point costs a binary search, then the items
 * read. What a tenant's session list pages through by client id: a million sessions are about
 * a thousand chunks, never sorted again.
 */
export class SortedIds {
  private chunks: string[][] = [];
  private count = 0;

  get size(): number {
    return this.count;
  }

  /** Adds `id`; false when it was there already. */
  add(id: string): boolean {
    const chunks = this.chunks;
    if (chunks.length === 0) {
      chunks.push([id]);
      this.count = 1;
      return true;
    }
    // The last chunk takes ids past every chunk's end.
    const c = Math.min(this.chunkFor(id), chunks.length - 1);
    const chunk = chunks[c]!;
    const i = lowerBound(chunk, id);
    if (chunk[i] === id) return false;
    chunk.splice(i, 0, id);
    this.count++;
    if (chunk.length > MAX_CHUNK) chunks.splice(c + 1, 0, chunk.splice(chunk.length >> 1));
    return true;
  }

  /** Removes `id`; false when it was not there. */
  delete(id: string): boolean {
    const c = this.chunkFor(id);
    const chunk = this.chunks[c];
    if (chunk === undefined) return false;
    const i = lowerBound(chunk, id);
    if (chunk[i] !== id) return false;
    chunk.splice(i, 1);
    this.count--;
    if (chunk.length === 0) this.chunks.splice(c, 1);
    return true;
  }

  /**
   * The ids after `from` (from the first when undefined), `from` itself too when `inclusive`, in
   * order. Do not change the set while iterating.
   */
  *from(from?: string, inclusive = false): Generator<string, void, undefined> {
    const chunks = this.chunks;
    let c = 0;
    let i = 0;
    if (from !== undefined) {
      c = this.chunkFor(from);
      const chunk = chunks[c];
      if (chunk === undefined) return;
      i = lowerBound(chunk, from);
      if (!inclusive && chunk[i] === from) i++;
    }
    for (; c < chunks.length; c++, i = 0) {
      const chunk = chunks[c]!;
      for (; i < chunk.length; i++) yield chunk[i]!;
    }
  }

  /** The first chunk whose last id is ≥ `id` (chunks.length when none). */
  private chunkFor(id: string): number {
    const chunks = this.chunks;
    let lo = 0;
    let hi = chunks.length;
    while (lo < hi) {
      const mid = (lo + hi) >> 1;
      const chunk = chunks[mid]!;
      if (chunk[chunk.length - 1]! < id) lo = mid + 1;
      else hi = mid;
    }
    return lo;
  }
}

/** The first index of `sorted` whose value is ≥ `id`. */
function lowerBound(sorted: readonly string[], id: string): number {
  let lo = 0;
  let hi = sorted.length;
  while (lo < hi) {
    const mid = (lo + hi) >> 1;
    if (sorted[mid]! < id) lo = mid + 1;
    else hi = mid;
  }
  return lo;
}
