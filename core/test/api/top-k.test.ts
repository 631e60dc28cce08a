import { topK } from '../../src/api/top-k';

describe('topK', () => {
  it('keeps the k best items, best first, whatever the input order', () => {
    const ids = Array.from({ length: 1000 }, (_, i) => `t${String(i).padStart(4, '0')}`);
    const shuffled = [...ids].sort(() => Math.random() - 0.5);
    expect(topK(shuffled, 5, (a, b) => a < b)).toEqual(ids.slice(0, 5));
    expect(topK([...ids].reverse(), 3, (a, b) => a < b)).toEqual(ids.slice(0, 3));
    expect(topK(ids, 0, (a, b) => a < b)).toEqual([]);
    expect(topK(['b', 'a'], 10, (a, b) => a < b)).toEqual(['a', 'b']);
  });
});
