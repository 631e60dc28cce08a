import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import mqtt, { type IClientOptions, type MqttClient } from 'mqtt';
import type { IPublishPacket } from 'mqtt-packet';
import { startBrokerProcess, type BrokerProcess } from '../support/broker-process';
import { RawClient } from '../support/raw-client';
import { FIXTURE_PLUGINS, REPO } from '../support/test-broker';

/**
 * Area 15, durability: a broker process with the level store is killed with SIGKILL and started
 * again on the same data directory. What it acknowledged must still be there: persistent
 * sessions, their queued QoS 1/2 messages (QoS 2 exactly once), retained messages, wills with a
 * delay, session expiry.
 */

let dir: string;
let config: string;
const brokers: BrokerProcess[] = [];
const clients: MqttClient[] = [];

function writeConfig(extra = '', pluginsDir = path.join(REPO, 'plugins')): string {
  const file = path.join(dir, 'bifro.yml');
  writeFileSync(
    file,
    [
      `dataDir: ${JSON.stringify(path.join(dir, 'data'))}`,
      `pluginsDir: ${JSON.stringify(pluginsDir)}`,
      'listeners:',
      '  - { name: tcp, host: 127.0.0.1, port: 0 }',
      'log: { level: info }',
      'plugins:',
      '  storage: "@bifro/plugin-storage-level"',
      extra,
    ].join('\n'),
  );
  return file;
}

async function start(): Promise<BrokerProcess> {
  const b = await startBrokerProcess(config);
  brokers.push(b);
  return b;
}

function connect(port: number, opts: IClientOptions): Promise<{ client: MqttClient; sessionPresent: boolean }> {
  return new Promise((resolve, reject) => {
    const client = mqtt.connect({ host: '127.0.0.1', port, reconnectPeriod: 0, connectTimeout: 5000, protocolVersion: 5, ...opts });
    clients.push(client);
    client.once('connect', (connack) => resolve({ client, sessionPresent: connack.sessionPresent }));
    client.once('error', reject);
  });
}

async function until(check: () => boolean, ms: number): Promise<boolean> {
  const deadline = Date.now() + ms;
  while (!check() && Date.now() < deadline) await new Promise((r) => setTimeout(r, 20));
  return check();
}

const persistent = (clientId: string): IClientOptions => ({ clientId, clean: false, properties: { sessionExpiryInterval: 3600 } });

beforeEach(() => {
  dir = mkdtempSync(path.join(os.tmpdir(), 'bifro-durable-'));
  config = writeConfig();
});
afterEach(async () => {
  for (const c of clients.splice(0)) c.end(true);
  for (const b of brokers.splice(0)) if (b.child.exitCode === null && b.child.signalCode === null) await b.kill9();
  rmSync(dir, { recursive: true, force: true });
});

describe('15 durability across kill -9 (level store)', () => {
  it('delivers every acknowledged QoS 1 message and every QoS 2 message exactly once to a persistent subscriber', async () => {
    const n = 200;
    let broker = await start();
    const sub = await connect(broker.port, persistent('dur-sub'));
    await sub.client.subscribeAsync({ 'dur/q1': { qos: 1 }, 'dur/q2': { qos: 2 } });
    sub.client.end(true);
    const pub = await connect(broker.port, { clientId: 'dur-pub' });
    const sends: Promise<unknown>[] = [];
    for (let i = 0; i < n; i++) {
      sends.push(pub.client.publishAsync('dur/q1', `a${i}`, { qos: 1 }));
      sends.push(pub.client.publishAsync('dur/q2', `b${i}`, { qos: 2 }));
    }
    await Promise.all(sends); // every PUBACK / PUBCOMP is in
    await broker.kill9();

    broker = await start();
    const got: string[] = [];
    const again = await new Promise<{ client: MqttClient; sessionPresent: boolean }>((resolve, reject) => {
      const client = mqtt.connect({
        host: '127.0.0.1',
        port: broker.port,
        reconnectPeriod: 0,
        protocolVersion: 5,
        ...persistent('dur-sub'),
      });
      clients.push(client);
      client.on('message', (_t, payload) => got.push(payload.toString()));
      client.once('connect', (connack) => resolve({ client, sessionPresent: connack.sessionPresent }));
      client.once('error', reject);
    });
    expect(again.sessionPresent).toBe(true);
    expect(await until(() => got.length >= 2 * n, 10000)).toBe(true);
    await new Promise((r) => setTimeout(r, 300)); // no late duplicates
    const q1 = got.filter((p) => p.startsWith('a'));
    const q2 = got.filter((p) => p.startsWith('b'));
    expect(new Set(q1).size).toBe(n); // at least once
    expect(q2.sort()).toEqual(Array.from({ length: n }, (_, i) => `b${i}`).sort()); // exactly once
    expect(q1.filter((p, i) => q1.indexOf(p) === i)).toEqual(Array.from({ length: n }, (_, i) => `a${i}`)); // in order
  });

  it('redelivers with DUP what a connected persistent subscriber had not acknowledged when the broker died [MQTT-4.4.0-1]', async () => {
    let broker = await start();
    const connect4 = (c: RawClient): void =>
      c.send({ cmd: 'connect', protocolId: 'MQTT', protocolVersion: 4, clientId: 'slow-acker', clean: false, keepalive: 60 });
    const sub = await RawClient.connect(broker.port);
    connect4(sub);
    expect((await sub.next())?.cmd).toBe('connack');
    sub.send({ cmd: 'subscribe', messageId: 1, subscriptions: [{ topic: 'dur/noack', qos: 1 }] });
    expect((await sub.next())?.cmd).toBe('suback');
    const pub = await connect(broker.port, { clientId: 'noack-pub' });
    // The subscriber reads but never sends PUBACK: each publisher PUBACK waits for the disk.
    for (let i = 0; i < 20; i++) await pub.client.publishAsync('dur/noack', `n${i}`, { qos: 1 });
    await broker.kill9();
    sub.destroy();

    broker = await start();
    const again = await RawClient.connect(broker.port);
    connect4(again);
    expect((await again.next())?.cmd).toBe('connack');
    const got: IPublishPacket[] = [];
    for (let i = 0; i < 20; i++) {
      const p = (await again.next(5000)) as IPublishPacket | undefined;
      if (p?.cmd !== 'publish') break;
      got.push(p);
    }
    again.destroy();
    expect(got.map((p) => p.payload.toString())).toEqual(Array.from({ length: 20 }, (_, i) => `n${i}`));
    expect(got.every((p) => p.dup && p.qos === 1)).toBe(true);
  });

  it('keeps retained messages across a crash', async () => {
    let broker = await start();
    const pub = await connect(broker.port, { clientId: 'ret-pub' });
    await pub.client.publishAsync('dur/retained/a', 'kept', { qos: 1, retain: true });
    await pub.client.publishAsync('dur/retained/b', 'gone', { qos: 1, retain: true });
    await pub.client.publishAsync('dur/retained/b', '', { qos: 1, retain: true });
    await broker.kill9();
    broker = await start();
    const got: { topic: string; payload: string; retain: boolean }[] = [];
    const sub = await connect(broker.port, { clientId: 'ret-sub' });
    sub.client.on('message', (topic, payload, packet) => got.push({ topic, payload: payload.toString(), retain: packet.retain }));
    await sub.client.subscribeAsync('dur/retained/#', { qos: 1 });
    expect(await until(() => got.length >= 1, 5000)).toBe(true);
    await new Promise((r) => setTimeout(r, 200));
    expect(got).toEqual([{ topic: 'dur/retained/a', payload: 'kept', retain: true }]);
  });

  it('publishes the will of a client connected at the crash after its delay, once the broker is back', async () => {
    let broker = await start();
    const watcher = await connect(broker.port, persistent('will-watch'));
    await watcher.client.subscribeAsync('dur/will', { qos: 1 });
    watcher.client.end(true);
    await connect(broker.port, {
      clientId: 'will-owner',
      clean: false,
      properties: { sessionExpiryInterval: 60 },
      will: { topic: 'dur/will', payload: Buffer.from('owner gone'), qos: 1, retain: false, properties: { willDelayInterval: 2 } },
    });
    await broker.kill9();
    broker = await start();
    const got: string[] = [];
    const started = Date.now();
    const client = mqtt.connect({
      host: '127.0.0.1',
      port: broker.port,
      reconnectPeriod: 0,
      protocolVersion: 5,
      ...persistent('will-watch'),
    });
    clients.push(client);
    client.on('message', (_t, payload) => got.push(payload.toString()));
    const arrived = await until(() => got.length > 0, 8000);
    if (!arrived) console.log(broker.output());
    expect(arrived).toBe(true);
    expect(got).toEqual(['owner gone']);
    expect(Date.now() - started).toBeGreaterThanOrEqual(1000);
  });

  it('ends a session whose expiry passed while the broker was down', async () => {
    let broker = await start();
    const c = await connect(broker.port, { clientId: 'short', clean: false, properties: { sessionExpiryInterval: 1 } });
    await c.client.subscribeAsync('dur/short', { qos: 1 });
    await c.client.endAsync();
    await new Promise((r) => setTimeout(r, 200)); // the broker has recorded the disconnect
    await broker.kill9();
    await new Promise((r) => setTimeout(r, 1500));
    broker = await start();
    const again = await connect(broker.port, { clientId: 'short', clean: false, properties: { sessionExpiryInterval: 1 } });
    expect(again.sessionPresent).toBe(false);
  });

  it('keeps a session with a long expiry across a crash', async () => {
    let broker = await start();
    const c = await connect(broker.port, persistent('long'));
    await c.client.subscribeAsync('dur/long', { qos: 1 });
    await broker.kill9();
    broker = await start();
    const again = await connect(broker.port, persistent('long'));
    expect(again.sessionPresent).toBe(true);
  });

  it('refuses to start on a data directory another broker holds, naming it', async () => {
    const broker = await start();
    expect(broker.port).toBeGreaterThan(0);
    // Same data dir, own pid file: the store's lock is what refuses it.
    writeFileSync(
      path.join(dir, 'other.yml'),
      `${readFileSync(config, 'utf8')}\npidFile: ${JSON.stringify(path.join(dir, 'other.pid'))}\n`,
    );
    await expect(startBrokerProcess(path.join(dir, 'other.yml'))).rejects.toThrow(/BIFRO_STORAGE_LOCKED/);
  });
});

describe('15 inbox limits per tenant setting', () => {
  beforeEach(() => {
    // The settings fixture gives two tenants a 5-message inbox with the two drop policies; the
    // level plugin is found by package name.
    config = writeConfig(
      [
        '  settings:',
        '    use: "@fixtures/valid-settings"',
        '    options: { values: { dropold: { SessionInboxSize: 5, QoS0DropOldest: true }, dropnew: { SessionInboxSize: 5 } } }',
      ].join('\n'),
      FIXTURE_PLUGINS,
    );
  });

  it.each([
    ['dropold', ['m5', 'm6', 'm7', 'm8', 'm9']],
    ['dropnew', ['m0', 'm1', 'm2', 'm3', 'm4']],
  ])('tenant %s keeps %j of 10 queued messages', async (tenant, expected) => {
    const broker = await start();
    const sub = await connect(broker.port, { ...persistent(`inbox-${tenant}`), username: `${tenant}/u` });
    await sub.client.subscribeAsync('dur/inbox', { qos: 1 });
    sub.client.end(true);
    const pub = await connect(broker.port, { clientId: `inbox-pub-${tenant}`, username: `${tenant}/p` });
    for (let i = 0; i < 10; i++) await pub.client.publishAsync('dur/inbox', `m${i}`, { qos: 1 });
    const got: string[] = [];
    const client = mqtt.connect({
      host: '127.0.0.1',
      port: broker.port,
      reconnectPeriod: 0,
      protocolVersion: 5,
      username: `${tenant}/u`,
      ...persistent(`inbox-${tenant}`),
    });
    clients.push(client);
    client.on('message', (_t, payload) => got.push(payload.toString()));
    expect(await until(() => got.length >= 5, 5000)).toBe(true);
    await new Promise((r) => setTimeout(r, 200));
    expect(got).toEqual(expected);
  });
});
