import { mkdirSync, readFileSync, readdirSync, rmSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { SPI_VERSION, type InboxMessage } from '@bifro/spi';
import { numberedInboxMessage, numberedInboxMessages, plainMessage, sampleSession, testPluginContext } from '@bifro/spi/testing';
import { Level } from 'level';
import { satisfies } from 'semver';
import plugin, { LevelStorage, STORAGE_ERRORS, resolveOptions, type LevelStorageOptions } from '../src';
import { closeOpened, forgetOpened, openStorage as open, rejection } from './storages';
import { removeTempDirs, tempDir } from './temp-dirs';

const ROOMY = { maxSize: 1_000_000, dropOldest: false } as const;

/** A level storage in a new temp directory (or at `path`), closed after the test. */
function openStorage(path = tempDir('db'), options: Partial<LevelStorageOptions> = {}): Promise<LevelStorage> {
  return open(path, options);
}

afterEach(closeOpened);
afterAll(removeTempDirs);

/** Writes raw keys into a level database at `path` (as another program, or an older/newer version, would). */
async function writeRaw(path: string, entries: ReadonlyArray<readonly [string, string]>): Promise<void> {
  const db = new Level<string, string>(path);
  await db.open();
  for (const [k, v] of entries) await db.put(k, v);
  await db.close();
}

describe('level storage plugin: manifest and options', () => {
  it('declares the storage kind and an SPI range the current SPI satisfies', () => {
    const pkg = JSON.parse(readFileSync(join(__dirname, '..', 'package.json'), 'utf8')) as {
      name: string;
      version: string;
      bifro: { kinds: string[]; spi: string; main: string };
      peerDependencies: Record<string, string>;
      dependencies: Record<string, string>;
    };
    expect(pkg.name).toBe('@bifro/plugin-storage-level');
    expect(pkg.version).toBe('1.0.0');
    expect(pkg.bifro.kinds).toEqual(['storage']);
    expect(pkg.bifro.main).toBe('dist/index.js');
    expect(pkg.peerDependencies['@bifro/spi']).toBe(pkg.bifro.spi);
    // The ban store (storage.bans) is SPI 1.3.0: an older broker would load the plugin and ignore its bans.
    expect(pkg.bifro.spi).toBe('^1.3.0');
    expect(satisfies(SPI_VERSION, pkg.bifro.spi)).toBe(true);
    expect(pkg.dependencies.level).toMatch(/^\^10\./);
  });

  it('defaults path to <dataDir>/storage-level and resolves a relative path against the config folder', () => {
    expect(resolveOptions(testPluginContext({ dataDir: '/var/lib/bifro' }))).toMatchObject({
      path: join('/var/lib/bifro', 'storage-level'),
      sync: true,
      groupCommitMs: 0,
      maxBatchOps: 10_000,
    });
    expect(resolveOptions(testPluginContext({ configDir: '/etc/bifro', options: { path: 'db/level' } })).path).toBe('/etc/bifro/db/level');
    expect(resolveOptions(testPluginContext({ configDir: '/etc/bifro', options: { path: '/srv/level' } })).path).toBe('/srv/level');
    expect(resolveOptions(testPluginContext({ options: { sync: false, groupCommitMs: 0, maxBatchOps: 5 } }))).toMatchObject({
      sync: false,
      groupCommitMs: 0,
      maxBatchOps: 5,
    });
  });

  it.each([
    [{ synch: true }, /unknown option\(s\) `synch`/],
    [{ sync: 'yes' }, /`sync` must be true or false/],
    [{ path: '' }, /`path` must be a non-empty string/],
    [{ groupCommitMs: -1 }, /`groupCommitMs` must be an integer from 0 to 1000/],
    [{ maxBatchOps: 0.5 }, /`maxBatchOps` must be an integer/],
  ])('refuses invalid options %j with BIFRO_STORAGE_OPTIONS_INVALID', (options, message) => {
    expect(() => resolveOptions(testPluginContext({ options }))).toThrow(/^BIFRO_STORAGE_OPTIONS_INVALID: @bifro\/plugin-storage-level: /);
    expect(() => resolveOptions(testPluginContext({ options }))).toThrow(message);
  });

  it('creates a durable storage that opens in init, logs where, and warns when sync is off', async () => {
    const dataDir = tempDir();
    const ctx = testPluginContext({ dataDir, options: { sync: false } });
    const storage = await plugin.storage?.(ctx);
    expect(storage).toBeInstanceOf(LevelStorage);
    expect(storage?.durable).toBe(true);
    await storage?.init?.();
    await storage?.close?.();
    expect(readdirSync(join(dataDir, 'storage-level'))).toContain('CURRENT');
    expect(ctx.logged.map((l) => [l.level, l.msg.slice(0, 36)])).toEqual([
      ['info', 'level storage open'],
      ['warn', 'level storage runs with sync: false:'],
      ['info', 'level storage closed'],
    ]);
    expect(ctx.logged[0].fields).toEqual({ path: join(dataDir, 'storage-level'), sync: false, groupCommitMs: 0, batches: 0 });
  });

  it('catalogues every error code with a summary and a remedy', () => {
    for (const [code, spec] of Object.entries(STORAGE_ERRORS)) {
      expect(code).toMatch(/^BIFRO_STORAGE_[A-Z_]+$/);
      expect(spec.summary.length).toBeGreaterThan(20);
      expect(spec.remedy.length).toBeGreaterThan(20);
    }
  });
});

describe('level storage: data directory errors', () => {
  it('refuses a second instance on the same directory with BIFRO_STORAGE_LOCKED naming it', async () => {
    const first = await openStorage();
    const err = await rejection(new LevelStorage({ path: first.path }).init());
    expect(err.message).toMatch(/^BIFRO_STORAGE_LOCKED: /);
    expect(err.message).toContain(first.path);
    expect(err.message).toContain('another broker is probably running with the same --data-dir');
    expect((err as { code?: string }).code).toBe('BIFRO_STORAGE_LOCKED');
    await first.sessions.put(sampleSession('t1', 'c1'));
    expect(await first.sessions.get('t1', 'c1')).toBeDefined();
  });

  it('writes the format marker into a new database and refuses an unknown marker with BIFRO_STORAGE_VERSION', async () => {
    const path = tempDir('db');
    await (await openStorage(path)).close();
    forgetOpened();
    const raw = new Level<string, string>(path);
    await raw.open();
    expect(await raw.get('meta!format')).toBe('1');
    await raw.put('meta!format', '2');
    await raw.close();
    const err = await rejection(new LevelStorage({ path }).init());
    expect(err.message).toMatch(/^BIFRO_STORAGE_VERSION: /);
    expect(err.message).toContain(path);
    expect(err.message).toContain('has data format "2", this plugin version reads format 1');
    // The refused database can be opened again: the failed open released its lock and changed nothing.
    const again = new Level<string, string>(path);
    await again.open();
    expect(await again.get('meta!format')).toBe('2');
    await again.close();
  });

  it('refuses a level database without a format marker (not written by this plugin)', async () => {
    const path = tempDir('db');
    await writeRaw(path, [['some', 'data']]);
    const err = await rejection(new LevelStorage({ path }).init());
    expect(err.message).toMatch(/^BIFRO_STORAGE_VERSION: .* holds data but no format marker/);
  });

  it('refuses a corrupt database with BIFRO_STORAGE_CORRUPT and leaves its files in place', async () => {
    const path = tempDir('db');
    const storage = await openStorage(path);
    await storage.sessions.put(sampleSession('t1', 'c1'));
    await storage.close();
    forgetOpened();
    const manifest = readdirSync(path).find((f) => f.startsWith('MANIFEST-'));
    if (manifest === undefined) throw new Error('no MANIFEST file');
    writeFileSync(join(path, manifest), Buffer.alloc(200, 0xab));
    // LevelDB's own log (LOG, LOG.old) rotates at every open attempt; the data files must stay.
    const dataFiles = (): string[] =>
      readdirSync(path)
        .filter((f) => !f.startsWith('LOG'))
        .sort();
    const before = dataFiles();
    const err = await rejection(new LevelStorage({ path }).init());
    expect(err.message).toMatch(/^BIFRO_STORAGE_CORRUPT: /);
    expect(err.message).toContain(`mv ${path} ${path}.damaged`);
    expect(err.message).toContain('does not start empty');
    expect(dataFiles()).toEqual(before);
  });

  it('refuses a database directory whose CURRENT file is gone instead of starting an empty one there', async () => {
    const path = tempDir('db');
    const storage = await openStorage(path);
    await storage.sessions.put(sampleSession('t1', 'c1'));
    await storage.close();
    forgetOpened();
    writeFileSync(join(path, 'CURRENT'), 'MANIFEST-999999\n');
    expect((await rejection(new LevelStorage({ path }).init())).message).toMatch(/^BIFRO_STORAGE_CORRUPT: .*cannot be read/);
    rmSync(join(path, 'CURRENT'));
    expect((await rejection(new LevelStorage({ path }).init())).message).toMatch(/^BIFRO_STORAGE_CORRUPT: .*no CURRENT file/);
  });

  it('refuses a path that is a file or a non-empty foreign directory with BIFRO_STORAGE_OPEN_FAILED', async () => {
    const dir = tempDir();
    writeFileSync(join(dir, 'file'), 'x');
    expect((await rejection(new LevelStorage({ path: join(dir, 'file') }).init())).message).toMatch(
      /^BIFRO_STORAGE_OPEN_FAILED: .* exists and is not a directory/,
    );
    mkdirSync(join(dir, 'foreign'));
    writeFileSync(join(dir, 'foreign', 'notes.txt'), 'x');
    expect((await rejection(new LevelStorage({ path: join(dir, 'foreign') }).init())).message).toMatch(
      /^BIFRO_STORAGE_OPEN_FAILED: .* is not empty and is not a level storage directory \(it holds notes.txt\)/,
    );
  });

  it('creates missing parent folders and opens an existing empty directory', async () => {
    const nested = await openStorage(join(tempDir(), 'a', 'b', 'c'));
    await nested.sessions.put(sampleSession('t1', 'c1'));
    const emptyDir = tempDir();
    const inEmpty = await openStorage(emptyDir);
    expect(await inEmpty.sessions.list({ limit: 10 })).toEqual([]);
  });

  it('rejects calls before init and after close with BIFRO_STORAGE_CLOSED', async () => {
    const storage = new LevelStorage({ path: tempDir('db') });
    expect((await rejection(storage.sessions.get('t1', 'c1'))).message).toMatch(/^BIFRO_STORAGE_CLOSED: /);
    await storage.init();
    await storage.close();
    expect((await rejection(storage.inbox.append('t1', 'c1', [numberedInboxMessage(1)], ROOMY))).message).toMatch(
      /^BIFRO_STORAGE_CLOSED: /,
    );
    await storage.close();
  });
});

describe('level storage: group commit', () => {
  it('writes concurrent appends to many sessions in a few batches, each promise resolving once its batch is written', async () => {
    const storage = await openStorage(tempDir('db'), { groupCommitMs: 5 });
    // Load each session's inbox meta first, so that no read interleaves with the appends below.
    for (let c = 0; c < 20; c++) expect(await storage.inbox.count('t1', `c${c}`)).toBe(0);
    const before = storage.stats.batches;
    const calls = Array.from({ length: 200 }, (_, i) =>
      storage.inbox.append('t1', `c${i % 20}`, [numberedInboxMessage(i)], ROOMY).then((r) => ({ r, batches: storage.stats.batches })),
    );
    const results = await Promise.all(calls);
    const batches = storage.stats.batches - before;
    expect(batches).toBeGreaterThanOrEqual(1);
    expect(batches).toBeLessThanOrEqual(2);
    for (const { r, batches: seen } of results) {
      expect(r).toEqual({ appended: 1, dropped: 0 });
      expect(seen).toBeGreaterThan(before);
    }
    for (let c = 0; c < 20; c++) expect(await storage.inbox.count('t1', `c${c}`)).toBe(10);
    expect((await storage.inbox.read('t1', 'c3', 0, 100)).map((e) => e.message.topic)).toEqual(
      Array.from({ length: 10 }, (_, k) => `q/${3 + k * 20}`),
    );
  });

  it('cuts batches at maxBatchOps between calls, never inside one call', async () => {
    const storage = await openStorage(tempDir('db'), { maxBatchOps: 10, groupCommitMs: 5 });
    for (let i = 0; i < 30; i++) await storage.inbox.count('t1', `c${i}`);
    const before = storage.stats;
    // 30 calls of 3 ops (2 entries + meta): 3 calls fit in 10 ops.
    await Promise.all(Array.from({ length: 30 }, (_, i) => storage.inbox.append('t1', `c${i}`, numberedInboxMessages(i, 2), ROOMY)));
    const middle = storage.stats;
    expect(middle.ops - before.ops).toBe(30 * 3);
    expect(middle.batches - before.batches).toBe(10);
    // One call bigger than maxBatchOps still goes in one batch.
    await storage.inbox.append('t1', 'big', numberedInboxMessages(0, 50), ROOMY);
    expect(storage.stats.batches - middle.batches).toBe(1);
    expect(storage.stats.ops - middle.ops).toBe(51);
    expect(await storage.inbox.count('t1', 'big')).toBe(50);
  });

  it('keeps call order between a session delete and appends issued around it', async () => {
    const storage = await openStorage();
    const first = storage.inbox.append('t1', 'c1', numberedInboxMessages(1, 3), ROOMY);
    const put = storage.sessions.put(sampleSession('t1', 'c1'));
    const deleted = storage.sessions.delete('t1', 'c1');
    const second = storage.inbox.append('t1', 'c1', [numberedInboxMessage(9)], ROOMY);
    const putAgain = storage.sessions.put(sampleSession('t1', 'c1', false, { userId: 'again' }));
    await Promise.all([first, put, deleted, second, putAgain]);
    const entries = await storage.inbox.read('t1', 'c1', 0, 100);
    expect(entries.map((e) => [e.seq, e.message.topic])).toEqual([[1, 'q/9']]);
    expect(await storage.inbox.count('t1', 'c1')).toBe(1);
    expect((await storage.sessions.get('t1', 'c1'))?.userId).toBe('again');
  });

  it('keeps retained totals exact under concurrent puts and deletes of the same topics', async () => {
    const storage = await openStorage();
    const topics = Array.from({ length: 50 }, (_, i) => `x/${i % 10}`);
    await Promise.all(topics.map((t, i) => storage.retained.put('t1', plainMessage(t, { payload: new Uint8Array(i % 3) }))));
    const expectedBytes = Array.from({ length: 10 }, (_, k) => 3 + ((40 + k) % 3)).reduce((a, b) => a + b, 0);
    expect(await storage.retained.totals('t1')).toEqual({ topics: 10, bytes: expectedBytes });
    const deleted = await Promise.all(['x/1', 'x/1', 'x/2'].map((t) => storage.retained.delete('t1', t)));
    expect(deleted).toEqual([true, false, true]);
    await storage.close();
    forgetOpened();
    const reopened = await openStorage(storage.path);
    expect((await reopened.retained.totals('t1')).topics).toBe(8);
  });
});

describe('level storage: retained index', () => {
  it('reads only the index range of the literal prefix and the level count of the filter', async () => {
    const storage = await openStorage();
    const others = Array.from({ length: 500 }, (_, i) => `other/${i}/temp`);
    const dev = ['dev/1/temp', 'dev/2/temp', 'dev/2/hum', 'dev/3/x/y', 'dev'];
    await Promise.all([...others, ...dev, 'devx/1/temp'].map((t) => storage.retained.put('t1', plainMessage(t))));
    const scanned = async (filter: string): Promise<{ topics: string[]; keys: number }> => {
      const before = storage.stats.retainedIndexKeysScanned;
      const topics = (await storage.retained.match('t1', filter, 1000, 0)).map((m) => m.topic).sort();
      return { topics, keys: storage.stats.retainedIndexKeysScanned - before };
    };
    // dev/+/temp: level count 3 under `dev/` only: dev/1/temp, dev/2/temp, dev/2/hum.
    expect(await scanned('dev/+/temp')).toEqual({ topics: ['dev/1/temp', 'dev/2/temp'], keys: 3 });
    // dev/#: `dev` itself, then level counts 3 and 4 under `dev/` (no topic of 2 levels exists).
    expect(await scanned('dev/#')).toEqual({ topics: ['dev', 'dev/1/temp', 'dev/2/hum', 'dev/2/temp', 'dev/3/x/y'], keys: 5 });
    expect(await scanned('dev/2/+')).toEqual({ topics: ['dev/2/hum', 'dev/2/temp'], keys: 2 });
    expect(await scanned('dev/1/temp')).toEqual({ topics: ['dev/1/temp'], keys: 0 });
    expect(await scanned('nothing/+/temp')).toEqual({ topics: [], keys: 0 });
    // A first-level wildcard reads every topic of that level count, but no other depth.
    expect((await scanned('+/+/+/+')).keys).toBe(1);
  });

  it('stops reading the index once the limit is reached', async () => {
    const storage = await openStorage();
    await Promise.all(Array.from({ length: 2000 }, (_, i) => storage.retained.put('t1', plainMessage(`l/${i}`))));
    const before = storage.stats.retainedIndexKeysScanned;
    expect(await storage.retained.match('t1', 'l/+', 5, 0)).toHaveLength(5);
    expect(storage.stats.retainedIndexKeysScanned - before).toBeLessThanOrEqual(256);
  });
});

describe('level storage: sessions without records cost no range read', () => {
  it('loads, lists and reads a session that never had inflight records or inbound QoS 2 ids without a range read', async () => {
    const storage = await openStorage();
    await storage.sessions.put(sampleSession('t1', 'c1'));
    await storage.inbox.append('t1', 'c1', numberedInboxMessages(1, 3), ROOMY);
    expect((await storage.inbox.read('t1', 'c1', 0, 16)).map((e) => e.seq)).toEqual([1, 2, 3]);
    await storage.inflight.put('t1', 'c1', [{ packetId: 1, phase: 'pubrel' }]);
    await storage.inbox.commit('t1', 'c1', 2);
    expect((await storage.inbox.read('t1', 'c1', 0, 16)).map((e) => e.seq)).toEqual([3]);
    expect(await storage.inflight.list('t1', 'c1')).toEqual([{ packetId: 1, phase: 'pubrel' }]);
    await storage.inflight.remove('t1', 'c1', [1]);
    expect(await storage.inflight.list('t1', 'c1')).toEqual([]);
    expect(await storage.inflight.listIncoming('t1', 'c1')).toEqual([]);
    expect(await storage.inflight.list('t1', 'c2')).toEqual([]);
    // Only the list while a record was there read a range.
    expect(storage.stats.sessionRangeReads).toBe(1);
  });

  it('reads the inbox by key once its meta is loaded, after a reopen too, skipping committed entries', async () => {
    const path = tempDir('db');
    const storage = await openStorage(path);
    await storage.inbox.append('t1', 'c1', numberedInboxMessages(1, 5), ROOMY);
    await storage.inbox.commit('t1', 'c1', 2);
    await storage.close();
    forgetOpened();
    const reopened = await openStorage(path);
    expect(await reopened.inbox.count('t1', 'c1')).toBe(3);
    expect((await reopened.inbox.read('t1', 'c1', 0, 2)).map((e) => e.seq)).toEqual([3, 4]);
    expect((await reopened.inbox.read('t1', 'c1', 4, 100)).map((e) => [e.seq, e.message.topic])).toEqual([
      [5, numberedInboxMessage(5).message.topic],
    ]);
    expect(await reopened.inbox.read('t1', 'c1', 5, 100)).toEqual([]);
    expect(reopened.stats.sessionRangeReads).toBe(0);
  });

  it('finds every session with inflight records or inbound QoS 2 ids after a reopen, also past one with thousands of records', async () => {
    const path = tempDir('db');
    const storage = await openStorage(path);
    const recs = (from: number, n: number): Array<{ packetId: number; phase: 'pubrel' }> =>
      Array.from({ length: n }, (_, i) => ({ packetId: from + i, phase: 'pubrel' }));
    await storage.inflight.put('t1', 'a', recs(1, 2500));
    await storage.inflight.put('t1', 'b', recs(10, 3));
    await storage.inflight.put('t2', 'a', recs(7, 1));
    await storage.inflight.addIncoming('t1', 'b', 9);
    await storage.inflight.addIncoming('t1', 'c', 4);
    await storage.inflight.put('t1', 'd', recs(1, 2));
    await storage.inflight.remove('t1', 'd', [1, 2]);
    await storage.close();
    forgetOpened();
    const reopened = await openStorage(path);
    expect((await reopened.inflight.list('t1', 'a')).map((r) => r.packetId)).toEqual(recs(1, 2500).map((r) => r.packetId));
    expect((await reopened.inflight.list('t1', 'b')).map((r) => r.packetId)).toEqual([10, 11, 12]);
    expect((await reopened.inflight.list('t2', 'a')).map((r) => r.packetId)).toEqual([7]);
    expect(await reopened.inflight.listIncoming('t1', 'b')).toEqual([9]);
    expect(await reopened.inflight.listIncoming('t1', 'c')).toEqual([4]);
    const before = reopened.stats.sessionRangeReads;
    expect(await reopened.inflight.list('t1', 'd')).toEqual([]);
    expect(await reopened.inflight.list('t1', 'c')).toEqual([]);
    expect(await reopened.inflight.listIncoming('t1', 'a')).toEqual([]);
    expect(reopened.stats.sessionRangeReads).toBe(before);
    // A record put after the reopen keeps the order after the stored ones.
    await reopened.inflight.put('t1', 'b', recs(1, 1));
    expect((await reopened.inflight.list('t1', 'b')).map((r) => r.packetId)).toEqual([10, 11, 12, 1]);
    // A session delete removes what the reopen found.
    await reopened.sessions.delete('t1', 'b');
    expect(await reopened.inflight.list('t1', 'b')).toEqual([]);
    expect(await reopened.inflight.listIncoming('t1', 'b')).toEqual([]);
  });
});

describe('level storage: keys', () => {
  it('orders client ids and topics like JavaScript strings (UTF-16), also outside the BMP', async () => {
    const storage = await openStorage();
    const ids = ['a', '\uE000', '\u{1F600}', '\uFFFF', 'é', '\u{10FFFF}', 'z\u{1F600}', 'z'];
    await Promise.all(ids.map((c) => storage.sessions.put(sampleSession('t\u{1F600}', c))));
    const expected = [...ids].sort();
    expect((await storage.sessions.list({ tenantId: 't\u{1F600}', limit: 100 })).map((r) => r.clientId)).toEqual(expected);
    expect((await storage.sessions.list({ tenantId: 't\u{1F600}', after: '\uE000', limit: 100 })).map((r) => r.clientId)).toEqual(
      expected.slice(expected.indexOf('\uE000') + 1),
    );
    await Promise.all(ids.map((t) => storage.retained.put('t1', plainMessage(`r/${t}`))));
    expect((await storage.retained.list({ tenantId: 't1', limit: 100 })).map((m) => m.topic)).toEqual(expected.map((t) => `r/${t}`));
    expect((await storage.retained.match('t1', 'r/+', 100, 0)).map((m) => m.topic).sort()).toEqual(expected.map((t) => `r/${t}`));
  });

  it('continues inflight order and inbox seqs after a reopen', async () => {
    const path = tempDir('db');
    const storage = await openStorage(path);
    const rec = (packetId: number): { packetId: number; phase: 'pubrel' } => ({ packetId, phase: 'pubrel' });
    await storage.inflight.put('t1', 'c1', [rec(5), rec(6), rec(7)]);
    await storage.inflight.remove('t1', 'c1', [7]);
    await storage.inbox.append('t1', 'c1', numberedInboxMessages(1, 3), ROOMY);
    await storage.inbox.commit('t1', 'c1', 3);
    await storage.close();
    forgetOpened();
    const reopened = await openStorage(path);
    await reopened.inflight.put('t1', 'c1', [rec(7), rec(5)]);
    expect((await reopened.inflight.list('t1', 'c1')).map((r) => r.packetId)).toEqual([5, 6, 7]);
    const message: InboxMessage = numberedInboxMessage(4);
    await reopened.inbox.append('t1', 'c1', [message], ROOMY);
    expect((await reopened.inbox.read('t1', 'c1', 0, 10)).map((e) => e.seq)).toEqual([4]);
  });
});
