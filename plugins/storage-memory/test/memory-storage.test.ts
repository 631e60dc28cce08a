import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { satisfies } from 'semver';
import { SPI_VERSION, type StoredMessage } from '@bifro/spi';
import { numberedInboxMessages, plainMessage, testPluginContext } from '@bifro/spi/testing';
import plugin, { MemoryStorage } from '../src';
import { RetainedIndex } from '../src/retained-index';

describe('memory storage plugin', () => {
  it('declares the storage kind and an SPI range the current SPI satisfies', () => {
    const pkg = JSON.parse(readFileSync(join(__dirname, '..', 'package.json'), 'utf8')) as {
      name: string;
      bifro: { kinds: string[]; spi: string; main: string };
      peerDependencies: Record<string, string>;
    };
    expect(pkg.name).toBe('@bifro/plugin-storage-memory');
    expect(pkg.bifro.kinds).toEqual(['storage']);
    expect(pkg.bifro.main).toBe('dist/index.js');
    expect(pkg.peerDependencies['@bifro/spi']).toBe(pkg.bifro.spi);
    // The ban store (storage.bans) is SPI 1.3.0.
    expect(pkg.bifro.spi).toBe('^1.3.0');
    expect(satisfies(SPI_VERSION, pkg.bifro.spi)).toBe(true);
  });

  it('creates a non-durable storage and says so in the log', async () => {
    const ctx = testPluginContext();
    const storage = await plugin.storage?.(ctx);
    expect(storage).toBeInstanceOf(MemoryStorage);
    expect(storage?.durable).toBe(false);
    expect(ctx.logged.map((l) => l.level)).toEqual(['info']);
  });

  it('copies on store: mutating a returned payload is the only way to alter stored data, and put copies Buffers into plain Uint8Arrays', async () => {
    const storage = new MemoryStorage();
    const payload = Buffer.from('hello');
    await storage.retained.put('t1', plainMessage('a', { payload }));
    payload.write('HELLO');
    const stored = await storage.retained.get('t1', 'a');
    expect(Buffer.from(stored?.payload ?? []).toString()).toBe('hello');
    expect(Buffer.isBuffer(stored?.payload)).toBe(false);
  });

  it('keeps inbox counts exact over a long run of appends and commits', async () => {
    const storage = new MemoryStorage();
    let expected = 0;
    let cursor = 0;
    for (let round = 0; round < 200; round++) {
      await storage.inbox.append('t1', 'c1', numberedInboxMessages(round * 50, 50), { maxSize: 100_000, dropOldest: false });
      expected += 50;
      const batch = await storage.inbox.read('t1', 'c1', cursor, 30);
      cursor = batch[batch.length - 1].seq;
      await storage.inbox.commit('t1', 'c1', cursor);
      expected -= 30;
      expect(await storage.inbox.count('t1', 'c1')).toBe(expected);
    }
    const rest = await storage.inbox.read('t1', 'c1', 0, 100_000);
    expect(rest).toHaveLength(expected);
    expect(rest[0].seq).toBe(cursor + 1);
  });
});

describe('retained index', () => {
  const message = (topic: string): StoredMessage => plainMessage(topic);

  it('does not visit other first-level branches for a filter with a literal first level', () => {
    const index = new RetainedIndex();
    for (let i = 0; i < 1000; i++) index.set(`other/${i}`, message(`other/${i}`));
    index.set('dev/1/temp', message('dev/1/temp'));
    // Count the child maps the walk iterates: for `dev/+/temp` only the children of `dev` may be.
    const originalIterator = Map.prototype[Symbol.iterator];
    let iterations = 0;
    let topics: string[];
    Map.prototype[Symbol.iterator] = function (this: Map<unknown, unknown>) {
      iterations++;
      return originalIterator.call(this);
    };
    try {
      topics = index.match('dev/+/temp', 10, 0).map((m) => m.topic);
    } finally {
      Map.prototype[Symbol.iterator] = originalIterator;
    }
    expect(topics).toEqual(['dev/1/temp']);
    expect(iterations).toBe(1);
  });

  it('prunes emptied branches on delete', () => {
    const index = new RetainedIndex();
    index.set('a/b/c', message('a/b/c'));
    index.set('a', message('a'));
    index.delete('a/b/c');
    index.delete('a/x/y');
    expect(index.match('#', 10, 0).map((m) => m.topic)).toEqual(['a']);
    index.delete('a');
    expect(index.match('#', 10, 0)).toEqual([]);
    expect((index as unknown as { root: { children: Map<string, unknown> } }).root.children.size).toBe(0);
  });
});
