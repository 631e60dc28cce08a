import type { NatsStorage } from '../src';
import { startNatsCluster, type NatsCluster } from '../../../test/support/nats-server';
import { sleep } from '../../../test/support/server-processes';
import { natsForFile, numberedMessage, sameStorage, storageOn } from './nats-fixtures';

// Three nats-servers, streams at R3: one server is killed with SIGKILL while appends are in
// flight. Every append that resolved must be read back; the test reports how long writes stalled.

const SESSIONS = 10;
const APPENDS = 2000;
const IN_FLIGHT = 100;

const env = natsForFile(() => startNatsCluster(3));

it('at R3, appends keep resolving when one NATS server is killed, and none that resolved is lost', async () => {
  const storage = storageOn(env.nats.urls, { replicas: 3, partitions: 2, timeoutMs: 5000 });
  await storage.init();
  expect(storage.replicas).toBe(3);
  const victim = await leaderOf(storage);

  const resolved = new Map<string, number[]>();
  let rejected = 0;
  let next = 0;
  let settled = 0;
  let killedAt = 0;
  let lastResolved = Date.now();
  let longestGap = 0;
  let resolvedAfterKill = 0;
  const worker = async (): Promise<void> => {
    while (next < APPENDS) {
      const i = next++;
      const client = `c${i % SESSIONS}`;
      try {
        await storage.inbox.append('t1', client, [numberedMessage(i)], { maxSize: 1_000_000, dropOldest: false });
        const now = Date.now();
        longestGap = Math.max(longestGap, now - lastResolved);
        lastResolved = now;
        if (killedAt > 0) resolvedAfterKill++;
        resolved.set(client, [...(resolved.get(client) ?? []), i]);
      } catch {
        rejected++;
      }
      if (++settled === APPENDS / 4) {
        killedAt = Date.now();
        process.kill(victim.pid as number, 'SIGKILL');
      }
    }
  };
  await Promise.all(Array.from({ length: IN_FLIGHT }, worker));
  const acked = [...resolved.values()].reduce((n, l) => n + l.length, 0);
  // The figure the docs quote: how long no append resolved around the kill.
  console.log(
    `killed ${victim.name} (stream leader); ${acked} appends acknowledged, ${rejected} rejected; writes stalled at most ${longestGap} ms`,
  );
  expect(killedAt).toBeGreaterThan(0);
  expect(resolvedAfterKill).toBeGreaterThan(0);

  // Read back through a second storage instance (another node), after the survivors settle.
  // A generous call timeout: on a loaded machine the survivors may still be settling the election.
  const reader = sameStorage(storage, { timeoutMs: 20_000 });
  await storage.close();
  await reader.init();
  try {
    for (const [client, indices] of resolved) {
      const entries = await reader.inbox.read('t1', client, 0, 100_000);
      const stored = new Set(entries.map((e) => Buffer.from(e.message.payload).readUInt32BE(0)));
      const lost = indices.filter((i) => !stored.has(i));
      expect({ client, lost }).toEqual({ client, lost: [] });
      for (let k = 1; k < entries.length; k++) expect(entries[k].seq).toBe(entries[k - 1].seq + 1);
      expect(await reader.inbox.count('t1', client)).toBe(entries.length);
    }
  } finally {
    await reader.close();
  }
}, 90_000);

/** The server leading the inbox stream of the most sessions' partition: killing it forces an election. */
async function leaderOf(storage: NatsStorage): Promise<NatsCluster['servers'][number]> {
  const jsm = await env.admin.jetstreamManager();
  const stream = `${storage.options.prefix.toUpperCase()}_INBOX_0`;
  for (let i = 0; i < 50; i++) {
    const leader = (await jsm.streams.info(stream)).cluster?.leader;
    const server = env.nats.servers.find((s) => s.name === leader);
    if (server !== undefined) return server;
    await sleep(100);
  }
  throw new Error(`no leader for ${stream}`);
}
