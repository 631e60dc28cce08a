import { execFile } from 'node:child_process';
import { existsSync, mkdtempSync, readFileSync, readdirSync, rmSync, statSync, truncateSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import mqtt, { type IClientOptions, type MqttClient } from 'mqtt';
import parsePrometheusTextFormat from 'parse-prometheus-text-format';
import { startApiBroker, type ApiBroker } from '../support/api-broker';
import { startBrokerProcess, type BrokerProcess } from '../support/broker-process';
import { expectPacket, rawConnect, sleep } from '../support/mqtt-helpers';
import { mountSmallDisk, type SmallDisk } from '../support/small-disk';
import { REPO, startTestBroker, type TestBroker } from '../support/test-broker';

/**
 * Area 50, storage faults (issue "Nothing acknowledged is lost"): a failed storage write shows
 * (one error line per episode, metrics, events, `/ready` 503 with the reason) and heals once its
 * cause goes away, without a restart; damaged data met while running is repaired, and intact
 * sessions keep working; a recovery that would lose acknowledged writes refuses to start, and
 * `bifro storage check|repair` say what is lost before they repair. Real brokers, real clients,
 * a real tmpfs filled up.
 */

const CLI = path.join(REPO, 'core', 'dist', 'cli', 'main.js');
const clients: MqttClient[] = [];
afterEach(() => {
  for (const c of clients.splice(0)) c.end(true);
});

function connect(port: number, opts: IClientOptions, onMessage?: (payload: string) => void): Promise<MqttClient> {
  return new Promise((resolve, reject) => {
    const client = mqtt.connect({ host: '127.0.0.1', port, reconnectPeriod: 0, connectTimeout: 5000, protocolVersion: 5, ...opts });
    clients.push(client);
    if (onMessage !== undefined) client.on('message', (_t, p) => onMessage(p.toString()));
    client.once('connect', () => resolve(client));
    client.once('error', reject);
  });
}

const persistent = (clientId: string): IClientOptions => ({ clientId, clean: false, properties: { sessionExpiryInterval: 3600 } });

/** Publishes `payload` at QoS 1; resolves with the PUBACK reason code (0 acknowledged, 0x80 refused). */
async function publish(client: MqttClient, topic: string, payload: string): Promise<number> {
  try {
    const ack = (await client.publishAsync(topic, payload, { qos: 1 })) as { reasonCode?: number } | undefined;
    return ack?.reasonCode ?? 0;
  } catch (err) {
    const code = (err as { code?: number }).code;
    if (typeof code === 'number') return code;
    throw err;
  }
}

async function until(check: () => boolean | Promise<boolean>, ms: number, what: string): Promise<void> {
  const deadline = Date.now() + ms;
  while (!(await check())) {
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`);
    await sleep(50);
  }
}

function metric(text: string, name: string, labels: Record<string, string> = {}): number | undefined {
  const family = parsePrometheusTextFormat(text).find((f) => f.name === name);
  const sample = family?.metrics.find((m) => Object.entries(labels).every(([k, v]) => m.labels?.[k] === v));
  return sample?.value === undefined ? undefined : Number(sample.value);
}

interface RecordedEvent {
  type: string;
  detail: Record<string, unknown>;
}
function recorded(sink: string): RecordedEvent[] {
  const sinks = (globalThis as { __bifroRecordedEvents?: Record<string, RecordedEvent[]> }).__bifroRecordedEvents ?? {};
  return sinks[sink] ?? [];
}

function logged(broker: TestBroker, msg: string): Record<string, unknown>[] {
  return broker.logs.filter((l) => l.msg === msg);
}

describe('50 a full disk: refused, shown, healed without a restart', () => {
  let disk: SmallDisk;
  let broker: ApiBroker;
  beforeAll(async () => {
    disk = mountSmallDisk(8);
    broker = await startApiBroker(
      [
        'plugins:',
        `  storage: { use: "@bifro/plugin-storage-level", options: { path: ${JSON.stringify(path.join(disk.dir, 'db'))} } }`,
        '  events:',
        '    - { use: "@fixtures/recording-events", options: { sink: "disk-full", eventTypes: [storageFailed, storageRecovered] } }',
      ].join('\n'),
    );
  });
  afterAll(async () => {
    await broker.stop();
    disk.unmount();
  });

  it('answers 0x80 while the disk is full, says so once, turns /ready to 503, and after space is freed acknowledges again; nothing acknowledged is lost', async () => {
    const sub = await connect(broker.port, persistent('df-sub'));
    await sub.subscribeAsync('df/t', { qos: 1 });
    await sub.endAsync();
    // A second persistent subscriber, online, changes its subscriptions while the disk is full.
    const changer = await rawConnect(broker.port, {
      protocolVersion: 5,
      clientId: 'df-changer',
      clean: false,
      properties: { sessionExpiryInterval: 600 },
    });
    changer.send({ cmd: 'subscribe', messageId: 1, subscriptions: [{ topic: 'df/keep', qos: 1 }] });
    expect((await expectPacket(changer.raw, 'suback')).granted).toEqual([1]);
    const pub = await connect(broker.port, { clientId: 'df-pub' });
    const acked: string[] = [];
    for (let i = 0; i < 20; i++) if ((await publish(pub, 'df/t', `m${i}`)) === 0) acked.push(`m${i}`);
    expect(acked.length).toBe(20);

    disk.fill();
    let refused = 0;
    for (let i = 20; i < 3000 && refused === 0; i++) {
      const rc = await publish(pub, 'df/t', `m${i}`);
      if (rc === 0) acked.push(`m${i}`);
      else if (rc === 0x80) refused++;
      else throw new Error(`PUBACK ${rc}`);
    }
    expect(refused).toBe(1);
    // More refusals while it lasts: still one error line for the episode.
    for (let i = 0; i < 3; i++) expect(await publish(pub, 'df/t', `late${i}`)).toBe(0x80);
    // A subscription or an unsubscription that cannot be stored is refused and undone: memory keeps matching the stored record.
    changer.send({ cmd: 'subscribe', messageId: 2, subscriptions: [{ topic: 'df/new', qos: 1 }] });
    expect((await expectPacket(changer.raw, 'suback', 5000)).granted).toEqual([0x80]);
    changer.send({ cmd: 'unsubscribe', messageId: 3, unsubscriptions: ['df/keep'] });
    expect((await expectPacket(changer.raw, 'unsuback', 5000)).granted).toEqual([0x80]);

    const ready = await broker.http('GET', '/ready', { token: null });
    expect(ready.status).toBe(503);
    expect(ready.body).toMatchObject({ ready: false, checks: { storage: false } });
    expect((ready.body as { reasons: string[] }).reasons).toEqual([
      expect.stringMatching(/^storage: level storage .* is reopening after: BIFRO_STORAGE_WRITE_FAILED: .*No space left on device/),
    ]);
    const failedLines = logged(
      broker,
      'storage call failed: QoS 1/2 messages that need storage are refused (v5 0x80, v3 disconnected) until it works again',
    );
    expect(failedLines).toHaveLength(1);
    expect(failedLines[0]).toMatchObject({ level: 50, call: 'inbox append', tenantId: 'default', clientId: 'df-sub' });
    const during = (await broker.http('GET', '/metrics')).text;
    expect(metric(during, 'bifro_storage_up')).toBe(0);
    expect(metric(during, 'bifro_storage_failure_episodes_total')).toBe(1);
    expect(metric(during, 'bifro_storage_refused_messages_total')).toBeGreaterThanOrEqual(4);
    expect(metric(during, 'bifro_storage_failed_calls_total', { call: 'inbox append' })).toBeGreaterThanOrEqual(4);
    expect(recorded('disk-full').map((e) => e.type)).toEqual(['storageFailed']);

    disk.free();
    await until(async () => (await broker.http('GET', '/ready', { token: null })).status === 200, 20_000, '/ready 200 after freeing space');
    await until(() => logged(broker, 'storage works again').length === 1, 5000, 'the "storage works again" line');
    const healed = logged(broker, 'storage works again')[0]!;
    expect(healed).toMatchObject({ level: 40, failedCalls: expect.any(Number), refusedMessages: expect.any(Number) });
    expect(healed.refusedMessages as number).toBeGreaterThanOrEqual(4);
    expect(recorded('disk-full').map((e) => e.type)).toEqual(['storageFailed', 'storageRecovered']);
    for (let i = 0; i < 10; i++) {
      expect(await publish(pub, 'df/t', `after${i}`)).toBe(0);
      acked.push(`after${i}`);
    }
    // df/keep is still subscribed, df/new is not.
    expect(await publish(pub, 'df/new', 'not subscribed')).toBe(0);
    expect(await publish(pub, 'df/keep', 'kept')).toBe(0);
    expect((await expectPacket(changer.raw, 'publish', 5000)).payload.toString()).toBe('kept');
    changer.raw.destroy();
    expect(metric((await broker.http('GET', '/metrics')).text, 'bifro_storage_up')).toBe(1);

    const got = new Set<string>();
    await connect(broker.port, persistent('df-sub'), (p) => got.add(p));
    await until(() => acked.every((m) => got.has(m)), 10_000, `the ${acked.length} acknowledged messages`);
  }, 60_000);
});

describe('50 damaged table data met while running', () => {
  let dir: string;
  const brokers: TestBroker[] = [];
  afterAll(async () => {
    for (const b of brokers) await b.stop().catch(() => undefined);
    rmSync(dir, { recursive: true, force: true });
  });

  async function start(extra = ''): Promise<TestBroker> {
    const b = await startTestBroker(`plugins:\n  storage: "@bifro/plugin-storage-level"\n${extra}`, { dir, keepDir: true });
    brokers.push(b);
    return b;
  }

  it('is repaired in place: the damaged session keeps what can be read, the other sessions and publishers keep working', async () => {
    dir = mkdtempSync(path.join(os.tmpdir(), 'bifro-e2e-damage-'));
    // Session a's 300 queued messages in one table file, session b's 50 in another.
    let b = await start();
    for (const id of ['dm-a', 'dm-b']) {
      const s = await connect(b.port, persistent(id));
      await s.subscribeAsync(`dm/${id}`, { qos: 1 });
      await s.endAsync();
    }
    let pub = await connect(b.port, { clientId: 'dm-pub' });
    for (let i = 0; i < 300; i++) expect(await publish(pub, 'dm/dm-a', `a${i} ${'payload '.repeat(25)}`)).toBe(0);
    await pub.endAsync();
    await b.stop();
    b = await start();
    pub = await connect(b.port, { clientId: 'dm-pub' });
    for (let i = 0; i < 50; i++) expect(await publish(pub, 'dm/dm-b', `b${i}`)).toBe(0);
    await pub.endAsync();
    await b.stop();
    await (await start()).stop();
    const db = path.join(dir, 'data', 'storage-level');
    const table = readdirSync(db)
      .filter((f) => f.endsWith('.ldb'))
      .map((f) => path.join(db, f))
      .sort((x, y) => statSync(y).size - statSync(x).size)[0]!;
    const bytes = readFileSync(table);
    for (let i = 0; i < 64; i++) bytes[Math.floor(bytes.length / 3) + i]! ^= 0xff;
    writeFileSync(table, bytes);

    const broker = await start(
      '  events:\n    - { use: "@fixtures/recording-events", options: { sink: "damage", eventTypes: [storageFailed, storageRecovered] } }',
    );
    const gotB: string[] = [];
    await connect(broker.port, persistent('dm-b'), (p) => gotB.push(p));
    await until(() => gotB.length >= 50, 5000, "session b's 50 messages");
    const gotA = new Set<string>();
    // a's first connection meets the damage (refused, or its inbox read fails); the storage repairs itself.
    await connect(broker.port, persistent('dm-a'), (p) => gotA.add(p.split(' ')[0]!)).catch(() => undefined);
    await until(() => logged(broker, 'level storage repaired damaged data').length === 1, 10_000, 'the repair');
    const repaired = logged(broker, 'level storage repaired damaged data')[0]!;
    expect(repaired.level).toBe(50);
    const lost = (repaired.lost as Record<string, number>)['queued messages']!;
    expect(lost).toBeGreaterThan(0);
    expect(lost).toBeLessThan(300);
    // Publishers keep being acknowledged, session b keeps receiving.
    pub = await connect(broker.port, { clientId: 'dm-pub' });
    for (let i = 50; i < 60; i++) expect(await publish(pub, 'dm/dm-b', `b${i}`)).toBe(0);
    await until(() => gotB.length >= 60, 5000, "session b's later messages");
    // Session a gets every message that could be read: 300 minus what the repair reported lost.
    for (const c of clients.filter((c) => c.options.clientId === 'dm-a')) c.end(true);
    await connect(broker.port, persistent('dm-a'), (p) => gotA.add(p.split(' ')[0]!));
    await until(() => gotA.size >= 300 - lost, 10_000, `session a's ${300 - lost} readable messages`);
    expect(gotA.size).toBe(300 - lost);
    await until(() => recorded('damage').length === 2, 5000, 'the storageRecovered event');
    expect(recorded('damage').map((e) => e.type)).toEqual(['storageFailed', 'storageRecovered']);
  }, 60_000);
});

describe('50 a write-ahead log that lost acknowledged writes: refused at start, bifro storage check|repair', () => {
  let dir: string;
  let config: string;
  const procs: BrokerProcess[] = [];
  afterAll(async () => {
    for (const p of procs) if (p.child.exitCode === null && p.child.signalCode === null) await p.kill9();
    rmSync(dir, { recursive: true, force: true });
  });

  function cli(args: readonly string[]): Promise<{ code: number; out: string }> {
    return new Promise((resolve) => {
      execFile(
        process.execPath,
        [CLI, ...args],
        { env: { ...process.env, BIFRO_LOG_PRETTY: 'false' }, timeout: 30_000 },
        (err, stdout, stderr) =>
          resolve({ code: err === null ? 0 : typeof err.code === 'number' ? err.code : 1, out: `${stdout}${stderr}` }),
      );
    });
  }

  it('refuses to start naming the directory and the commands; check reports the loss, repair needs --yes and keeps a copy; the broker then serves what survived', async () => {
    dir = mkdtempSync(path.join(os.tmpdir(), 'bifro-e2e-wal-'));
    config = path.join(dir, 'bifro.yml');
    writeFileSync(
      config,
      [
        `dataDir: ${JSON.stringify(path.join(dir, 'data'))}`,
        'listeners:',
        '  - { name: tcp, host: 127.0.0.1, port: 0 }',
        'plugins:',
        '  storage: "@bifro/plugin-storage-level"',
      ].join('\n'),
    );
    const first = await startBrokerProcess(config);
    procs.push(first);
    const sub = await connect(first.port, persistent('wal-sub'));
    await sub.subscribeAsync('wal/t', { qos: 1 });
    await sub.endAsync();
    const pub = await connect(first.port, { clientId: 'wal-pub' });
    for (let i = 0; i < 200; i++) expect(await publish(pub, 'wal/t', `w${i}`)).toBe(0);
    await pub.endAsync();
    expect((await cli(['storage', 'check', '--config', config])).out).toMatch(
      /BIFRO_CLI_BROKER_RUNNING: .*stop it before `bifro storage check`/,
    );
    expect(await first.stop()).toBe(0);

    const db = path.join(dir, 'data', 'storage-level');
    const wal = path.join(
      db,
      readdirSync(db).find((f) => f.endsWith('.log'))!,
    );
    truncateSync(wal, Math.floor(statSync(wal).size / 2));

    const refused = await startBrokerProcess(config).then(
      (p) => {
        procs.push(p);
        return 'started';
      },
      (err: Error) => err.message,
    );
    expect(refused).toContain('BIFRO_STORAGE_RECOVERY_LOSS');
    expect(refused).toContain(`npx bifro storage check --path ${db}`);
    expect(refused).toContain(`npx bifro storage repair --path ${db}`);

    const check = await cli(['storage', 'check', '--path', db, '--config', config]);
    expect(check.code).toBe(1);
    expect(check.out).toMatch(new RegExp(`^check: ${db.replace(/[.*+?^${}()|[\]\\]/g, '\\$&')} \\(@bifro/plugin-storage-level@`, 'm'));
    expect(check.out).toMatch(/the last \d+ are missing \(the write-ahead log was truncated or lost\)/);
    const kept = Number(/holds: 1 sessions, (\d+) queued messages/.exec(check.out)?.[1]);
    expect(kept).toBeGreaterThan(0);
    expect(kept).toBeLessThan(200);
    expect(check.out).toMatch(/a repair loses: .*\d+ write batches/);
    expect(check.out).toContain('status: damaged (run `bifro storage repair`)');

    const unconfirmed = await cli(['storage', 'repair', '--config', config]);
    expect(unconfirmed.code).toBe(1);
    expect(unconfirmed.out).toContain('BIFRO_STORAGE_REPAIR_UNCONFIRMED');
    const repaired = await cli(['storage', 'repair', '--config', config, '--yes']);
    expect(repaired.code).toBe(0);
    expect(repaired.out).toMatch(/^repaired: /m);
    const backup = /a copy of the data as it was is in (\S+)/.exec(repaired.out)?.[1];
    expect(backup !== undefined && existsSync(path.join(backup, 'CURRENT'))).toBe(true);
    expect((await cli(['storage', 'check', '--config', config])).code).toBe(0);

    const again = await startBrokerProcess(config);
    procs.push(again);
    const got: string[] = [];
    await connect(again.port, persistent('wal-sub'), (p) => got.push(p));
    await until(() => got.length >= kept, 10_000, `the ${kept} messages that survived`);
    expect(got.slice(0, kept)).toEqual(Array.from({ length: kept }, (_, i) => `w${i}`));
  }, 90_000);
});

describe('50 an ended session whose stored data could not be deleted', () => {
  let broker: TestBroker;
  let control: string;
  beforeAll(async () => {
    const dir = mkdtempSync(path.join(os.tmpdir(), 'bifro-e2e-leftover-'));
    control = path.join(dir, 'control');
    writeFileSync(control, 'ok');
    broker = await startTestBroker(
      `plugins:\n  storage: { use: "@fixtures/faulty-storage", options: { inner: level, innerOptions: { path: ${JSON.stringify(path.join(dir, 'db'))} }, controlFile: ${JSON.stringify(control)}, pollMs: 5 } }`,
      { dir },
    );
  });
  afterAll(() => broker.stop());

  it('leaves nothing to a new session with its client id: the delete is done (again) before the new session is stored', async () => {
    const sub = await connect(broker.port, { clientId: 'lo-sub', clean: false, properties: { sessionExpiryInterval: 5 } });
    await sub.subscribeAsync('lo/t', { qos: 1 });
    await sub.endAsync();
    const pub = await connect(broker.port, { clientId: 'lo-pub' });
    for (let i = 0; i < 5; i++) expect(await publish(pub, 'lo/t', `old${i}`)).toBe(0);
    writeFileSync(control, 'fail');
    await sleep(30);
    // The session expires while storage writes fail: its delete fails.
    await broker.clock.advance(6000);
    await until(() => broker.logs.some((l) => l.what === 'session delete'), 3000, 'the failed delete');
    writeFileSync(control, 'ok');
    await sleep(30);
    const got: string[] = [];
    const again = await connect(broker.port, { clientId: 'lo-sub', clean: false, properties: { sessionExpiryInterval: 5 } });
    await again.subscribeAsync('lo/t', { qos: 1 });
    await again.endAsync();
    // Queued while it is away: read from its inbox at the reconnect, where old entries would show.
    expect(await publish(pub, 'lo/t', 'new')).toBe(0);
    await connect(broker.port, { clientId: 'lo-sub', clean: false, properties: { sessionExpiryInterval: 5 } }, (p) => got.push(p));
    await until(() => got.length > 0, 3000, 'the new message');
    await sleep(200);
    expect(got).toEqual(['new']);
  });
});

describe('50 a will fired while storage fails', () => {
  let disk: SmallDisk;
  let dir: string;
  const brokers: TestBroker[] = [];
  beforeAll(() => {
    disk = mountSmallDisk(8);
    dir = mkdtempSync(path.join(os.tmpdir(), 'bifro-e2e-will-disk-'));
  });
  afterAll(async () => {
    for (const b of brokers) await b.stop().catch(() => undefined);
    disk.unmount();
    rmSync(dir, { recursive: true, force: true });
  });

  async function start(): Promise<TestBroker> {
    const db = JSON.stringify(path.join(disk.dir, 'db'));
    const b = await startTestBroker(`plugins:\n  storage: { use: "@bifro/plugin-storage-level", options: { path: ${db} } }`, {
      dir,
      keepDir: true,
    });
    brokers.push(b);
    return b;
  }

  // A will has no publisher to send it again: the online persistent subscriber's inbox write is
  // tried again until storage works, and only a stored will is sent, so a restart before the
  // subscriber completed it still delivers it (before, it went out unstored and a restart lost it).
  it('is stored once storage works again and reaches the persistent QoS 2 subscriber after a restart', async () => {
    let broker = await start();
    const subscriber = { protocolVersion: 5 as const, clientId: 'wd-sub', clean: false, properties: { sessionExpiryInterval: 600 } };
    let sub = await rawConnect(broker.port, subscriber);
    sub.send({ cmd: 'subscribe', messageId: 1, subscriptions: [{ topic: 'wd/will', qos: 2 }] });
    expect((await expectPacket(sub.raw, 'suback')).granted).toEqual([2]);
    const other = await connect(broker.port, persistent('wd-other'));
    await other.subscribeAsync('wd/#', { qos: 1 });
    await other.endAsync();
    const willer = await connect(broker.port, {
      clientId: 'wd-willer',
      will: { topic: 'wd/will', payload: Buffer.from('gone'), qos: 2, retain: false },
    });

    // Full once a write is refused (the first ones after filling may still fit in buffers).
    disk.fill();
    const pub = await connect(broker.port, { clientId: 'wd-pub' });
    let refused = false;
    for (let i = 0; i < 3000 && !refused; i++) refused = (await publish(pub, 'wd/t', `m${i}`)) === 0x80;
    expect(refused).toBe(true);
    willer.stream.destroy();
    // While the disk is full the will is not sent: it is not stored anywhere yet.
    expect(await sub.raw.next(1500)).toBeUndefined();
    disk.free();
    const sent = await expectPacket(sub.raw, 'publish', 10_000);
    expect(sent).toMatchObject({ topic: 'wd/will', qos: 2 });
    expect(sent.payload.toString()).toBe('gone');
    // The subscriber leaves without PUBREC; the broker restarts.
    sub.raw.destroy();
    await broker.stop();
    broker = await start();
    sub = await rawConnect(broker.port, subscriber);
    expect(sub.connack.sessionPresent).toBe(true);
    const again = await expectPacket(sub.raw, 'publish', 5000);
    expect(again).toMatchObject({ topic: 'wd/will', qos: 2, messageId: sent.messageId, dup: true });
    sub.send({ cmd: 'pubrec', messageId: again.messageId! });
    expect(await expectPacket(sub.raw, 'pubrel')).toMatchObject({ messageId: again.messageId });
    sub.send({ cmd: 'pubcomp', messageId: again.messageId! });
    expect(await sub.raw.next(500)).toBeUndefined();
    // The offline persistent subscriber (QoS 1) gets it once too, after what was acknowledged for it.
    const got: string[] = [];
    await connect(broker.port, persistent('wd-other'), (p) => got.push(p));
    await until(() => got.includes('gone'), 5000, "the offline subscriber's will");
    await sleep(300);
    expect(got.filter((p) => p === 'gone')).toHaveLength(1);
    sub.raw.destroy();
  }, 60_000);
});
