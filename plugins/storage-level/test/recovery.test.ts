import { existsSync, readFileSync, readdirSync, statSync, truncateSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import type { InboxMessage } from '@bifro/spi';
import { numberedInboxMessage, plainMessage, sampleSession, testPluginContext } from '@bifro/spi/testing';
import { LevelStorage, checkDatabase, repairDatabase } from '../src';
import { readWatermark } from '../src/watermark';
import { closeOpened, forgetOpened, openStorage, rejection } from './storages';
import { removeTempDirs, tempDir } from './temp-dirs';

/**
 * Recovery that would lose acknowledged writes is refused, and reported by `checkDatabase` /
 * repaired by `repairDatabase` (what `bifro storage check|repair` run); damaged table data met
 * while running is repaired in place, keeping everything that can be read.
 */

const ROOMY = { maxSize: 1_000_000, dropOldest: false } as const;
afterEach(closeOpened);
afterAll(removeTempDirs);

/** Inbox message `i` with a payload of about `size` bytes of text (compressible, like most payloads). */
function padded(i: number, size: number): InboxMessage {
  const payload = Buffer.from(`message ${i} `.repeat(Math.ceil(size / 12)).slice(0, size));
  return { message: plainMessage(`q/${i}`, { payload }), qos: 1, retain: false };
}

/** A database whose session record comes first, then `n` inbox appends (one batch each), closed. */
async function writtenDatabase(n: number, payload = 256): Promise<string> {
  const path = tempDir('db');
  const s = new LevelStorage({ path });
  await s.init();
  await s.sessions.put(sampleSession('t1', 'c1'));
  for (let i = 0; i < n; i++) await s.inbox.append('t1', 'c1', [padded(i, payload)], ROOMY);
  await s.close();
  return path;
}

/** The write-ahead log file of a closed database (LevelDB keeps it until the next open). */
function walOf(path: string): string {
  const log = readdirSync(path).find((f) => f.endsWith('.log'));
  if (log === undefined) throw new Error(`no write-ahead log in ${path}`);
  return join(path, log);
}

/** Every file of the directory but LevelDB's info logs, with its bytes. */
function contents(path: string): Record<string, string> {
  const out: Record<string, string> = {};
  for (const f of readdirSync(path).sort()) if (!f.startsWith('LOG')) out[f] = readFileSync(join(path, f)).toString('base64');
  return out;
}

describe('level storage: recovery that would lose acknowledged writes', () => {
  it('counts batches in the database and in the watermark file, equal after a clean close and reopen', async () => {
    const path = await writtenDatabase(30);
    expect(await readWatermark(path)).toEqual({ kind: 'count', count: 31 });
    const s = await openStorage(path);
    expect(await s.inbox.count('t1', 'c1')).toBe(30);
    await s.sessions.put(sampleSession('t1', 'c2'));
    await s.close();
    expect(await readWatermark(path)).toEqual({ kind: 'count', count: 32 });
  });

  it('refuses to open a database whose write-ahead log lost its second half, changing nothing; check reports it, repair keeps the rest', async () => {
    const path = await writtenDatabase(200);
    const wal = walOf(path);
    truncateSync(wal, Math.floor(statSync(wal).size / 2));
    const before = contents(path);
    const err = await rejection(new LevelStorage({ path }).init());
    expect(err.message).toMatch(/^BIFRO_STORAGE_RECOVERY_LOSS: /);
    expect(err.message).toMatch(/the last \d+ are missing \(the write-ahead log was truncated or lost\)/);
    expect(err.message).toContain(`npx bifro storage check --path ${path}`);
    expect(err.message).toContain(`npx bifro storage repair --path ${path}`);
    expect(err.message).toContain('Nothing was changed');
    expect(contents(path)).toEqual(before);

    const report = await checkDatabase(path);
    expect(report.healthy).toBe(false);
    expect(report.recoveryLost).toBe(true);
    expect(report.loses['write batches']).toBeGreaterThan(50);
    expect(report.holds.sessions).toBe(1);
    const kept = report.holds['queued messages']!;
    expect(kept).toBeGreaterThan(20);
    expect(kept).toBeLessThan(200);
    expect(contents(path)).toEqual(before);

    const repaired = await repairDatabase(path, true);
    const backup = repaired.findings
      .find((f) => f.startsWith('a copy of the data as it was is in '))!
      .slice('a copy of the data as it was is in '.length);
    expect(existsSync(join(backup, 'CURRENT'))).toBe(true);
    const s = await openStorage(path);
    const entries = await s.inbox.read('t1', 'c1', 0, 1000);
    expect(entries.map((e) => e.seq)).toEqual(Array.from({ length: kept }, (_, i) => i + 1));
    await s.inbox.append('t1', 'c1', [numberedInboxMessage(999)], ROOMY);
    await s.close();
    expect((await checkDatabase(path)).healthy).toBe(true);
  });

  it('refuses a write-ahead log with 500 zeroed bytes (LevelDB would drop the records in them without a word)', async () => {
    const path = await writtenDatabase(200);
    const wal = walOf(path);
    const bytes = readFileSync(wal);
    bytes.fill(0, Math.floor(bytes.length / 3), Math.floor(bytes.length / 3) + 500);
    writeFileSync(wal, bytes);
    const err = await rejection(new LevelStorage({ path }).init());
    expect(err.message).toMatch(
      /^BIFRO_STORAGE_RECOVERY_LOSS: the write-ahead log of .* has \d+ damaged bytes \(.*\): LevelDB's recovery drops the records in them/,
    );
    const report = await checkDatabase(path);
    expect(report.loses['write-ahead log bytes']).toBeGreaterThan(0);
    // Records after the damage survive: the session's meta names more than it holds.
    expect(report.loses['queued messages']).toBeGreaterThan(0);
    expect(report.findings.some((f) => /session "t1\/c1": \d+ of its \d+ queued messages are missing/.test(f))).toBe(true);
    await repairDatabase(path, false);
    const s = await openStorage(path);
    const entries = await s.inbox.read('t1', 'c1', 0, 1000);
    expect(entries.length).toBe(report.holds['queued messages']);
    expect(entries.length).toBeGreaterThan(100);
  });

  it('with sync: false, opens after such a loss (expected after a power loss) and logs it as an error', async () => {
    const path = await writtenDatabase(100);
    const wal = walOf(path);
    truncateSync(wal, Math.floor(statSync(wal).size / 2));
    const { logger, logged } = testPluginContext();
    const s = await openStorage(path, { sync: false, logger });
    expect(logged.find((l) => l.level === 'error')?.msg).toBe(
      'level storage lost acknowledged writes at recovery (sync: false allows it after a power loss)',
    );
    expect(await s.inbox.count('t1', 'c1')).toBeLessThan(100);
  });
});

describe('level storage: damaged table data met while running', () => {
  it('repairs the database in place: the damaged session loses what cannot be read, the others and every later write work', async () => {
    const path = tempDir('db');
    // Session a's inbox in one table file, session b's in another (each reopen turns the log into a table).
    let s = await openStorage(path);
    await s.sessions.put(sampleSession('t1', 'a'));
    for (let i = 0; i < 300; i++) await s.inbox.append('t1', 'a', [padded(i, 200)], ROOMY);
    await s.close();
    s = await openStorage(path);
    await s.sessions.put(sampleSession('t1', 'b'));
    for (let i = 0; i < 50; i++) await s.inbox.append('t1', 'b', [padded(i, 200)], ROOMY);
    await s.close();
    s = await openStorage(path);
    await s.close();
    forgetOpened();
    const tables = readdirSync(path)
      .filter((f) => f.endsWith('.ldb'))
      .map((f) => join(path, f))
      .sort((x, y) => statSync(y).size - statSync(x).size);
    const bytes = readFileSync(tables[0]!);
    for (let i = 0; i < 64; i++) bytes[Math.floor(bytes.length / 3) + i]! ^= 0xff;
    writeFileSync(tables[0]!, bytes);

    const { logger, logged } = testPluginContext();
    s = await openStorage(path, { logger });
    expect((await s.inbox.read('t1', 'b', 0, 100)).length).toBe(50);
    const err = await rejection(s.inbox.read('t1', 'a', 0, 1000));
    expect(err.message).toMatch(/^BIFRO_STORAGE_CORRUPT: reading level storage .* met damaged data .*; the storage repairs the database/);
    expect(s.health()).toEqual({ ok: false, reason: expect.stringMatching(/is repairing damaged data and reopening after/) });
    // A call made meanwhile waits for the repair.
    const a = await s.inbox.read('t1', 'a', 0, 1000);
    expect(s.health()).toEqual({ ok: true });
    expect(s.stats.repairs).toBe(1);
    expect(a.length).toBeGreaterThan(200);
    expect(a.length).toBeLessThan(300);
    expect((await s.inbox.read('t1', 'b', 0, 100)).length).toBe(50);
    await s.inbox.append('t1', 'b', [numberedInboxMessage(50)], ROOMY);
    await s.inbox.commit('t1', 'a', a[a.length - 1]!.seq);
    expect(await s.inbox.count('t1', 'a')).toBe(0);
    const repaired = logged.find((l) => l.msg === 'level storage repaired damaged data');
    expect(repaired?.level).toBe('error');
    expect(repaired?.fields?.lost).toEqual({ 'queued messages': 300 - a.length });
    await s.close();
    forgetOpened();
    expect((await checkDatabase(path)).healthy).toBe(true);
  });
});
