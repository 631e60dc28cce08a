import { testPluginContext } from '@bifro/spi/testing';
import { replaysPurgesWhole } from '../src/nats-storage';
import { startNatsCluster } from '../../../test/support/nats-server';
import { natsForFile, numberedMessage, sameStorage, storageOn } from './nats-fixtures';

// Three nats-servers, streams at R3, every server killed with SIGKILL and started again (a NATS
// cluster restarted by hand, or a power cut). The inbox stream of a partition is shared by its
// sessions: the clean-up of one session's inbox must not take another's backlog with it when the
// servers replay their logs (docs/storage-nats.md § Clean-up; nats-server before 2.9.18 replays a
// purge as a purge of the whole stream, nats-io/nats-server#4196).

const BACKLOG = 600;
const COMMITTED = 100;
const ROUNDS = 20;

const env = natsForFile(() => startNatsCluster(3));

const limit = { maxSize: 1_000_000, dropOldest: false };

/** A storage at R3 on one partition whose logger keeps what it warned about. */
function storageLoggingWarnings() {
  const ctx = testPluginContext();
  const storage = sameStorage(storageOn(env.nats.urls, { replicas: 3, partitions: 1, timeoutMs: 5000 }), { logger: ctx.logger });
  const warnings = (): string[] => ctx.logged.filter((l) => l.level === 'warn').map((l) => l.msg);
  return { storage, warnings };
}

it("at R3, a session's backlog survives a restart of every NATS server after other sessions' inboxes were cleaned up", async () => {
  // One partition: every session's inbox on one stream, as many sessions share one on a broker.
  const storage = storageOn(env.nats.urls, { replicas: 3, partitions: 1, timeoutMs: 5000 });
  await storage.init();
  const stream = `${storage.options.prefix.toUpperCase()}_INBOX_0`;

  // A subscriber that fell behind: a backlog, partly read.
  for (let i = 0; i < BACKLOG; i += 50)
    await Promise.all(Array.from({ length: 50 }, (_, k) => storage.inbox.append('t', 'slow', [numberedMessage(i + k)], limit)));
  await storage.inbox.commit('t', 'slow', COMMITTED);
  // Subscribers that keep up: every commit cleans their read entries up, after the backlog was written.
  for (let r = 0; r < ROUNDS; r++) {
    for (const client of ['fast1', 'fast2']) {
      await Promise.all(Array.from({ length: 5 }, (_, k) => storage.inbox.append('t', client, [numberedMessage(r * 5 + k)], limit)));
      await storage.inbox.commit('t', client, (r + 1) * 5);
    }
  }
  await storage.inbox.settle();
  const jsm = await env.admin.jetstreamManager();
  const before = (await jsm.streams.info(stream)).state;
  expect(await storage.inbox.count('t', 'slow')).toBe(BACKLOG - COMMITTED);
  await storage.close();

  await Promise.all(env.nats.servers.map((s) => s.kill9()));
  await Promise.all(env.nats.servers.map((s) => s.restart()));

  // Another node reads it, with room for the stream leader's election.
  const reader = sameStorage(storage, { timeoutMs: 20_000 });
  await reader.init();
  try {
    const entries = await reader.inbox.read('t', 'slow', 0, 100_000);
    const after = (await jsm.streams.info(stream)).state;
    // What the stream held before and after, for the record (docs/storage-nats.md quotes it).
    console.log(
      `inbox stream before the restart: ${before.messages} messages (seq ${before.first_seq}..${before.last_seq}); ` +
        `after: ${after.messages} messages (seq ${after.first_seq}..${after.last_seq}); backlog read back: ${entries.length}`,
    );
    const indices = entries.map((e) => Buffer.from(e.message.payload).readUInt32BE(0));
    expect(indices).toEqual(Array.from({ length: BACKLOG - COMMITTED }, (_, k) => COMMITTED + k));
    expect(entries.map((e) => e.seq)).toEqual(Array.from({ length: BACKLOG - COMMITTED }, (_, k) => COMMITTED + 1 + k));
    expect(await reader.inbox.count('t', 'slow')).toBe(BACKLOG - COMMITTED);
    // The sessions that kept up have nothing left to read, and their read entries are gone.
    expect(await reader.inbox.read('t', 'fast1', 0, 100)).toEqual([]);
  } finally {
    await reader.close();
  }
}, 120_000);

it.each([
  ['2.9.10', true],
  ['2.9.17', true],
  ['2.8.4', true],
  ['2.9.18', false],
  ['2.10.0', false],
  ['3.0.0', false],
  ['v2.9.9-beta', true],
  [undefined, false],
  ['unknown', false],
])('nats-server %s replays a purge as a purge of the whole stream: %s', (version, expected) => {
  expect(replaysPurgesWhole(version)).toBe(expected);
});

it('init warns, at R3, when the nats-server replays purges as purges of the whole stream', async () => {
  const { storage, warnings } = storageLoggingWarnings();
  await storage.init();
  try {
    const version = env.admin.info?.version;
    expect(version).toMatch(/^\d+\.\d+\.\d+/);
    const warned = warnings().filter((w) => w.includes('nats-io/nats-server#4196'));
    expect(warned).toHaveLength(replaysPurgesWhole(version) ? 1 : 0);
    if (warned.length > 0) expect(warned[0]).toContain(`nats-server ${version} may lose session records`);
  } finally {
    await storage.close();
  }
});

it('a read says which entries are missing when messages of an inbox were removed outside the storage, and goes on after them', async () => {
  const { storage, warnings } = storageLoggingWarnings();
  await storage.init();
  try {
    // One chunk per append: appended one at a time.
    for (let i = 0; i < 6; i++) await storage.inbox.append('t', 'gap', [numberedMessage(i)], limit);
    const stream = `${storage.options.prefix.toUpperCase()}_INBOX_0`;
    const subject = `${storage.options.prefix}.inbox.0.t.gap`;
    const jsm = await env.admin.jetstreamManager();
    const chunks: number[] = [];
    for (let seq = 0; ;) {
      const m = await jsm.streams.getMessage(stream, { next_by_subj: subject, seq } as never).catch(() => undefined);
      if (m === undefined) break;
      chunks.push(m.seq);
      seq = m.seq + 1;
    }
    expect(chunks).toHaveLength(6);
    // Entries 2 and 3 (seqs 3 and 4) removed by hand.
    await jsm.streams.deleteMessage(stream, chunks[2]);
    await jsm.streams.deleteMessage(stream, chunks[3]);
    const entries = await storage.inbox.read('t', 'gap', 0, 100);
    expect(entries.map((e) => e.seq)).toEqual([1, 2, 5, 6]);
    expect(warnings().filter((w) => w.includes('missing'))).toEqual([
      `inbox ${subject}: entries 3 to 4 are missing from the stream (removed outside this storage); reading goes on after them`,
    ]);
  } finally {
    await storage.close();
  }
});
