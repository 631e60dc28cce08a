import { spawn } from 'node:child_process';
import type { IClientOptions, MqttClient } from 'mqtt';
import type { Packet } from 'mqtt-packet';
import { useBrokerUnderTest } from '../support/broker-under-test';
import {
  drainPackets,
  expectPacket,
  publish,
  sleep,
  uniqueName,
  waitUntil,
  withClients,
  withTimeout,
  type ClientRegistry,
  type MessageCollector,
} from '../support/mqtt-helpers';
import { startTestBroker, type TestBroker } from '../support/test-broker';

/**
 * Area 09, shared subscriptions (`$share/{group}/{filter}`, MQTT 5 §4.8.2): one copy per group,
 * spread over its members; groups and plain subscribers each get their own copy; no retained
 * messages on a shared subscribe; invalid share names refused. Bifro's ordered shared
 * subscriptions (`$oshare/`) are in the `bifro-only` block.
 */

jest.setTimeout(15_000);

/** Publishes `n` messages `${prefix}${i}` and waits for all of them to complete (bounded). */
async function publishMany(client: MqttClient, topic: string, n: number, qos: 0 | 1 | 2, prefix = ''): Promise<void> {
  const all: Promise<unknown>[] = [];
  for (let i = 0; i < n; i++) all.push(client.publishAsync(topic, `${prefix}${i}`, { qos }));
  await withTimeout(Promise.all(all), 8000, `${n} publishes to ${topic}`);
}

/** `count` subscribers of `filter` (QoS 1), each with a collector attached before the SUBACK. */
async function members(clients: ClientRegistry, filter: string, count: number, opts: IClientOptions = {}): Promise<MessageCollector[]> {
  const out: MessageCollector[] = [];
  for (let i = 0; i < count; i++) {
    const s = await clients.subscriber(filter, { qos: 1 }, { protocolVersion: 5, clientId: uniqueName(`m${i}`), ...opts });
    out.push(s.messages);
  }
  return out;
}

function total(cs: MessageCollector[]): number {
  return cs.reduce((n, c) => n + c.messages.length, 0);
}

/** Every payload received by the group, sorted: each message exactly once means this equals the sent list. */
function groupPayloads(cs: MessageCollector[]): string[] {
  return cs.flatMap((c) => c.payloads()).sort();
}

function expected(n: number, prefix = ''): string[] {
  return Array.from({ length: n }, (_, i) => `${prefix}${i}`).sort();
}

/**
 * Subscribes `filter` on a raw connection and resolves how the broker answered: a SUBACK reason
 * code, or `closed` (optionally after a DISCONNECT with `disconnectCode`).
 */
async function subscribeRaw(
  clients: ClientRegistry,
  protocolVersion: 4 | 5,
  filter: string,
): Promise<{ suback?: number; closed: boolean; disconnectCode?: number }> {
  const s = await clients.raw({ protocolVersion, clientId: uniqueName('bad-share') });
  s.send({ cmd: 'subscribe', messageId: 5, subscriptions: [{ topic: filter, qos: 1 }] });
  const p: Packet | undefined = await s.raw.next(2000);
  if (p?.cmd === 'suback') return { suback: p.granted[0] as number, closed: false };
  if (p?.cmd === 'disconnect') return { closed: await s.raw.waitClosed(), disconnectCode: p.reasonCode };
  return { closed: p === undefined && (await s.raw.waitClosed(0)) };
}

describe('09 shared subscriptions', () => {
  const but = useBrokerUnderTest();
  const clients = but.clients;

  it('delivers each message to exactly one member of a group, spread over all members [MQTT-4.8.2]', async () => {
    const topic = uniqueName('e2e/09/spread');
    const group = await members(clients, `$share/g/${topic}`, 3);
    const { client: pub } = await clients.mqtt({ protocolVersion: 5, clientId: uniqueName('p') });
    await publishMany(pub, topic, 300, 1);
    await waitUntil(() => total(group) >= 300, 5000);
    await sleep(200);
    expect(total(group)).toBe(300);
    expect(groupPayloads(group)).toEqual(expected(300));
    for (const m of group) expect(m.messages.length).toBeGreaterThan(0);
  });

  it('gives each group its own copy, and plain subscribers of the same topic all of them', async () => {
    const topic = uniqueName('e2e/09/groups');
    const g1 = await members(clients, `$share/g1/${topic}`, 2);
    const g2 = await members(clients, `$share/g2/${topic}`, 2);
    const plain = await members(clients, topic, 1);
    const { client: pub } = await clients.mqtt({ protocolVersion: 5, clientId: uniqueName('p') });
    await publishMany(pub, topic, 100, 1);
    await waitUntil(() => total(g1) >= 100 && total(g2) >= 100 && total(plain) >= 100, 5000);
    await sleep(200);
    expect(groupPayloads(g1)).toEqual(expected(100));
    expect(groupPayloads(g2)).toEqual(expected(100));
    expect(groupPayloads(plain)).toEqual(expected(100));
  });

  it('matches wildcard filters inside a share: $share/g/a/+ [MQTT-4.8.2-2]', async () => {
    const root = uniqueName('e2e/09/wild');
    const group = await members(clients, `$share/g/${root}/+`, 2);
    const { client: pub } = await clients.mqtt({ protocolVersion: 5, clientId: uniqueName('p') });
    await publishMany(pub, `${root}/a`, 20, 1, 'a');
    await publishMany(pub, `${root}/b`, 20, 1, 'b');
    await waitUntil(() => total(group) >= 40);
    await sleep(100);
    expect(groupPayloads(group)).toEqual([...expected(20, 'a'), ...expected(20, 'b')].sort());
  });

  it('keeps delivering every message to the remaining members when one leaves', async () => {
    const topic = uniqueName('e2e/09/leave');
    const stayers = await members(clients, `$share/g/${topic}`, 2);
    const { client: leaver } = await clients.mqtt({ protocolVersion: 5, clientId: uniqueName('leaver') });
    await withTimeout(leaver.subscribeAsync(`$share/g/${topic}`, { qos: 1 }), 3000, 'SUBACK');
    await withTimeout(leaver.endAsync(), 3000, 'DISCONNECT');
    const { client: pub } = await clients.mqtt({ protocolVersion: 5, clientId: uniqueName('p') });
    await publishMany(pub, topic, 60, 1);
    await waitUntil(() => total(stayers) >= 60, 5000);
    await sleep(200);
    expect(groupPayloads(stayers)).toEqual(expected(60));
  });

  it('keeps delivering to the remaining members when one unsubscribes', async () => {
    const topic = uniqueName('e2e/09/unsub');
    const stayers = await members(clients, `$share/g/${topic}`, 2);
    const { client: quitter } = await clients.mqtt({ protocolVersion: 5, clientId: uniqueName('quitter') });
    await withTimeout(quitter.subscribeAsync(`$share/g/${topic}`, { qos: 1 }), 3000, 'SUBACK');
    const quitterGot: string[] = [];
    quitter.on('message', (_t, p) => quitterGot.push(p.toString()));
    await withTimeout(quitter.unsubscribeAsync(`$share/g/${topic}`), 3000, 'UNSUBACK');
    const { client: pub } = await clients.mqtt({ protocolVersion: 5, clientId: uniqueName('p') });
    await publishMany(pub, topic, 60, 1);
    await waitUntil(() => total(stayers) >= 60, 5000);
    await sleep(200);
    expect(groupPayloads(stayers)).toEqual(expected(60));
    expect(quitterGot).toEqual([]);
  });

  it('lets MQTT 3.1.1 clients share a subscription too', async () => {
    const topic = uniqueName('e2e/09/v311');
    const group = await members(clients, `$share/g/${topic}`, 2, { protocolVersion: 4 });
    const { client: pub } = await clients.mqtt({ protocolVersion: 4, clientId: uniqueName('p') });
    await publishMany(pub, topic, 50, 1);
    await waitUntil(() => total(group) >= 50, 5000);
    await sleep(200);
    expect(groupPayloads(group)).toEqual(expected(50));
    for (const m of group) expect(m.messages.length).toBeGreaterThan(0);
  });

  it('shares messages from mosquitto_pub (one per line) across v5 and v3.1.1 members of one group', async () => {
    const topic = uniqueName('e2e/09/cli');
    const group = [
      ...(await members(clients, `$share/g/${topic}`, 1)),
      ...(await members(clients, `$share/g/${topic}`, 1, { protocolVersion: 4 })),
    ];
    const lines = Array.from({ length: 40 }, (_, i) => `${i}`).join('\n') + '\n';
    const r = await mosquittoPubStdin(but.port, ['-q', '1', '-t', topic, '-l'], lines);
    expect(r).toBe(0);
    await waitUntil(() => total(group) >= 40, 5000);
    await sleep(200);
    expect(groupPayloads(group)).toEqual(expected(40));
  });

  it.each([
    ['$share/g+/t', 'a wildcard in the share name [MQTT-4.8.2-1]'],
    ['$share/g#/t', 'a # in the share name [MQTT-4.8.2-1]'],
  ])('v5: refuses %s (%s) with SUBACK 0x8F or a DISCONNECT', async (filter) => {
    const r = await subscribeRaw(clients, 5, filter);
    if (r.suback !== undefined) {
      expect(r.suback).toBe(0x8f);
    } else {
      expect(r.closed).toBe(true);
      if (r.disconnectCode !== undefined) expect([0x8f, 0x81, 0x82]).toContain(r.disconnectCode);
    }
  });

  it.each(['$share/g+/t', '$share/g#/t'])('v3.1.1: refuses %s with SUBACK 0x80 or by closing', async (filter) => {
    const r = await subscribeRaw(clients, 4, filter);
    if (r.suback !== undefined) expect(r.suback).toBe(0x80);
    else expect(r.closed).toBe(true);
  });

  it('keeps serving after refusing an invalid share filter', async () => {
    await subscribeRaw(clients, 5, '$share/g+/t');
    const topic = uniqueName('e2e/09/after');
    const group = await members(clients, `$share/ok/${topic}`, 1);
    const s = await clients.raw({ protocolVersion: 5, clientId: uniqueName('p') });
    s.send({ cmd: 'publish', topic, payload: Buffer.from('fine'), qos: 1, retain: false, dup: false, messageId: 1 });
    await expectPacket(s.raw, 'puback');
    expect((await group[0]!.waitFor(1)).map((m) => m.payload.toString())).toEqual(['fine']);
    expect(await drainPackets(s.raw, 50)).toEqual([]);
  });
});

/** mosquitto_pub with stdin input (for `-l`: one message per line); resolves the exit code. */
async function mosquittoPubStdin(port: number, args: string[], input: string): Promise<number | null> {
  return new Promise((resolve) => {
    const child = spawn('mosquitto_pub', ['-h', '127.0.0.1', '-p', String(port), ...args], { stdio: ['pipe', 'ignore', 'ignore'] });
    const timer = setTimeout(() => child.kill('SIGKILL'), 8000);
    child.on('close', (code) => {
      clearTimeout(timer);
      resolve(code);
    });
    child.stdin.end(input);
  });
}

describe('09 shared subscriptions: bifro-only', () => {
  let tb: TestBroker;
  const clients = withClients(() => tb.port);

  beforeAll(async () => {
    tb = await startTestBroker();
  });
  afterAll(() => tb.stop());

  it('bifro-only: does not send retained messages to a new shared subscription (§3.3.1.3, §4.8.2; mosquitto 2.0.11 does)', async () => {
    const topic = uniqueName('e2e/09/retained');
    const { client: pub } = await clients.mqtt({ protocolVersion: 5, clientId: uniqueName('p') });
    await publish(pub, topic, 'kept', { qos: 1, retain: true });
    try {
      const group = await members(clients, `$share/g/${topic}`, 1);
      const plain = await members(clients, topic, 1);
      // The plain subscriber proves the retained message is there.
      expect((await plain[0]!.waitFor(1)).map((m) => m.payload.toString())).toEqual(['kept']);
      await group[0]!.settle(300);
      expect(group[0]!.messages).toEqual([]);
      // Later publishes still reach the group.
      await publish(pub, topic, 'live', { qos: 1 });
      expect((await group[0]!.waitFor(1)).map((m) => m.payload.toString())).toEqual(['live']);
    } finally {
      await publish(pub, topic, '', { qos: 1, retain: true });
    }
  });

  // mosquitto 2.0.11 grants these two as if they were ordinary filters.
  it.each([
    ['$share/g', 'no topic filter [MQTT-4.8.2-2]'],
    ['$share//t', 'an empty share name [MQTT-4.8.2-1]'],
  ])('bifro-only: v5 refuses %s (%s) with SUBACK 0x8F or a DISCONNECT', async (filter) => {
    const r = await subscribeRaw(clients, 5, filter);
    if (r.suback !== undefined) {
      expect(r.suback).toBe(0x8f);
    } else {
      expect(r.closed).toBe(true);
      expect(r.disconnectCode).toBeDefined();
      expect([0x8f, 0x81, 0x82]).toContain(r.disconnectCode);
    }
  });

  it.each(['$share/g', '$share//t'])('bifro-only: v3.1.1 refuses %s with SUBACK 0x80 or by closing', async (filter) => {
    const r = await subscribeRaw(clients, 4, filter);
    if (r.suback !== undefined) expect(r.suback).toBe(0x80);
    else expect(r.closed).toBe(true);
  });

  it('bifro-only: $oshare sends all messages of one publisher on one topic to the same member', async () => {
    const root = uniqueName('e2e/09/oshare');
    const group = await members(clients, `$oshare/g/${root}/+`, 3);
    const pubs = [
      (await clients.mqtt({ protocolVersion: 5, clientId: uniqueName('pa') })).client,
      (await clients.mqtt({ protocolVersion: 4, clientId: uniqueName('pb') })).client,
    ];
    const streams: string[] = [];
    for (const [pi, pub] of pubs.entries()) {
      for (const t of ['t1', 't2']) {
        const prefix = `p${pi}-${t}-`;
        streams.push(prefix);
        await publishMany(pub, `${root}/${t}`, 50, 1, prefix);
      }
    }
    await waitUntil(() => total(group) >= 200, 5000);
    await sleep(200);
    expect(total(group)).toBe(200);
    for (const prefix of streams) {
      const perMember = group.map((m) => m.payloads().filter((p) => p.startsWith(prefix)));
      const receivers = perMember.filter((ps) => ps.length > 0);
      expect(receivers).toHaveLength(1);
      // In publish order, too.
      expect(receivers[0]).toEqual(Array.from({ length: 50 }, (_, i) => `${prefix}${i}`));
    }
  });

  it('bifro-only: an $oshare group and a $share group each get one copy', async () => {
    const topic = uniqueName('e2e/09/oshare-groups');
    const g1 = await members(clients, `$oshare/g1/${topic}`, 2);
    const g2 = await members(clients, `$share/g2/${topic}`, 2);
    const { client: pub } = await clients.mqtt({ protocolVersion: 5, clientId: uniqueName('p') });
    await publishMany(pub, topic, 30, 1);
    await waitUntil(() => total(g1) >= 30 && total(g2) >= 30, 5000);
    await sleep(200);
    expect(groupPayloads(g1)).toEqual(expected(30));
    expect(groupPayloads(g2)).toEqual(expected(30));
  });

  it.each(['$oshare/g', '$oshare//t', '$oshare/g+/t'])('bifro-only: v5 refuses %s with SUBACK 0x8F or a DISCONNECT', async (filter) => {
    const r = await subscribeRaw(clients, 5, filter);
    if (r.suback !== undefined) {
      expect(r.suback).toBe(0x8f);
    } else {
      expect(r.closed).toBe(true);
      expect(r.disconnectCode).toBeDefined();
      expect([0x8f, 0x81, 0x82]).toContain(r.disconnectCode);
    }
  });
});
