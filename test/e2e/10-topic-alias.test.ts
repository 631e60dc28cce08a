import { spawn } from 'node:child_process';
import type { IPublishPacket, Packet } from 'mqtt-packet';
import { useBrokerUnderTest } from '../support/broker-under-test';
import {
  collectPackets,
  expectPacket,
  publish,
  uniqueName,
  withClients,
  type ClientRegistry,
  type RawSession,
} from '../support/mqtt-helpers';
import { startTestBroker, type TestBroker } from '../support/test-broker';

/**
 * Area 10, MQTT 5 topic aliases (§3.3.2.3.4, §4.13): inbound aliases set and used by a publisher
 * within the broker's Topic Alias Maximum, the errors outside it, and outbound aliases the broker
 * may use towards a subscriber only within the subscriber's own Topic Alias Maximum. Bifro's
 * choice to alias repeated topics outbound is in the `bifro-only` block.
 */

jest.setTimeout(15_000);

function pub(topic: string, payload: string, alias?: number, qos: 0 | 1 = 0, messageId = 1): Packet {
  const p: IPublishPacket = { cmd: 'publish', topic, payload: Buffer.from(payload), qos, retain: false, dup: false };
  if (qos > 0) p.messageId = messageId;
  if (alias !== undefined) p.properties = { topicAlias: alias };
  return p;
}

async function rawSubscriber(clients: ClientRegistry, filter: string, topicAliasMaximum?: number): Promise<RawSession> {
  const s = await clients.raw({
    protocolVersion: 5,
    clientId: uniqueName('ta-sub'),
    ...(topicAliasMaximum !== undefined ? { properties: { topicAliasMaximum } } : {}),
  });
  s.send({ cmd: 'subscribe', messageId: 1, subscriptions: [{ topic: filter, qos: 1 }] });
  await expectPacket(s.raw, 'suback');
  return s;
}

async function publishes(s: RawSession, n: number, timeoutMs = 3000): Promise<IPublishPacket[]> {
  const got = await collectPackets(s.raw, 'publish', n, timeoutMs);
  return got.filter((p): p is IPublishPacket => p.cmd === 'publish');
}

/** Expects the broker to end the connection with a DISCONNECT carrying `code` and close it. */
async function expectDisconnect(s: RawSession, code: number): Promise<void> {
  const d = await expectPacket(s.raw, 'disconnect');
  expect(d.reasonCode).toBe(code);
  expect(await s.raw.waitClosed()).toBe(true);
}

describe('10 topic alias (v5)', () => {
  const but = useBrokerUnderTest();
  const clients = but.clients;

  async function publisher(): Promise<RawSession & { max: number }> {
    const s = await clients.raw({ protocolVersion: 5, clientId: uniqueName('ta-pub') });
    return Object.assign(s, { max: s.connack.properties?.topicAliasMaximum ?? 0 });
  }

  it('delivers a PUBLISH sent with an alias only under the topic the alias was set to [MQTT-3.3.2-12]', async () => {
    const topic = uniqueName('e2e/10/in');
    const sub = await rawSubscriber(clients, topic);
    const p = await publisher();
    expect(p.max).toBeGreaterThanOrEqual(1);
    p.send(pub(topic, 'first', 1));
    p.send(pub('', 'second', 1));
    p.send(pub('', 'third', 1, 1, 7));
    expect((await expectPacket(p.raw, 'puback')).messageId).toBe(7);
    const got = await publishes(sub, 3);
    expect(got.map((m) => [m.topic, m.payload.toString()])).toEqual([
      [topic, 'first'],
      [topic, 'second'],
      [topic, 'third'],
    ]);
  });

  it('accepts the highest alias the broker offered, and re-binding an alias to another topic [MQTT-3.3.2-12]', async () => {
    const root = uniqueName('e2e/10/rebind');
    const sub = await rawSubscriber(clients, `${root}/+`);
    const p = await publisher();
    p.send(pub(`${root}/a`, 'a1', p.max));
    p.send(pub('', 'a2', p.max));
    p.send(pub(`${root}/b`, 'b1', p.max));
    p.send(pub('', 'b2', p.max, 1, 9));
    expect((await expectPacket(p.raw, 'puback')).messageId).toBe(9);
    const got = await publishes(sub, 4);
    expect(got.map((m) => [m.topic, m.payload.toString()])).toEqual([
      [`${root}/a`, 'a1'],
      [`${root}/a`, 'a2'],
      [`${root}/b`, 'b1'],
      [`${root}/b`, 'b2'],
    ]);
  });

  it('resolves the aliases mosquitto_pub -l sends (topic once, then alias only)', async () => {
    const topic = uniqueName('e2e/10/cli');
    const sub = await rawSubscriber(clients, topic);
    const code = await new Promise<number | null>((resolve) => {
      const child = spawn(
        'mosquitto_pub',
        ['-h', '127.0.0.1', '-p', String(but.port), '-V', 'mqttv5', '-t', topic, '-l', '-D', 'publish', 'topic-alias', '1'],
        {
          stdio: ['pipe', 'ignore', 'ignore'],
        },
      );
      const timer = setTimeout(() => child.kill('SIGKILL'), 5000);
      child.on('close', (c) => {
        clearTimeout(timer);
        resolve(c);
      });
      child.stdin.end('a\nb\nc\n');
    });
    expect(code).toBe(0);
    const got = await publishes(sub, 3);
    expect(got.map((m) => [m.topic, m.payload.toString()])).toEqual([
      [topic, 'a'],
      [topic, 'b'],
      [topic, 'c'],
    ]);
  });

  it('answers an alias above its Topic Alias Maximum with DISCONNECT 0x94 [MQTT-3.3.2-9] [MQTT-3.3.2-10]', async () => {
    const topic = uniqueName('e2e/10/too-high');
    const sub = await rawSubscriber(clients, topic);
    const p = await publisher();
    p.send(pub(topic, 'x', p.max + 1));
    await expectDisconnect(p, 0x94);
    expect(await publishes(sub, 1, 300)).toEqual([]);
  });

  it('answers alias 0 with a DISCONNECT (0x94, or 0x81/0x82 as mosquitto does) [MQTT-3.3.2-8]', async () => {
    const topic = uniqueName('e2e/10/zero');
    const p = await publisher();
    p.send(pub(topic, 'x', 0));
    const d = await expectPacket(p.raw, 'disconnect');
    expect([0x94, 0x81, 0x82]).toContain(d.reasonCode);
    expect(await p.raw.waitClosed()).toBe(true);
  });

  it('answers an empty topic with an alias never set with DISCONNECT 0x82 (protocol error) [MQTT-3.3.2-1]', async () => {
    const p = await publisher();
    p.send(pub('', 'x', 1));
    await expectDisconnect(p, 0x82);
  });

  it('does not carry aliases over to a new connection [MQTT-3.3.2-7]', async () => {
    const topic = uniqueName('e2e/10/per-conn');
    const clientId = uniqueName('ta-carry');
    const first = await clients.raw({ protocolVersion: 5, clientId });
    first.send(pub(topic, 'set', 1, 1, 1));
    await expectPacket(first.raw, 'puback');
    first.send({ cmd: 'disconnect' });
    expect(await first.raw.waitClosed()).toBe(true);
    const second = await clients.raw({ protocolVersion: 5, clientId });
    second.send(pub('', 'use', 1));
    await expectDisconnect(second, 0x82);
  });

  it('never sends aliases to a subscriber whose Topic Alias Maximum is 0 [MQTT-3.3.2-11]', async () => {
    const topic = uniqueName('e2e/10/out-none');
    const sub = await rawSubscriber(clients, topic, 0);
    const { client } = await clients.mqtt({ protocolVersion: 5, clientId: uniqueName('p') });
    for (let i = 0; i < 5; i++) await publish(client, topic, `m${i}`, { qos: 1 });
    const got = await publishes(sub, 5);
    expect(got).toHaveLength(5);
    for (const m of got) {
      expect(m.topic).toBe(topic);
      expect(m.properties?.topicAlias).toBeUndefined();
    }
  });

  it('sends aliases only within the subscriber’s Topic Alias Maximum, each resolving to the right topic [MQTT-3.3.2-11]', async () => {
    const root = uniqueName('e2e/10/out-max');
    const sub = await rawSubscriber(clients, `${root}/+`, 2);
    const { client } = await clients.mqtt({ protocolVersion: 5, clientId: uniqueName('p') });
    const sent: [string, string][] = [];
    for (let round = 0; round < 4; round++) {
      for (const t of ['a', 'b', 'c', 'd']) {
        sent.push([`${root}/${t}`, `${t}${round}`]);
        await publish(client, `${root}/${t}`, `${t}${round}`, { qos: 1 });
      }
    }
    const got = await publishes(sub, sent.length);
    const aliases = new Map<number, string>();
    const resolved = got.map((m) => {
      const alias = m.properties?.topicAlias;
      if (alias === undefined) return [m.topic, m.payload.toString()];
      expect(alias).toBeGreaterThanOrEqual(1);
      expect(alias).toBeLessThanOrEqual(2);
      if (m.topic !== '') aliases.set(alias, m.topic);
      return [aliases.get(alias) ?? `<unknown alias ${alias}>`, m.payload.toString()];
    });
    expect(resolved).toEqual(sent);
  });

  it('MQTT.js with topicAliasMaximum set receives every message under its full topic', async () => {
    const topic = uniqueName('e2e/10/mqttjs');
    const sub = await clients.subscriber(
      topic,
      { qos: 1 },
      { protocolVersion: 5, clientId: uniqueName('s'), properties: { topicAliasMaximum: 5 } },
    );
    const { client } = await clients.mqtt({ protocolVersion: 5, clientId: uniqueName('p') });
    for (let i = 0; i < 4; i++) await publish(client, topic, `m${i}`, { qos: 1 });
    const got = await sub.messages.waitFor(4);
    expect(got.map((m) => [m.topic, m.payload.toString()])).toEqual([0, 1, 2, 3].map((i) => [topic, `m${i}`]));
  });
});

describe('10 topic alias (v5): bifro-only', () => {
  let tb: TestBroker;
  const clients = withClients(() => tb.port);

  beforeAll(async () => {
    tb = await startTestBroker();
  });
  afterAll(() => tb.stop());

  it('bifro-only: offers Topic Alias Maximum 64 and refuses alias 65 with DISCONNECT 0x94', async () => {
    const p = await clients.raw({ protocolVersion: 5, clientId: uniqueName('ta64') });
    expect(p.connack.properties?.topicAliasMaximum).toBe(64);
    p.send(pub(uniqueName('e2e/10/b64'), 'ok', 64, 1, 1));
    // 0x10 (no matching subscribers) is a success code too [MQTT-3.4.2.1].
    expect([0, 0x10]).toContain((await expectPacket(p.raw, 'puback')).reasonCode ?? 0);
    p.send(pub(uniqueName('e2e/10/b65'), 'x', 65));
    await expectDisconnect(p, 0x94);
  });

  it('bifro-only: answers alias 0 with DISCONNECT 0x94 [MQTT-3.3.2-8]', async () => {
    const p = await clients.raw({ protocolVersion: 5, clientId: uniqueName('ta0') });
    p.send(pub(uniqueName('e2e/10/b0'), 'x', 0));
    await expectDisconnect(p, 0x94);
  });

  it('bifro-only: re-binds the oldest outbound alias once the subscriber’s maximum is used', async () => {
    const root = uniqueName('e2e/10/rebind');
    const sub = await rawSubscriber(clients, `${root}/+`, 2);
    const { client } = await clients.mqtt({ protocolVersion: 5, clientId: uniqueName('p') });
    for (const t of ['a', 'b', 'c', 'c', 'a']) await publish(client, `${root}/${t}`, t, { qos: 1 });
    const got = (await publishes(sub, 5)).map((m) => [m.topic.replace(`${root}/`, ''), m.properties?.topicAlias]);
    expect(got).toEqual([
      ['a', 1], // alias 1 := a
      ['b', 2], // alias 2 := b
      ['c', 1], // both used: the oldest (1, a) becomes c
      ['', 1], // c again: alias only
      ['a', 2], // a lost its alias: the oldest now (2, b) becomes a
    ]);
  });

  it('bifro-only: aliases a repeated topic outbound: topic + alias first, then alias with an empty topic', async () => {
    const topic = uniqueName('e2e/10/out');
    const sub = await rawSubscriber(clients, topic, 4);
    const { client } = await clients.mqtt({ protocolVersion: 5, clientId: uniqueName('p') });
    for (let i = 0; i < 3; i++) await publish(client, topic, `m${i}`, { qos: 1 });
    const got = await publishes(sub, 3);
    expect(got).toHaveLength(3);
    const [first, second, third] = got;
    const alias = first!.properties?.topicAlias;
    expect(first!.topic).toBe(topic);
    expect(alias).toBeGreaterThanOrEqual(1);
    expect(alias).toBeLessThanOrEqual(4);
    for (const m of [second!, third!]) {
      expect(m.topic).toBe('');
      expect(m.properties?.topicAlias).toBe(alias);
    }
  });
});
