import { writeFileSync } from 'node:fs';
import type { IClientOptions, MqttClient } from 'mqtt';
import { startTestBroker, type TestBroker } from '../support/test-broker';
import { expectPacket, rawConnect, sleep, tryConnect, waitUntil } from '../support/mqtt-helpers';

/**
 * Area 20, per-connection limits from tenant settings and the tenant metrics core keeps:
 * InBoundBandWidth and OutBoundBandWidth per connection, MQTT 3 resends (ResendTimeoutSeconds,
 * MaxResendTimes; MQTT 5 never resends while connected), settings announced in CONNACK held for
 * the connection's life while new connections get the new value, SessionInboxSize changed while
 * running, and messages/bytes in and out, drops and sessions per tenant.
 */

let tb: TestBroker;
let file: string;
const clients: MqttClient[] = [];

const BASE = [
  'tenants:',
  '  bwin: { InBoundBandWidth: 20000 }',
  '  bwout: { OutBoundBandWidth: 20000 }',
  '  resend: { ResendTimeoutSeconds: 1, MaxResendTimes: 1 }',
  '  qos: { MaximumQoS: 2 }',
  '  box: { SessionInboxSize: 10 }',
].join('\n');

async function connect(opts: IClientOptions): Promise<{ client: MqttClient; code: number; maximumQoS: number | undefined }> {
  const r = await tryConnect(tb.port, { protocolVersion: 5, ...opts });
  clients.push(r.client);
  return {
    client: r.client,
    code: r.connack !== undefined ? (r.connack.reasonCode ?? 0) : (r.error?.code ?? -1),
    maximumQoS: r.connack?.properties?.maximumQoS,
  };
}

const payload = (i: number): Buffer => Buffer.concat([Buffer.from(`m${i}`.padEnd(4, '_')), Buffer.alloc(9_996)]);
const expected = (n: number): string[] => Array.from({ length: n }, (_, i) => `m${i}`.padEnd(4, '_'));

beforeAll(async () => {
  tb = await startTestBroker('', { settings: BASE + '\n' });
  file = tb.settingsFile;
});
afterEach(() => {
  for (const c of clients.splice(0)) c.end(true);
});
afterAll(() => tb.stop());

describe('20 bandwidth per connection', () => {
  it('slows reading past InBoundBandWidth and loses nothing', async () => {
    const { client: sub } = await connect({ clientId: 'in-sub', username: 'bwin/s' });
    const got: string[] = [];
    sub.on('message', (_t, p) => got.push(p.subarray(0, 4).toString()));
    await sub.subscribeAsync('bw/in', { qos: 0 });
    const { client: pub } = await connect({ clientId: 'in-pub', username: 'bwin/p' });
    const started = Date.now();
    for (let i = 0; i < 5; i++) await pub.publishAsync('bw/in', payload(i), { qos: 1 });
    expect(await waitUntil(() => got.length === 5, 8000)).toBe(true);
    expect(got).toEqual(expected(5));
    // 50 KB at 20 KB/s per connection: reading paused after the second and the fourth message.
    expect(Date.now() - started).toBeGreaterThanOrEqual(1500);
  });

  it('queues deliveries past OutBoundBandWidth and sends them in later seconds, in order', async () => {
    const { client: sub } = await connect({ clientId: 'out-sub', username: 'bwout/s' });
    const got: string[] = [];
    sub.on('message', (_t, p) => got.push(p.subarray(0, 4).toString()));
    await sub.subscribeAsync('bw/out', { qos: 1 });
    const { client: fast } = await connect({ clientId: 'out-fast', username: 'bwout/f' });
    const fastGot: string[] = [];
    fast.on('message', (_t, p) => fastGot.push(p.subarray(0, 4).toString()));
    await fast.subscribeAsync('bw/small', { qos: 0 });
    const { client: pub } = await connect({ clientId: 'out-pub', username: 'bwout/p' });
    const started = Date.now();
    for (let i = 0; i < 5; i++) await pub.publishAsync('bw/out', payload(i), { qos: 1 });
    await pub.publishAsync('bw/small', 'other connection', { qos: 0 });
    // The limit is per connection: another subscriber of the tenant is not held back.
    expect(await waitUntil(() => fastGot.length === 1, 500)).toBe(true);
    expect(got.length).toBeLessThan(5);
    expect(await waitUntil(() => got.length === 5, 8000)).toBe(true);
    expect(got).toEqual(expected(5));
    expect(Date.now() - started).toBeGreaterThanOrEqual(900);
  });
});

describe('20 resends', () => {
  it('resends an unacknowledged QoS 1 message to an MQTT 3.1.1 client with DUP, then gives it up after MaxResendTimes', async () => {
    const s = await rawConnect(tb.port, { protocolVersion: 4, clientId: 'rs-v4', username: 'resend/s' });
    s.send({ cmd: 'subscribe', messageId: 1, subscriptions: [{ topic: 'rs/t', qos: 1 }] });
    await expectPacket(s.raw, 'suback');
    const { client: pub } = await connect({ clientId: 'rs-pub', username: 'resend/p' });
    await pub.publishAsync('rs/t', 'once', { qos: 1 });
    const first = await expectPacket(s.raw, 'publish');
    expect(first.dup).toBe(false);
    const again = await expectPacket(s.raw, 'publish', 4000);
    expect(again.dup).toBe(true);
    expect(again.messageId).toBe(first.messageId);
    expect(Buffer.from(again.payload).toString()).toBe('once');
    // MaxResendTimes 1: no third copy; the message is given up and counted as dropped.
    await sleep(2600);
    expect(s.raw.packets.filter((p) => p.cmd === 'publish')).toHaveLength(0);
    expect(tb.broker.tenantMetrics('resend').messagesDropped).toBe(1);
    s.raw.destroy();
  });

  it('resends PUBREL for QoS 2 to an MQTT 3.1.1 client that did not complete', async () => {
    const s = await rawConnect(tb.port, { protocolVersion: 4, clientId: 'rs-v4-q2', username: 'resend/s2' });
    s.send({ cmd: 'subscribe', messageId: 1, subscriptions: [{ topic: 'rs/q2', qos: 2 }] });
    await expectPacket(s.raw, 'suback');
    const { client: pub } = await connect({ clientId: 'rs-pub2', username: 'resend/p' });
    await pub.publishAsync('rs/q2', 'twice?', { qos: 2 });
    const p = await expectPacket(s.raw, 'publish');
    s.send({ cmd: 'pubrec', messageId: p.messageId! });
    expect((await expectPacket(s.raw, 'pubrel')).messageId).toBe(p.messageId);
    expect((await expectPacket(s.raw, 'pubrel', 4000)).messageId).toBe(p.messageId);
    s.send({ cmd: 'pubcomp', messageId: p.messageId! });
    await sleep(2600);
    expect(s.raw.packets).toHaveLength(0);
    s.raw.destroy();
  });

  it('never resends to a connected MQTT 5 client [MQTT-4.4.0-1]', async () => {
    const s = await rawConnect(tb.port, { protocolVersion: 5, clientId: 'rs-v5', username: 'resend/s5' });
    s.send({ cmd: 'subscribe', messageId: 1, subscriptions: [{ topic: 'rs/v5', qos: 1 }] });
    await expectPacket(s.raw, 'suback');
    const { client: pub } = await connect({ clientId: 'rs-pub5', username: 'resend/p' });
    await pub.publishAsync('rs/v5', 'once', { qos: 1 });
    await expectPacket(s.raw, 'publish');
    await sleep(2600);
    expect(s.raw.packets).toHaveLength(0);
    s.raw.destroy();
  });
});

describe('20 settings changed while connected', () => {
  it('keeps the Maximum QoS a connection was given in CONNACK; new connections get the new one', async () => {
    const { client: before, maximumQoS } = await connect({ clientId: 'qos-before', username: 'qos/a' });
    expect(maximumQoS).toBeUndefined(); // 2: not sent
    writeFileSync(file, BASE.replace('MaximumQoS: 2', 'MaximumQoS: 1') + '\n');
    let applied = false;
    for (const deadline = Date.now() + 3000; !applied && Date.now() < deadline; await sleep(100)) {
      applied = (await connect({ clientId: `qos-${Date.now()}`, username: 'qos/a' })).maximumQoS === 1;
    }
    expect(applied).toBe(true);
    // The old connection was promised QoS 2 and may still use it.
    await expect(before.publishAsync('qos/t', 'x', { qos: 2 })).resolves.toBeDefined();
    expect(before.connected).toBe(true);
  });

  it('applies a new SessionInboxSize to the queue of a connected session', async () => {
    writeFileSync(file, BASE.replace('SessionInboxSize: 10', 'SessionInboxSize: 2') + '\n');
    await sleep(600);
    const s = await rawConnect(tb.port, { protocolVersion: 5, clientId: 'box-sub', username: 'box/s', properties: { receiveMaximum: 1 } });
    s.send({ cmd: 'subscribe', messageId: 1, subscriptions: [{ topic: 'box/t', qos: 1 }] });
    await expectPacket(s.raw, 'suback');
    const { client: pub } = await connect({ clientId: 'box-pub', username: 'box/p' });
    for (let i = 0; i < 6; i++) await pub.publishAsync('box/t', `m${i}`, { qos: 1 });
    const got: string[] = [];
    for (;;) {
      const p = await s.raw.next(500);
      if (p === undefined) break;
      if (p.cmd !== 'publish') continue;
      got.push(Buffer.from(p.payload).toString());
      s.send({ cmd: 'puback', messageId: p.messageId! });
    }
    // One in flight, two queued; the other three over SessionInboxSize 2 were dropped.
    expect(got).toEqual(['m0', 'm1', 'm2']);
    s.raw.destroy();
  });
});

describe('20 tenant metrics', () => {
  it('counts connections, sessions, subscriptions, messages and bytes in and out per tenant', async () => {
    const { client: sub } = await connect({ clientId: 'met-sub', username: 'metrics/s' });
    const got: string[] = [];
    sub.on('message', (t) => got.push(t));
    await sub.subscribeAsync(['met/a', 'met/b'], { qos: 1 });
    const { client: pub } = await connect({ clientId: 'met-pub', username: 'metrics/p' });
    await pub.publishAsync('met/a', 'hello', { qos: 1 });
    await pub.publishAsync('met/b', 'world!', { qos: 0 });
    await pub.publishAsync('met/none', '12345678', { qos: 0 });
    expect(await waitUntil(() => got.length === 2)).toBe(true);
    const m = tb.broker.tenantMetrics('metrics');
    expect(m).toMatchObject({
      connections: 2,
      sessions: 2,
      transientSubscriptions: 2,
      messagesIn: 3,
      bytesIn: 5 + 6 + 8,
      messagesOut: 2,
      messagesDropped: 0,
    });
    // On the wire: fixed header, topic, packet id for QoS 1, v5 properties length.
    expect(m.bytesOut).toBe(2 + 2 + 5 + 2 + 1 + 5 + (2 + 2 + 5 + 1 + 6));
    expect(tb.broker.tenants()).toContain('metrics');
    expect(tb.broker.tenantMetrics('unknown-tenant').messagesIn).toBe(0);
    await pub.endAsync();
    await sub.endAsync();
    expect(await waitUntil(() => tb.broker.tenantMetrics('metrics').connections === 0)).toBe(true);
    expect(tb.broker.tenantMetrics('metrics').sessions).toBe(0);
  });
});
