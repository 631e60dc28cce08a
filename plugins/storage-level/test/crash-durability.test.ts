import { spawn, type ChildProcess } from 'node:child_process';
import { existsSync } from 'node:fs';
import { join } from 'node:path';
import { LevelStorage } from '../src';
import { removeTempDirs, tempDir } from './temp-dirs';

/** The built plugin, as the broker loads it. `npx tsc -b plugins/storage-level` builds it (`npm test` does). */
const DIST = join(__dirname, '..', 'dist', 'index.js');

/**
 * The child: opens the storage, appends 100 messages with concurrent calls plus one retained
 * message and one session, prints `written` once every promise resolved, then idles until killed.
 */
const CHILD = `
const { LevelStorage } = require(process.env.BIFRO_DIST);
(async () => {
  const storage = new LevelStorage({ path: process.env.BIFRO_PATH, sync: process.env.BIFRO_SYNC === 'true' });
  await storage.init();
  const message = (i) => ({
    message: { topic: 'crash/' + i, payload: Buffer.alloc(1024, i % 256), qos: 1, retain: false, publishedAt: 1700000000000 },
    qos: 1,
    retain: false,
  });
  const limit = { maxSize: 1000, dropOldest: false };
  await Promise.all([
    ...Array.from({ length: 100 }, (_, i) => storage.inbox.append('t1', 'c1', [message(i)], limit)),
    storage.retained.put('t1', message(7).message),
    storage.sessions.put({ tenantId: 't1', clientId: 'c1', userId: 'u', protocolVersion: 5, expirySeconds: 60, createdAt: 1, subscriptions: [] }),
  ]);
  process.stdout.write('written\\n');
  setInterval(() => {}, 1000);
})().catch((err) => {
  process.stderr.write(String(err && err.stack) + '\\n');
  process.exit(1);
});
`;

const children: ChildProcess[] = [];

afterEach(() => {
  for (const child of children.splice(0)) if (child.exitCode === null && child.signalCode === null) child.kill('SIGKILL');
});
afterAll(removeTempDirs);

/** Starts the child and resolves once it printed `written`. */
function startWriter(path: string, sync: boolean): Promise<ChildProcess> {
  const child = spawn(process.execPath, ['-e', CHILD], {
    env: { ...process.env, BIFRO_DIST: DIST, BIFRO_PATH: path, BIFRO_SYNC: String(sync) },
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  children.push(child);
  return new Promise((resolve, reject) => {
    let out = '';
    let err = '';
    child.stdout?.on('data', (chunk: Buffer) => {
      out += chunk.toString();
      if (out.includes('written\n')) resolve(child);
    });
    child.stderr?.on('data', (chunk: Buffer) => (err += chunk.toString()));
    child.on('exit', (code, signal) => reject(new Error(`the writer exited (${code ?? signal}) before writing: ${err}`)));
  });
}

function exited(child: ChildProcess): Promise<NodeJS.Signals | null> {
  if (child.exitCode !== null || child.signalCode !== null) return Promise.resolve(child.signalCode);
  return new Promise((resolve) => child.on('exit', (_code, signal) => resolve(signal)));
}

describe('level storage: durability across a killed process', () => {
  beforeAll(() => {
    if (!existsSync(DIST)) throw new Error(`${DIST} is missing: build the plugin first (npx tsc -b plugins/storage-level)`);
  });

  it.each([true, false])('keeps every write whose promise resolved when the process is killed with SIGKILL (sync: %s)', async (sync) => {
    const path = tempDir('db');
    const child = await startWriter(path, sync);
    // While the writer lives, its lock keeps a second broker out (a real second process this time).
    await expect(new LevelStorage({ path }).init()).rejects.toThrow(/^BIFRO_STORAGE_LOCKED: .*another broker is probably running/);
    child.kill('SIGKILL');
    expect(await exited(child)).toBe('SIGKILL');

    const storage = new LevelStorage({ path });
    await storage.init();
    try {
      expect(await storage.inbox.count('t1', 'c1')).toBe(100);
      const entries = await storage.inbox.read('t1', 'c1', 0, 1000);
      expect(entries.map((e) => e.seq)).toEqual(Array.from({ length: 100 }, (_, i) => i + 1));
      expect(entries.map((e) => e.message.topic)).toEqual(Array.from({ length: 100 }, (_, i) => `crash/${i}`));
      expect(Array.from(entries[42].message.payload)).toEqual(Array.from({ length: 1024 }, () => 42));
      expect((await storage.retained.get('t1', 'crash/7'))?.payload.byteLength).toBe(1024);
      expect(await storage.retained.totals('t1')).toEqual({ topics: 1, bytes: 'crash/7'.length + 1024 });
      expect((await storage.sessions.get('t1', 'c1'))?.userId).toBe('u');
      // The seq counter survived too.
      await storage.inbox.append('t1', 'c1', [{ message: entries[0].message, qos: 1, retain: false }], {
        maxSize: 1000,
        dropOldest: false,
      });
      expect((await storage.inbox.read('t1', 'c1', 100, 10)).map((e) => e.seq)).toEqual([101]);
    } finally {
      await storage.close();
    }
  });
});
