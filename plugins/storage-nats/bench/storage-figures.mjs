/* global process, console, setTimeout, fetch, Buffer */
// Figures of the NATS storage (docs/storage-nats.md): inbox appends/s and session put/get
// latency, at R1 (one nats-server) and R3 (three, joined by routes), each started here on
// 127.0.0.1 in a temporary folder and stopped at the end. Needs the built plugin
// (`npx tsc -b plugins/storage-nats`). Each measurement runs for a bounded time.
//
//   node plugins/storage-nats/bench/storage-figures.mjs [seconds per measurement, default 4]
import { spawn } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import { createRequire } from 'node:module';
import net from 'node:net';
import os from 'node:os';
import path from 'node:path';

const require = createRequire(import.meta.url);
const { NatsStorage, parseOptions } = require('../dist/index.js');

const SECONDS = Number(process.argv[2] ?? 4);
const NATS = process.env.BIFRO_NATS_SERVER ?? '/usr/sbin/nats-server';
const children = [];
process.on('exit', () => children.forEach((c) => c.kill('SIGKILL')));

const freePort = () =>
  new Promise((resolve) => {
    const s = net.createServer().listen(0, '127.0.0.1', () => {
      const { port } = s.address();
      s.close(() => resolve(port));
    });
  });
const sleep = (ms) => new Promise((r) => setTimeout(r, ms));

async function startNats(size, dir) {
  const ports = [];
  for (let i = 0; i < size; i++) ports.push({ port: await freePort(), mon: await freePort(), cluster: await freePort() });
  for (const [i, p] of ports.entries()) {
    const args = [
      '-n',
      `n${i + 1}`,
      '-a',
      '127.0.0.1',
      '-p',
      String(p.port),
      '-m',
      String(p.mon),
      '-js',
      '-sd',
      path.join(dir, `n${i + 1}`),
    ];
    if (size > 1)
      args.push(
        '--cluster_name',
        'bench',
        '--cluster',
        `nats://127.0.0.1:${p.cluster}`,
        '--routes',
        ports.map((q) => `nats://127.0.0.1:${q.cluster}`).join(','),
      );
    children.push(spawn(NATS, args, { stdio: 'ignore' }));
  }
  const deadline = Date.now() + 20_000;
  for (const p of ports) {
    for (;;) {
      const ok = await fetch(`http://127.0.0.1:${p.mon}/healthz?js-enabled-only=true`).then(
        (r) => r.status === 200,
        () => false,
      );
      if (ok) break;
      if (Date.now() > deadline) throw new Error('nats-server not ready');
      await sleep(100);
    }
  }
  return ports.map((p) => `nats://127.0.0.1:${p.port}`);
}

const message = (i) => ({
  message: { topic: `bench/${i}`, payload: Buffer.alloc(100, i & 0xff), qos: 1, retain: false, publishedAt: Date.now() },
  qos: 1,
  retain: false,
});
const LIMIT = { maxSize: 10_000_000, dropOldest: false };

/** Appends for SECONDS with `inFlight` calls outstanding (`perCall` messages each) over `sessions` sessions. */
async function appends(storage, { sessions, inFlight, perCall }) {
  const end = Date.now() + SECONDS * 1000;
  let done = 0;
  let i = 0;
  const worker = async () => {
    while (Date.now() < end) {
      const n = i++;
      const batch = Array.from({ length: perCall }, (_, k) => message(n * perCall + k));
      await storage.inbox.append('bench', `s${n % sessions}`, batch, LIMIT);
      done += perCall;
    }
  };
  const started = Date.now();
  await Promise.all(Array.from({ length: inFlight }, worker));
  return Math.round(done / ((Date.now() - started) / 1000));
}

async function latency(fn) {
  const samples = [];
  const end = Date.now() + SECONDS * 500;
  for (let i = 0; Date.now() < end && i < 5000; i++) {
    const t = process.hrtime.bigint();
    await fn(i);
    samples.push(Number(process.hrtime.bigint() - t) / 1e6);
  }
  samples.sort((a, b) => a - b);
  const q = (p) => samples[Math.min(samples.length - 1, Math.floor(p * samples.length))].toFixed(2);
  return `p50 ${q(0.5)} ms, p99 ${q(0.99)} ms (${samples.length} calls)`;
}

const session = (i) => ({
  tenantId: 'bench',
  clientId: `c${i % 1000}`,
  userId: 'u',
  protocolVersion: 5,
  expirySeconds: 3600,
  createdAt: Date.now(),
  subscriptions: [{ filter: 'a/+/c', qos: 1, noLocal: false, retainAsPublished: false, retainHandling: 0 }],
});

for (const size of [1, 3]) {
  const dir = mkdtempSync(path.join(os.tmpdir(), 'bifro-nats-bench-'));
  const first = children.length;
  try {
    const servers = await startNats(size, dir);
    const storage = new NatsStorage(parseOptions({ servers, replicas: size, prefix: `bench${size}` }));
    await storage.init();
    console.log(`R${storage.replicas} (${size} nats-server${size > 1 ? 's' : ''}, 16 partitions, 100-byte payloads, ${SECONDS} s each)`);
    console.log(
      `  inbox, 1 message per append, 64 appends in flight over 256 sessions: ${await appends(storage, { sessions: 256, inFlight: 64, perCall: 1 })} msg/s`,
    );
    console.log(
      `  inbox, 1 message per append, 64 in flight to 1 session (group commit): ${await appends(storage, { sessions: 1, inFlight: 64, perCall: 1 })} msg/s`,
    );
    console.log(
      `  inbox, 64 messages per append, 16 in flight over 256 sessions: ${await appends(storage, { sessions: 256, inFlight: 16, perCall: 64 })} msg/s`,
    );
    console.log(
      `  inbox, 1 message per append, one at a time: ${await appends(storage, { sessions: 256, inFlight: 1, perCall: 1 })} msg/s`,
    );
    console.log(`  session put: ${await latency((i) => storage.sessions.put(session(i)))}`);
    console.log(`  session get: ${await latency((i) => storage.sessions.get('bench', `c${i % 1000}`))}`);
    await storage.close();
  } finally {
    for (const c of children.slice(first)) c.kill('SIGTERM');
    await sleep(500);
    rmSync(dir, { recursive: true, force: true });
  }
}
process.exit(0);
