import { SortedIds } from '../../src/session/sorted-ids';

/** The ordered index a tenant's session list pages through (core/src/session/sorted-ids.ts). */
describe('SortedIds', () => {
  /** A small deterministic generator, so a failure repeats. */
  function random(seed: number): () => number {
    let s = seed;
    return () => {
      s = (s * 1103515245 + 12345) & 0x7fffffff;
      return s / 0x7fffffff;
    };
  }

  it('keeps ids in code unit order through adds and deletes across many chunks', () => {
    const ids = new SortedIds();
    const model = new Set<string>();
    const next = random(7);
    for (let i = 0; i < 20_000; i++) {
      const id = `c${Math.floor(next() * 6000).toString(36)}`;
      if (next() < 0.7) {
        expect(ids.add(id)).toBe(!model.has(id));
        model.add(id);
      } else {
        expect(ids.delete(id)).toBe(model.has(id));
        model.delete(id);
      }
    }
    const sorted = [...model].sort();
    expect(ids.size).toBe(sorted.length);
    expect([...ids.from()]).toEqual(sorted);
    // From any point, exclusive and inclusive, present or not.
    for (const probe of [sorted[0]!, sorted[1234]!, sorted[sorted.length - 1]!, 'c', 'c5', 'zzz']) {
      expect([...ids.from(probe)]).toEqual(sorted.filter((s) => s > probe));
      expect([...ids.from(probe, true)]).toEqual(sorted.filter((s) => s >= probe));
    }
  });

  it('sorts by UTF-16 code units like the storage listing, and empties cleanly', () => {
    const ids = new SortedIds();
    for (const id of ['b', 'a', 'B', 'ä', 'a/b', 'a\u0000']) ids.add(id);
    expect([...ids.from()]).toEqual(['B', 'a', 'a\u0000', 'a/b', 'b', 'ä']);
    for (const id of ['b', 'a', 'B', 'ä', 'a/b', 'a\u0000']) expect(ids.delete(id)).toBe(true);
    expect(ids.size).toBe(0);
    expect([...ids.from()]).toEqual([]);
    expect(ids.delete('a')).toBe(false);
    expect(ids.add('x')).toBe(true);
    expect([...ids.from('w')]).toEqual(['x']);
  });
});
