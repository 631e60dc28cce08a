import { KdfLimiter, VerifyCache } from '../src/verify-cache';

describe('verification cache and KDF limiter', () => {
  it('keys by login and an HMAC of the password (no password kept), expires and stays bounded', () => {
    let now = 1000;
    const cache = new VerifyCache<string>(100, 2, () => now);
    const key = cache.keyOf('bob', Buffer.from('bob-pw'));
    expect(key.startsWith('bob\u0000')).toBe(true);
    expect(key).not.toContain('bob-pw');
    expect(key).not.toBe(cache.keyOf('bob', Buffer.from('bob-pw2')));
    expect(key).not.toBe(new VerifyCache<string>(100, 2).keyOf('bob', Buffer.from('bob-pw'))); // a key per process
    cache.set(key, 'entry');
    expect(cache.get(key)).toBe('entry');
    now += 100;
    expect(cache.get(key)).toBeUndefined();
    cache.set('a', '1');
    cache.set('b', '2');
    cache.set('c', '3');
    expect([cache.size, cache.get('a'), cache.get('b'), cache.get('c')]).toEqual([2, undefined, '2', '3']);
    cache.clear();
    expect(cache.size).toBe(0);
    const off = new VerifyCache<string>(0, 10);
    off.set('k', 'v');
    expect(off.get('k')).toBeUndefined();
  });

  it('runs at most `limit` tasks at once, queues up to `maxWaitingPerTenant`, and refuses past that', async () => {
    const limiter = new KdfLimiter(2, 1);
    let running = 0;
    let peak = 0;
    const releases: Array<() => void> = [];
    const task = (): Promise<number> =>
      new Promise((resolve) => {
        running++;
        peak = Math.max(peak, running);
        releases.push(() => {
          running--;
          resolve(running);
        });
      });
    const a = limiter.run('t', task);
    const b = limiter.run('t', task);
    const c = limiter.run('t', task);
    expect([a, b, c].every((p) => p instanceof Promise)).toBe(true);
    expect(limiter.run('t', task)).toBeUndefined();
    expect(running).toBe(2);
    releases.shift()!();
    await a;
    await new Promise((r) => setImmediate(r));
    expect(running).toBe(2); // c started
    releases.shift()!();
    releases.shift()!();
    await Promise.all([b, c]);
    expect(peak).toBe(2);
  });

  it('serves the tenants in turn: a flood queued by one tenant does not delay another tenant by more than one turn', async () => {
    const limiter = new KdfLimiter(1, 100);
    const order: string[] = [];
    const releases: Array<() => void> = [];
    const task = (name: string) => (): Promise<void> =>
      new Promise((resolve) => {
        order.push(name);
        releases.push(resolve);
      });
    const all: Array<Promise<void> | undefined> = [];
    for (let i = 0; i < 50; i++) all.push(limiter.run('flood', task(`a${i}`)));
    all.push(limiter.run('quiet', task('b0')));
    all.push(limiter.run('quiet', task('b1')));
    expect(limiter.waiting).toBe(51);
    // The flood's own queue is bounded: the 101st of it is refused, the quiet tenant's are not.
    for (let i = 50; i < 102; i++) all.push(limiter.run('flood', task(`a${i}`)));
    expect(all.filter((p) => p === undefined)).toHaveLength(1);
    for (let i = 0; i < 5; i++) {
      releases.shift()!();
      await new Promise((r) => setImmediate(r));
    }
    expect(order.slice(0, 6)).toEqual(['a0', 'a1', 'b0', 'a2', 'b1', 'a3']);
    while (releases.length > 0) {
      releases.shift()!();
      await new Promise((r) => setImmediate(r));
    }
    await Promise.all(all);
    expect(order).toHaveLength(103);
  });
});
