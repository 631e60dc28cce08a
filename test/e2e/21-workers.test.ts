import { spawn, spawnSync, type ChildProcess } from 'node:child_process';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import mqtt, { type IClientOptions, type MqttClient } from 'mqtt';
import type { IAuthPacket, IConnackPacket, IPublishPacket } from 'mqtt-packet';
import { ownerOf } from '../../core/src/workers/tenant-owner';
import { RawClient } from '../support/raw-client';
import { FIXTURE_PLUGINS, REPO } from '../support/test-broker';

/**
 * Area 21, worker processes (`bifro start --workers N`, docs/multicore.md): real `bifro start`
 * processes with two workers sharing the tcp listener. Each tenant is owned by one worker; a
 * connection accepted by the other is handed over after auth. Clients of one tenant must see one
 * broker whichever worker accepted them; tenants stay apart; a killed worker comes back; the data
 * directory keeps its worker count; tls/ws listeners are refused with workers > 1.
 */

const CLI = path.join(REPO, 'core', 'dist', 'cli', 'main.js');
const WORKERS = 2;
/** Two tenants, one owned by each worker. */
const T0 = tenantOwnedBy(0);
const T1 = tenantOwnedBy(1);

function tenantOwnedBy(index: number): string {
  for (let i = 0; ; i++) if (ownerOf(`tenant${i}`, WORKERS) === index) return `tenant${i}`;
}

interface LogLine {
  readonly msg?: string;
  readonly pid?: number;
  readonly worker?: number;
  readonly tenantId?: string;
  readonly listeners?: { port: number }[];
}

/** A `bifro start` process and what it logged (complete JSON lines only: workers share its stdout). */
class Broker {
  readonly lines: LogLine[] = [];
  private rest = '';
  port = 0;
  readonly exited: Promise<number | null>;

  constructor(readonly child: ChildProcess) {
    const take = (d: Buffer): void => {
      const parts = (this.rest + d.toString()).split('\n');
      this.rest = parts.pop() ?? '';
      for (const line of parts) {
        if (!line.startsWith('{')) {
          if (line.trim() !== '') this.lines.push({ msg: line });
          continue;
        }
        try {
          this.lines.push(JSON.parse(line) as LogLine);
        } catch {
          this.lines.push({ msg: line });
        }
      }
    };
    child.stdout!.on('data', take);
    child.stderr!.on('data', take);
    this.exited = new Promise((resolve) => child.once('exit', (code) => resolve(code)));
  }

  text(): string {
    return this.lines.map((l) => JSON.stringify(l)).join('\n') + this.rest;
  }

  /** Pid of the process currently serving worker `index` (from its latest "ready" line). */
  workerPid(index: number): number | undefined {
    const ready = this.lines.filter((l) => l.worker === index && l.msg === `worker ${index} of ${WORKERS} ready`);
    return ready[ready.length - 1]?.pid;
  }

  count(predicate: (l: LogLine) => boolean): number {
    return this.lines.filter(predicate).length;
  }
}

let dir: string;
const brokers: Broker[] = [];
const clients: MqttClient[] = [];
const raws: RawClient[] = [];

function env(): NodeJS.ProcessEnv {
  const out: NodeJS.ProcessEnv = {};
  for (const [k, v] of Object.entries(process.env)) if (!k.startsWith('BIFRO_')) out[k] = v;
  return { ...out, BIFRO_LOG_PRETTY: 'false' };
}

function writeConfig(name: string, lines: readonly string[], dataDir = path.join(dir, 'data')): string {
  const file = path.join(dir, name);
  writeFileSync(file, [`dataDir: ${JSON.stringify(dataDir)}`, ...lines, ''].join('\n'));
  return file;
}

const TCP_ONLY = ['listeners:', '  - { name: tcp, host: 127.0.0.1, port: 0 }'];

/** Starts `bifro start --config <config> --port 0 ...args`; resolves once it logged "bifro started", rejects with its output when it exits first. */
async function start(config: string, args: readonly string[] = []): Promise<Broker> {
  const child = spawn(process.execPath, [CLI, 'start', '--config', config, '--port', '0', ...args], {
    env: env(),
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  const broker = new Broker(child);
  brokers.push(broker);
  const deadline = Date.now() + 15000;
  for (;;) {
    const started = broker.lines.find((l) => l.msg?.startsWith('bifro started'));
    if (started?.listeners?.[0] !== undefined) {
      broker.port = started.listeners[0].port;
      return broker;
    }
    if (child.exitCode !== null || child.signalCode !== null) {
      await broker.exited;
      await sleep(50);
      throw new Error(`bifro exited with ${child.exitCode} before it was ready:\n${broker.text()}`);
    }
    if (Date.now() > deadline) throw new Error(`bifro not ready in 15 s:\n${broker.text()}`);
    await sleep(20);
  }
}

function sleep(ms: number): Promise<void> {
  return new Promise((resolve) => setTimeout(resolve, ms));
}

async function until(check: () => boolean, ms = 5000): Promise<boolean> {
  const deadline = Date.now() + ms;
  while (!check() && Date.now() < deadline) await sleep(20);
  return check();
}

interface Received {
  readonly topic: string;
  readonly payload: string;
  readonly retain: boolean;
}

/** Connects as `<tenant>/user`; `got` collects every message from the start (queued ones follow CONNACK at once). */
function connect(
  port: number,
  tenant: string,
  opts: IClientOptions = {},
): Promise<{ client: MqttClient; sessionPresent: boolean; got: Received[] }> {
  return new Promise((resolve, reject) => {
    const client = mqtt.connect({
      host: '127.0.0.1',
      port,
      username: `${tenant}/user`,
      reconnectPeriod: 0,
      connectTimeout: 5000,
      protocolVersion: 5,
      ...opts,
    });
    clients.push(client);
    const got = collect(client);
    client.once('connect', (connack) => resolve({ client, sessionPresent: connack.sessionPresent, got }));
    client.once('error', reject);
    client.once('close', () => reject(new Error(`closed before CONNACK (${tenant})`)));
  });
}

/** Collects every message a client receives. */
function collect(client: MqttClient): Received[] {
  const got: Received[] = [];
  client.on('message', (topic, payload, packet: IPublishPacket) => got.push({ topic, payload: payload.toString(), retain: packet.retain }));
  return got;
}

function cli(args: readonly string[]): { status: number | null; out: string } {
  const r = spawnSync(process.execPath, [CLI, ...args], { env: env(), encoding: 'utf8', timeout: 15000 });
  return { status: r.status, out: `${r.stdout}${r.stderr}` };
}

function alive(pid: number): boolean {
  try {
    process.kill(pid, 0);
    return true;
  } catch {
    return false;
  }
}

beforeAll(() => {
  dir = mkdtempSync(path.join(os.tmpdir(), 'bifro-workers-'));
});
afterAll(async () => {
  for (const c of clients.splice(0)) c.end(true);
  for (const r of raws.splice(0)) r.destroy();
  for (const b of brokers.splice(0)) {
    if (b.child.exitCode === null && b.child.signalCode === null) {
      b.child.kill('SIGKILL');
      await b.exited;
    }
  }
  rmSync(dir, { recursive: true, force: true });
});
afterEach(() => {
  for (const c of clients.splice(0)) c.end(true);
});

describe('21 worker processes (--workers 2)', () => {
  let broker: Broker;
  let config: string;

  beforeAll(async () => {
    expect(T0).not.toBe(T1);
    config = writeConfig('bifro.yml', [
      `pluginsDir: ${JSON.stringify(path.join(REPO, 'plugins'))}`,
      ...TCP_ONLY,
      'log: { level: debug }',
      'plugins:',
      '  storage: "@bifro/plugin-storage-level"',
    ]);
    broker = await start(config, ['--workers', String(WORKERS)]);
  });

  it('runs two workers on the shared port; each hands the connections of the other worker’s tenant over', async () => {
    // Each worker writes its "ready" line to the shared stdout itself: it may come through the pipe
    // after the primary's "bifro started", which follows the workers' ready messages over IPC.
    expect(await until(() => broker.workerPid(0) !== undefined && broker.workerPid(1) !== undefined)).toBe(true);
    expect(broker.workerPid(0)).not.toBe(broker.workerPid(1));
    // Two of each tenant in a row: strictly alternating tenants would line up with the round robin.
    for (let i = 0; i < 8; i++) await connect(broker.port, i % 4 < 2 ? T0 : T1, { clientId: `spread-${i}` });
    // Round robin gives each worker connections of both tenants: worker 1 hands T0's to worker 0 and back.
    const handed = (from: number, tenant: string): boolean =>
      broker.count((l) => l.worker === from && l.tenantId === tenant && l.msg === `connection handed over to worker ${1 - from}`) > 0;
    expect(await until(() => handed(1, T0) && handed(0, T1))).toBe(true);
    expect(broker.count((l) => l.worker === 0 && l.msg === 'connection adopted from worker 1')).toBeGreaterThan(0);
  });

  it('publishes QoS 0 and 1 between connections of one tenant whichever worker accepted them', async () => {
    for (const tenant of [T0, T1]) {
      const subs = await Promise.all([0, 1, 2, 3].map((i) => connect(broker.port, tenant, { clientId: `ps-s${i}` })));
      const got = subs.map((s) => s.got);
      for (const s of subs) await s.client.subscribeAsync('ps/#', { qos: 1 });
      const pubs = await Promise.all([0, 1, 2, 3].map((i) => connect(broker.port, tenant, { clientId: `ps-p${i}` })));
      for (const [i, p] of pubs.entries()) {
        await p.client.publishAsync(`ps/${i}`, `q0-${i}`, { qos: 0 });
        await p.client.publishAsync(`ps/${i}`, `q1-${i}`, { qos: 1 });
      }
      expect(await until(() => got.every((g) => g.length === 8))).toBe(true);
      for (const g of got) expect(g.map((m) => m.payload).sort()).toEqual(['q0-0', 'q0-1', 'q0-2', 'q0-3', 'q1-0', 'q1-1', 'q1-2', 'q1-3']);
      for (const c of [...subs, ...pubs]) c.client.end(true);
    }
  });

  it('serves retained messages to every later subscriber of the tenant', async () => {
    const pub = await connect(broker.port, T1, { clientId: 'ret-pub' });
    await pub.client.publishAsync('ret/state', 'on', { qos: 1, retain: true });
    for (let i = 0; i < 4; i++) {
      const sub = await connect(broker.port, T1, { clientId: `ret-sub${i}` });
      const got = sub.got;
      await sub.client.subscribeAsync('ret/#', { qos: 1 });
      expect(await until(() => got.length === 1)).toBe(true);
      expect(got[0]).toEqual({ topic: 'ret/state', payload: 'on', retain: true });
    }
  });

  it('keeps tenants apart', async () => {
    const a = await connect(broker.port, T0, { clientId: 'iso-a' });
    const b = await connect(broker.port, T1, { clientId: 'iso-b' });
    const gotA = a.got;
    const gotB = b.got;
    await a.client.subscribeAsync('#', { qos: 1 });
    await b.client.subscribeAsync('#', { qos: 1 });
    // Same client id in both tenants: two sessions, no takeover.
    const a2 = await connect(broker.port, T0, { clientId: 'iso-same' });
    const b2 = await connect(broker.port, T1, { clientId: 'iso-same' });
    await a2.client.publishAsync('iso/x', 'from-a', { qos: 1 });
    await b2.client.publishAsync('iso/x', 'from-b', { qos: 1 });
    expect(await until(() => gotA.some((m) => m.topic === 'iso/x') && gotB.some((m) => m.topic === 'iso/x'))).toBe(true);
    await sleep(200);
    expect(gotA.filter((m) => !m.retain).map((m) => m.payload)).toEqual(['from-a']);
    expect(gotB.filter((m) => !m.retain).map((m) => m.payload)).toEqual(['from-b']);
    expect(a2.client.connected && b2.client.connected).toBe(true);
  });

  it('resumes a persistent session on its owner and delivers what was queued, however the reconnect lands', async () => {
    const persistent: IClientOptions = { clientId: 'ps-durable', clean: false, properties: { sessionExpiryInterval: 3600 } };
    const first = await connect(broker.port, T0, persistent);
    expect(first.sessionPresent).toBe(false);
    await first.client.subscribeAsync('queued/#', { qos: 1 });
    first.client.end(true);
    // Worker 1 hands the reconnect to worker 0 or worker 0 takes it itself, as the round robin falls:
    // reconnect until both happened (each round queues three messages and collects them).
    const handedOver = (): number => broker.count((l) => l.worker === 1 && (l as { clientId?: string }).clientId === 'ps-durable');
    let direct = 0;
    for (let round = 0; round < 20 && (round < 3 || handedOver() === 0 || direct === 0); round++) {
      await sleep(30);
      const pubs = await Promise.all(
        Array.from({ length: 1 + (round % 2) }, (_v, k) => connect(broker.port, T0, { clientId: `queued-pub${round}-${k}` })),
      );
      for (let i = 0; i < 3; i++) await pubs[0]!.client.publishAsync(`queued/${round}`, `r${round}-${i}`, { qos: 1 });
      for (const p of pubs) p.client.end(true);
      const before = handedOver();
      const again = await connect(broker.port, T0, persistent);
      expect(again.sessionPresent).toBe(true);
      expect(await until(() => again.got.length === 3)).toBe(true);
      expect(again.got.map((m) => m.payload)).toEqual([`r${round}-0`, `r${round}-1`, `r${round}-2`]);
      if (handedOver() === before) direct++;
      again.client.end(true);
    }
    expect(handedOver()).toBeGreaterThan(0);
    expect(direct).toBeGreaterThan(0);
  });

  it('restarts a killed worker, which then serves its tenants again with their stored state', async () => {
    const victim = broker.workerPid(0)!;
    const other = broker.workerPid(1)!;
    // Something stored in T0 (owned by worker 0) before the kill.
    const pub = await connect(broker.port, T0, { clientId: 'kill-pub' });
    await pub.client.publishAsync('kill/state', 'kept', { qos: 1, retain: true });
    pub.client.end(true);
    process.kill(victim, 'SIGKILL');
    expect(
      await until(() => broker.count((l) => l.msg?.startsWith(`worker 0 (pid ${victim}) exited (signal SIGKILL)`) === true) === 1),
    ).toBe(true);
    // While worker 0 restarts, worker 1 accepts T0's connections and the primary holds them for worker 0.
    const early = connect(broker.port, T0, { clientId: 'kill-early' });
    expect(await until(() => broker.count((l) => l.msg?.startsWith('worker 0 restarted') === true) === 1, 10000)).toBe(true);
    expect((await early).client.connected).toBe(true);
    expect(await until(() => broker.workerPid(0) !== victim)).toBe(true);
    expect(broker.workerPid(1)).toBe(other);
    for (let i = 0; i < 4; i++) {
      const sub = await connect(broker.port, T0, { clientId: `kill-sub${i}` });
      const got = sub.got;
      await sub.client.subscribeAsync('kill/#', { qos: 1 });
      expect(await until(() => got.length === 1)).toBe(true);
      expect(got[0]!.payload).toBe('kept');
    }
  });

  it('is one broker for `bifro status` and `bifro stop` (the pid file names the primary)', async () => {
    const workers = [broker.workerPid(0)!, broker.workerPid(1)!];
    const status = cli(['status', '--config', config]);
    expect(status.status).toBe(0);
    expect(status.out).toContain(`bifro is running (pid ${broker.child.pid}`);
    const stop = cli(['stop', '--config', config]);
    expect(stop.status).toBe(0);
    expect(await broker.exited).toBe(0);
    expect(broker.count((l) => l.msg === 'workers stopped')).toBe(1);
    expect(await until(() => workers.every((pid) => !alive(pid)))).toBe(true);
    expect(cli(['status', '--config', config]).status).toBe(3);
  });

  it('refuses to start the data directory with another worker count', async () => {
    await expect(start(config, ['--workers', '3'])).rejects.toThrow(/exited with 1[\s\S]*BIFRO_WORKERS_COUNT_MISMATCH[\s\S]*workers: 2/);
    await expect(start(config)).rejects.toThrow(/exited with 1[\s\S]*BIFRO_WORKERS_COUNT_MISMATCH/);
  });
});

describe('21 worker processes: configuration', () => {
  it('refuses a ws listener with workers: 2 (config key), naming the listener', async () => {
    const config = writeConfig('ws.yml', [
      `pluginsDir: ${JSON.stringify(path.join(REPO, 'plugins'))}`,
      'workers: 2',
      'listeners:',
      '  - { name: tcp, host: 127.0.0.1, port: 0 }',
      '  - { name: web, type: ws, host: 127.0.0.1, port: 0 }',
    ]);
    await expect(start(config)).rejects.toThrow(/exited with 2[\s\S]*BIFRO_CONFIG_WORKERS_LISTENER[\s\S]*listeners\[1\]\.type/);
  });

  it('hands over v5 enhanced authentication with its outcome (the exchange ran where the client connected)', async () => {
    // The fixture auth answers TEST-CHALLENGE (challenge, then "pass") and puts everyone in its tenant: T1, owned by worker 1.
    const config = writeConfig(
      'enhanced.yml',
      [
        `pluginsDir: ${JSON.stringify(FIXTURE_PLUGINS)}`,
        'workers: 2',
        ...TCP_ONLY,
        'log: { level: debug }',
        'plugins:',
        `  auth: [{ use: "@fixtures/valid-auth", options: { tenantId: ${T1} } }]`,
        '  storage: "@bifro/plugin-storage-memory"',
      ],
      path.join(dir, 'enhanced-data'),
    );
    const broker = await start(config);
    const connected: RawClient[] = [];
    for (let i = 0; i < 6; i++) {
      const c = await RawClient.connect(broker.port, 5);
      raws.push(c);
      c.send(
        {
          cmd: 'connect',
          protocolId: 'MQTT',
          protocolVersion: 5,
          clientId: `ea-${i}`,
          clean: true,
          keepalive: 30,
          properties: { authenticationMethod: 'TEST-CHALLENGE' },
        },
        5,
      );
      const challenge = (await c.next()) as IAuthPacket;
      expect(challenge.cmd).toBe('auth');
      c.send(
        { cmd: 'auth', reasonCode: 0x18, properties: { authenticationMethod: 'TEST-CHALLENGE', authenticationData: Buffer.from('pass') } },
        5,
      );
      const connack = (await c.next()) as IConnackPacket;
      expect(connack.cmd).toBe('connack');
      expect(connack.reasonCode).toBe(0);
      expect(connack.properties?.authenticationMethod).toBe('TEST-CHALLENGE');
      connected.push(c);
    }
    expect(broker.count((l) => l.worker === 0 && l.tenantId === T1 && l.msg === 'connection handed over to worker 1')).toBeGreaterThan(0);
    // All six are served by worker 1: one subscribes, the others publish to it.
    const [sub, ...pubs] = connected;
    sub!.send({ cmd: 'subscribe', messageId: 1, subscriptions: [{ topic: 'ea/#', qos: 0 }] }, 5);
    expect((await sub!.next())?.cmd).toBe('suback');
    for (const [i, p] of pubs.entries())
      p.send({ cmd: 'publish', topic: `ea/${i}`, payload: Buffer.from(`m${i}`), qos: 0, dup: false, retain: false }, 5);
    const got: string[] = [];
    for (let i = 0; i < pubs.length; i++) {
      const packet = (await sub!.next()) as IPublishPacket | undefined;
      if (packet?.cmd === 'publish') got.push(packet.payload.toString());
    }
    expect(got.sort()).toEqual(['m0', 'm1', 'm2', 'm3', 'm4']);
    broker.child.kill('SIGTERM');
    expect(await broker.exited).toBe(0);
  });
});
