// What the recovery check at open costs: the time of init() (shadow replay, then the real open)
// against a plain LevelDB open, on copies of one database whose write-ahead log holds about 4 MB.
// Build first (npx tsc -b plugins/storage-level), then: node plugins/storage-level/bench/open-time.js [runs]
const { Buffer } = require('node:buffer');
const { cpSync, mkdtempSync, readdirSync, rmSync, statSync } = require('node:fs');
const { tmpdir } = require('node:os');
const { join } = require('node:path');
const { Level } = require('level');
const { LevelStorage } = require('../dist/index.js');

const runs = Number(process.argv[2] ?? 5);
const limit = { maxSize: 1e9, dropOldest: false };
const message = (i) => ({
  message: { topic: `bench/${i % 100}`, payload: Buffer.alloc(1000, i & 255), qos: 1, retain: false, publishedAt: Date.now() },
  qos: 1,
  retain: false,
});
const ms = (from) => Number(process.hrtime.bigint() - from) / 1e6;

async function main() {
  const dir = mkdtempSync(join(tmpdir(), 'bifro-bench-open-'));
  try {
    const source = join(dir, 'db');
    const storage = new LevelStorage({ path: source });
    await storage.init();
    await Promise.all(Array.from({ length: 3800 }, (_, i) => storage.inbox.append('t1', `c${i % 50}`, [message(i)], limit)));
    await storage.close();
    const log = readdirSync(source)
      .filter((f) => f.endsWith('.log'))
      .reduce((n, f) => n + statSync(join(source, f)).size, 0);
    console.log(`write-ahead log: ${(log / 1e6).toFixed(1)} MB`);
    for (let r = 0; r < runs; r++) {
      const a = join(dir, `a${r}`);
      const b = join(dir, `b${r}`);
      cpSync(source, a, { recursive: true });
      cpSync(source, b, { recursive: true });
      let t = process.hrtime.bigint();
      const checked = new LevelStorage({ path: a });
      await checked.init();
      const withCheck = ms(t);
      await checked.close();
      t = process.hrtime.bigint();
      const plain = new Level(b);
      await plain.open();
      const bare = ms(t);
      await plain.close();
      console.log(`init() with the recovery check ${withCheck.toFixed(0)} ms, plain LevelDB open ${bare.toFixed(0)} ms`);
    }
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
}

main().catch((err) => {
  console.error(err);
  process.exit(1);
});
