/**
 * `npm run bench:api`: what the admin API and metrics cost the broker (docs/performance.md §
 * Admin API and metrics). Starts `bifro` and `bifro-api` (the API on, `$SYS` every second),
 * opens the same idle connections in T tenants against each, then measures from /proc:
 *   - the broker's CPU per `GET /metrics` scrape (K scrapes in a row) and the scrape's size;
 *   - the broker's idle CPU over a window with the API on and scraped every second vs off.
 * Nothing here runs per MQTT message: the per-message cost of the API is zero by construction
 * (metrics are read from existing counters at scrape time), which the bench:compare pair
 * `--brokers bifro,bifro-api` checks under load.
 */
import path from 'node:path';
import { performance } from 'node:perf_hooks';
import { parseArgs } from 'node:util';
import { setTimeout as sleep } from 'node:timers/promises';
import { BenchClient } from './bench-client';
import { launchBroker, stopAllBrokers, type BrokerProcess } from './broker-process';
import { encodeConnect } from './packets';
import { readCpuSeconds } from './proc-stats';

const REPO = path.resolve(__dirname, '..', '..', '..');

async function connectAll(broker: BrokerProcess, tenants: number, perTenant: number): Promise<BenchClient[]> {
  const clients: BenchClient[] = [];
  for (let t = 0; t < tenants; t++) {
    for (let c = 0; c < perTenant; c++) {
      const id = `c${c}`;
      const packet = encodeConnect(id, 0, true, 4, { username: `t${t}/u${c}` });
      clients.push(await BenchClient.open({ host: broker.host, port: broker.port }, id, packet, 5000));
    }
  }
  return clients;
}

/** Broker CPU seconds used over `ms`, while `during` runs. */
async function cpuOver(pid: number, ms: number, during?: () => Promise<void>): Promise<number> {
  const before = readCpuSeconds(pid) ?? 0;
  const started = performance.now();
  if (during !== undefined) await during();
  const left = ms - (performance.now() - started);
  if (left > 0) await sleep(left);
  return (readCpuSeconds(pid) ?? 0) - before;
}

async function main(): Promise<void> {
  const { values } = parseArgs({
    options: {
      tenants: { type: 'string', default: '200' },
      'per-tenant': { type: 'string', default: '5' },
      scrapes: { type: 'string', default: '200' },
      window: { type: 'string', default: '20' },
    },
  });
  const tenants = Number(values.tenants);
  const perTenant = Number(values['per-tenant']);
  const scrapes = Number(values.scrapes);
  const windowMs = Number(values.window) * 1000;

  const plain = await launchBroker('bifro', { repoRoot: REPO, cpus: null });
  const withApi = await launchBroker('bifro-api', { repoRoot: REPO, cpus: null, scrape: false });
  const api = withApi.api!;
  const url = `http://${withApi.host}:${api.port}/metrics`;
  const headers = { authorization: `Bearer ${api.token}` };
  const scrape = async (): Promise<number> => {
    const res = await fetch(url, { headers });
    const body = await res.text();
    if (res.status !== 200) throw new Error(`GET /metrics answered ${res.status}`);
    return body.length;
  };
  try {
    const clients = [...(await connectAll(plain, tenants, perTenant)), ...(await connectAll(withApi, tenants, perTenant))];
    await sleep(2000);
    let bytes = 0;
    const started = performance.now();
    const cpu = await cpuOver(withApi.pid, 0, async () => {
      for (let i = 0; i < scrapes; i++) bytes = await scrape();
    });
    const wall = performance.now() - started;
    // Idle windows, the API broker scraped every second as Prometheus would (more often than its usual 15 s).
    const scraper = setInterval(() => void scrape().catch(() => undefined), 1000);
    const [idlePlain, idleApi] = await Promise.all([cpuOver(plain.pid, windowMs), cpuOver(withApi.pid, windowMs)]);
    clearInterval(scraper);
    for (const c of clients) c.close();
    const line = (k: string, v: string): void => void process.stdout.write(`${k.padEnd(44)} ${v}\n`);
    line('connections per broker', `${tenants * perTenant} in ${tenants} tenants`);
    line('GET /metrics: broker CPU per scrape', `${((cpu / scrapes) * 1000).toFixed(2)} ms`);
    line('GET /metrics: wall time per scrape', `${(wall / scrapes).toFixed(2)} ms`);
    line('GET /metrics: size', `${(bytes / 1024).toFixed(1)} KiB`);
    line(`idle CPU over ${windowMs / 1000} s, API off`, `${((idlePlain / (windowMs / 1000)) * 100).toFixed(2)} % of a core`);
    line(
      `idle CPU over ${windowMs / 1000} s, API on, scraped 1/s, $SYS 1/s`,
      `${((idleApi / (windowMs / 1000)) * 100).toFixed(2)} % of a core`,
    );
  } finally {
    await stopAllBrokers();
  }
}

main().catch(async (err: unknown) => {
  process.stderr.write(`bench:api: ${err instanceof Error ? err.message : String(err)}\n`);
  await stopAllBrokers();
  process.exit(1);
});
