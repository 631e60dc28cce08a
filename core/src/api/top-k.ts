/**
 * The `k` best items of a sequence, best first, in O(n log k) and O(k) memory: a bounded heap
 * whose root is the worst item kept. For lists over every tenant (a million of them), where
 * sorting everything for a page of 100 would cost more than the page is worth.
 */
export function topK<T>(items: Iterable<T>, k: number, better: (a: T, b: T) => boolean): T[] {
  if (k <= 0) return [];
  const heap: T[] = [];
  // `worse(i, j)`: heap[i] should sit above heap[j] (the root is the worst kept).
  const worse = (i: number, j: number): boolean => better(heap[j]!, heap[i]!);
  const swap = (i: number, j: number): void => {
    const t = heap[i]!;
    heap[i] = heap[j]!;
    heap[j] = t;
  };
  const down = (from: number): void => {
    let i = from;
    for (;;) {
      const l = 2 * i + 1;
      const r = l + 1;
      let top = i;
      if (l < heap.length && worse(l, top)) top = l;
      if (r < heap.length && worse(r, top)) top = r;
      if (top === i) return;
      swap(i, top);
      i = top;
    }
  };
  for (const item of items) {
    if (heap.length < k) {
      heap.push(item);
      let i = heap.length - 1;
      while (i > 0) {
        const parent = (i - 1) >> 1;
        if (!worse(i, parent)) break;
        swap(i, parent);
        i = parent;
      }
    } else if (better(item, heap[0]!)) {
      heap[0] = item;
      down(0);
    }
  }
  return heap.sort((a, b) => (better(a, b) ? -1 : better(b, a) ? 1 : 0));
}
