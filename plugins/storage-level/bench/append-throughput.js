// Appends per second of 1 KiB messages into the level storage, with sync on and off.
// Build first (npx tsc -b plugins/storage-level), then: node plugins/storage-level/bench/append-throughput.js [groupCommitMs]
// Each line: how many appends are in flight at once (callers), over how many sessions, the
// rate, the batches written and the latency of one append (p50 / p99).
const { Buffer } = require('node:buffer');
const { mkdtempSync, rmSync } = require('node:fs');
const { tmpdir } = require('node:os');
const { join } = require('node:path');
const { LevelStorage } = require('../dist/index.js');

const groupCommitMs = Number(process.argv[2] ?? 1);
const limit = { maxSize: 1e9, dropOldest: false };
const message = (i) => ({
  message: { topic: `bench/${i % 100}`, payload: Buffer.alloc(1024, i & 255), qos: 1, retain: false, publishedAt: Date.now() },
  qos: 1,
  retain: false,
});

async function run(sync, callers, total, sessions) {
  const dir = mkdtempSync(join(tmpdir(), 'bifro-bench-'));
  const storage = new LevelStorage({ path: join(dir, 'db'), sync, groupCommitMs });
  await storage.init();
  const latencies = [];
  let next = 0;
  const start = process.hrtime.bigint();
  const caller = async () => {
    while (next < total) {
      const i = next++;
      const t = process.hrtime.bigint();
      await storage.inbox.append('t1', `c${i % sessions}`, [message(i)], limit);
      latencies.push(Number(process.hrtime.bigint() - t) / 1e6);
    }
  };
  await Promise.all(Array.from({ length: callers }, caller));
  const seconds = Number(process.hrtime.bigint() - start) / 1e9;
  const { batches, writes } = storage.stats;
  await storage.close();
  rmSync(dir, { recursive: true, force: true });
  latencies.sort((a, b) => a - b);
  const p = (q) => latencies[Math.min(latencies.length - 1, Math.floor(latencies.length * q))].toFixed(2);
  console.log(
    `sync ${sync}, groupCommitMs ${groupCommitMs}, ${callers} callers over ${sessions} sessions: ${Math.round(total / seconds)} appends/s, ` +
      `${batches} batches (${(writes / batches).toFixed(1)} appends each), latency p50 ${p(0.5)} ms p99 ${p(0.99)} ms`,
  );
}

(async () => {
  for (const sync of [true, false]) {
    await run(sync, 1, 3000, 1);
    await run(sync, 64, 50_000, 100);
    await run(sync, 1000, 100_000, 1000);
  }
})().catch((err) => {
  console.error(err);
  process.exit(1);
});
