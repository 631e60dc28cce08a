import { TtlCache } from '../src/ttl-cache';

describe('auth-postgres: TTL cache (injected clock)', () => {
  let now = 1_000;
  const clock = (): number => now;

  it('an entry lives exactly ttlMs', () => {
    const cache = new TtlCache<string, number>(500, 10, clock);
    cache.set('a', 1);
    now += 499;
    expect(cache.get('a')).toBe(1);
    now += 1;
    expect(cache.get('a')).toBeUndefined();
    expect(cache.size).toBe(0);
  });

  it('setting again restarts the entry time', () => {
    const cache = new TtlCache<string, number>(500, 10, clock);
    cache.set('a', 1);
    now += 400;
    cache.set('a', 2);
    now += 400;
    expect(cache.get('a')).toBe(2);
  });

  it('keeps at most maxEntries, dropping the least recently used', () => {
    const cache = new TtlCache<string, number>(10_000, 2, clock);
    cache.set('a', 1);
    cache.set('b', 2);
    expect(cache.get('a')).toBe(1); // a is now the most recent
    cache.set('c', 3);
    expect(cache.get('b')).toBeUndefined();
    expect(cache.get('a')).toBe(1);
    expect(cache.get('c')).toBe(3);
    expect(cache.size).toBe(2);
  });

  it('ttlMs 0 keeps nothing', () => {
    const cache = new TtlCache<string, number>(0, 10, clock);
    cache.set('a', 1);
    expect(cache.get('a')).toBeUndefined();
  });
});
