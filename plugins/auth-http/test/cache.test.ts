import { TtlCache } from '../src/cache';
import { ManualClock } from './helpers';

describe('auth-http: TtlCache', () => {
  it('keeps a value for its TTL exactly', () => {
    const clock = new ManualClock(0);
    const cache = new TtlCache<string>(10, clock.now);
    cache.set('a', 'A', 100);
    cache.set('b', 'B', 10);
    clock.advance(9);
    expect(cache.get('b')).toBe('B');
    clock.advance(1);
    expect(cache.get('b')).toBeUndefined();
    expect(cache.get('a')).toBe('A');
    clock.advance(90);
    expect(cache.get('a')).toBeUndefined();
    expect(cache.size).toBe(0);
  });

  it('stores nothing with a TTL of 0 or a size of 0', () => {
    const clock = new ManualClock(0);
    const cache = new TtlCache<string>(10, clock.now);
    cache.set('a', 'A', 0);
    expect(cache.get('a')).toBeUndefined();
    const none = new TtlCache<string>(0, clock.now);
    none.set('a', 'A', 1000);
    expect(none.get('a')).toBeUndefined();
    expect(none.size).toBe(0);
  });

  it('drops the least recently used entry when full; a set refreshes the TTL', () => {
    const clock = new ManualClock(0);
    const cache = new TtlCache<number>(3, clock.now);
    cache.set('a', 1, 1000);
    cache.set('b', 2, 1000);
    cache.set('c', 3, 1000);
    expect(cache.get('a')).toBe(1);
    cache.set('d', 4, 1000);
    expect(cache.get('b')).toBeUndefined();
    expect([cache.get('a'), cache.get('c'), cache.get('d')]).toEqual([1, 3, 4]);
    expect(cache.size).toBe(3);
    clock.advance(900);
    cache.set('a', 10, 1000);
    clock.advance(200);
    expect(cache.get('a')).toBe(10);
    expect(cache.get('c')).toBeUndefined();
  });
});
