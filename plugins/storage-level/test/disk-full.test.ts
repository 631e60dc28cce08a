import { join } from 'node:path';
import { numberedInboxMessage, sampleSession, testPluginContext } from '@bifro/spi/testing';
import { LevelStorage } from '../src';
import { mountSmallDisk, type SmallDisk } from '../../../test/support/small-disk';

/**
 * A full disk fails writes; the storage then reopens its database by itself (LevelDB refuses
 * every write after a failed one until reopened) and heals once space is freed, without a restart.
 * A real tmpfs of 8 MB (test/support/small-disk.ts), filled and freed.
 */

const ROOMY = { maxSize: 1_000_000, dropOldest: false } as const;
let disk: SmallDisk;
let storage: LevelStorage | undefined;

beforeAll(() => {
  disk = mountSmallDisk(8);
});
afterAll(async () => {
  await storage?.close();
  disk.unmount();
});

it('refuses writes while the disk is full, says why, and writes again once space is freed', async () => {
  const { logger, logged } = testPluginContext();
  storage = new LevelStorage({ path: join(disk.dir, 'db'), logger });
  await storage.init();
  await storage.sessions.put(sampleSession('t1', 'c1'));
  let acked = 0;
  for (; acked < 20; acked++) await storage.inbox.append('t1', 'c1', [numberedInboxMessage(acked)], ROOMY);

  disk.fill();
  let failure: Error | undefined;
  // The last page of the log may still have room for a few appends.
  for (let i = 0; i < 2000 && failure === undefined; i++) {
    try {
      await storage.inbox.append('t1', 'c1', [numberedInboxMessage(acked)], ROOMY);
      acked++;
    } catch (err) {
      failure = err as Error;
    }
  }
  expect(failure?.message).toMatch(
    /^BIFRO_STORAGE_WRITE_FAILED: writing a batch to level storage .* failed \(.*No space left on device.*\); writes are refused until the database is open again/,
  );
  expect(storage.health().ok).toBe(false);
  expect(storage.health().reason).toMatch(/is reopening after: BIFRO_STORAGE_WRITE_FAILED/);
  // While it cannot reopen, calls wait a moment and fail with the reason.
  const later = await storage.inbox.append('t1', 'c1', [numberedInboxMessage(9999)], ROOMY).then(
    () => undefined,
    (err: Error) => err,
  );
  expect(later?.message).toMatch(
    /^BIFRO_STORAGE_UNAVAILABLE: level storage .* is reopening after: BIFRO_STORAGE_WRITE_FAILED.*try again later$/,
  );
  expect(logged.filter((l) => l.level === 'error').map((l) => l.msg)).toEqual([
    'level storage write failed: calls are refused while it opens the database again',
    'level storage cannot open its database again yet; retrying',
  ]);

  disk.free();
  const deadline = Date.now() + 15_000;
  while (!storage.health().ok && Date.now() < deadline) await new Promise((r) => setTimeout(r, 50));
  expect(storage.health()).toEqual({ ok: true });
  expect(logged.find((l) => l.msg === 'level storage is open again')?.level).toBe('warn');
  await storage.inbox.append('t1', 'c1', [numberedInboxMessage(acked)], ROOMY);
  const entries = await storage.inbox.read('t1', 'c1', 0, 10_000);
  // Every acknowledged append is there, in order, then the one after the recovery.
  const numbers = entries.map((e) => new DataView(e.message.payload.buffer, e.message.payload.byteOffset).getUint32(0));
  expect(numbers).toEqual(Array.from({ length: acked + 1 }, (_, i) => i));
  expect(storage.stats.recoveries).toBe(1);
}, 30_000);
