import mqttPacket, { type IPublishPacket, type Packet } from 'mqtt-packet';
import { useBrokerUnderTest } from '../support/broker-under-test';
import {
  collectPackets,
  drainPackets,
  expectPacket,
  publish,
  sleep,
  uniqueName,
  waitUntil,
  withClients,
  type ClientRegistry,
  type RawSession,
} from '../support/mqtt-helpers';
import { startTestBroker, type TestBroker } from '../support/test-broker';

/**
 * Area 11, flow control (MQTT 5 §4.9) and packet size limits (§3.1.2.11.4, §3.2.2.3.6): the
 * broker honours a subscriber's Receive Maximum and Maximum Packet Size, refuses a client that
 * exceeds its own Receive Maximum, and a slow consumer does not stall the others. Bifro's own
 * limits (Receive Maximum 1024, Maximum Packet Size from MaxUserPayloadBytes) are in `bifro-only`.
 */

jest.setTimeout(15_000);

function publishPacket(topic: string, payload: Buffer | string, qos: 0 | 1 | 2, messageId?: number): IPublishPacket {
  const p: IPublishPacket = { cmd: 'publish', topic, payload: Buffer.from(payload), qos, retain: false, dup: false };
  if (messageId !== undefined) p.messageId = messageId;
  return p;
}

async function rawSubscriber(
  clients: ClientRegistry,
  filter: string,
  qos: 0 | 1 | 2,
  properties: { receiveMaximum?: number; maximumPacketSize?: number } = {},
): Promise<RawSession> {
  const s = await clients.raw({ protocolVersion: 5, clientId: uniqueName('fc-sub'), properties });
  s.send({ cmd: 'subscribe', messageId: 1, subscriptions: [{ topic: filter, qos }] });
  await expectPacket(s.raw, 'suback');
  return s;
}

function onlyPublishes(ps: Packet[]): IPublishPacket[] {
  return ps.filter((p): p is IPublishPacket => p.cmd === 'publish');
}

/**
 * Sends `count` QoS 2 PUBLISH packets (never PUBREL) and resolves what came back: the number of
 * PUBRECs and the DISCONNECT reason code, if any.
 */
async function overrunReceiveMaximum(s: RawSession, topic: string, count: number): Promise<{ pubrecs: number; disconnect?: number }> {
  const frames: Buffer[] = [];
  for (let i = 1; i <= count; i++) frames.push(mqttPacket.generate(publishPacket(topic, 'q2', 2, i), { protocolVersion: 5 }));
  s.raw.write(Buffer.concat(frames));
  await s.raw.waitClosed(5000);
  const got = s.raw.packets.splice(0);
  const d = got.find((p) => p.cmd === 'disconnect');
  return {
    pubrecs: got.filter((p) => p.cmd === 'pubrec').length,
    ...(d?.cmd === 'disconnect' && d.reasonCode !== undefined ? { disconnect: d.reasonCode } : {}),
  };
}

describe('11 flow control', () => {
  const but = useBrokerUnderTest();
  const clients = but.clients;

  it('sends no more unacknowledged QoS 1 PUBLISH than the subscriber’s Receive Maximum, resumes in order on PUBACK [MQTT-3.3.4-9]', async () => {
    const topic = uniqueName('e2e/11/rm1');
    const sub = await rawSubscriber(clients, topic, 1, { receiveMaximum: 2 });
    const { client } = await clients.mqtt({ protocolVersion: 5, clientId: uniqueName('p') });
    for (let i = 0; i < 5; i++) await publish(client, topic, `m${i}`, { qos: 1 });

    const first = onlyPublishes(await collectPackets(sub.raw, 'publish', 3, 800));
    expect(first.map((p) => p.payload.toString())).toEqual(['m0', 'm1']);

    // Acknowledge everything as it arrives; the rest must follow, in order.
    const all = [...first];
    for (const p of first) sub.send({ cmd: 'puback', messageId: p.messageId! });
    const deadline = Date.now() + 3000;
    while (all.length < 5 && Date.now() < deadline) {
      const p = await sub.raw.next(deadline - Date.now());
      if (p?.cmd !== 'publish') continue;
      all.push(p);
      sub.send({ cmd: 'puback', messageId: p.messageId! });
    }
    expect(all.map((p) => p.payload.toString())).toEqual(['m0', 'm1', 'm2', 'm3', 'm4']);
  });

  it('counts a QoS 2 delivery against Receive Maximum until PUBCOMP, not PUBREC [MQTT-3.3.4-9]', async () => {
    const topic = uniqueName('e2e/11/rm2');
    const sub = await rawSubscriber(clients, topic, 2, { receiveMaximum: 1 });
    const { client } = await clients.mqtt({ protocolVersion: 5, clientId: uniqueName('p') });
    for (let i = 0; i < 3; i++) await publish(client, topic, `m${i}`, { qos: 2 });

    const p0 = await expectPacket(sub.raw, 'publish');
    expect(p0.payload.toString()).toBe('m0');
    sub.send({ cmd: 'pubrec', messageId: p0.messageId! });
    const rel = await expectPacket(sub.raw, 'pubrel');
    expect(rel.messageId).toBe(p0.messageId);
    expect(onlyPublishes(await drainPackets(sub.raw, 400))).toEqual([]);
    sub.send({ cmd: 'pubcomp', messageId: p0.messageId! });
    const p1 = await expectPacket(sub.raw, 'publish');
    expect(p1.payload.toString()).toBe('m1');
  });

  it('drops, without sending, a message bigger than the subscriber’s Maximum Packet Size, and goes on [MQTT-3.1.2-24] [MQTT-3.1.2-25]', async () => {
    const topic = uniqueName('e2e/11/mps');
    const sub = await rawSubscriber(clients, topic, 1, { maximumPacketSize: 100 });
    const { client } = await clients.mqtt({ protocolVersion: 5, clientId: uniqueName('p') });
    await publish(client, topic, Buffer.alloc(500, 0x61), { qos: 1 });
    await publish(client, topic, 'small', { qos: 1 });
    await publish(client, topic, Buffer.alloc(500, 0x62), { qos: 0 });
    await publish(client, topic, 'small2', { qos: 0 });
    const got = onlyPublishes(await collectPackets(sub.raw, 'publish', 3, 1000));
    expect(got.map((p) => p.payload.toString())).toEqual(['small', 'small2']);
    for (const p of got) expect(p.length ?? 0).toBeLessThanOrEqual(100);
  });

  // The flood goes in batches of 1000, each sent once the fast subscriber has the previous one:
  // the point is that a stalled reader never holds the others up. (Sent all at once, the test's own
  // clients, in the broker's process, can fall behind by more than a session queue holds.)
  it('keeps serving other subscribers (20k × 1 KB QoS 0 within 10 s) while one stops reading its socket, and stays up', async () => {
    const topic = uniqueName('e2e/11/slow');
    const slow = await rawSubscriber(clients, topic, 0);
    slow.raw.socket.pause();
    const fast = await rawSubscriber(clients, topic, 0);
    const pub = await clients.raw({ protocolVersion: 4, clientId: uniqueName('flood') });
    const n = 20_000;
    const frame = mqttPacket.generate(publishPacket(topic, Buffer.alloc(1024, 0x78), 0), { protocolVersion: 4 });
    const started = Date.now();
    const batch = Buffer.concat(Array.from({ length: 1000 }, () => frame));
    for (let sent = 1000; sent <= n; sent += 1000) {
      pub.raw.write(batch);
      await waitUntil(() => fast.raw.packets.length >= sent, 10_000 - (Date.now() - started), 5);
    }
    expect(fast.raw.packets.length).toBe(n);
    expect(Date.now() - started).toBeLessThan(10_000);
    const { connack } = await clients.mqtt({ protocolVersion: 5, clientId: uniqueName('after') });
    expect(connack.reasonCode).toBe(0);
    slow.raw.destroy();
    await sleep(50);
  });
});

describe('11 flow control: bifro-only', () => {
  let tb: TestBroker;
  const clients = withClients(() => tb.port);

  beforeAll(async () => {
    tb = await startTestBroker();
  });
  afterAll(() => tb.stop());

  // mosquitto 2.0.11 sends two more after one PUBACK here (three unacknowledged with Receive Maximum 2).
  it('bifro-only: sends exactly one more QoS 1 PUBLISH per PUBACK when the Receive Maximum is reached [MQTT-3.3.4-9]', async () => {
    const topic = uniqueName('e2e/11/rm1-strict');
    const sub = await rawSubscriber(clients, topic, 1, { receiveMaximum: 2 });
    const { client } = await clients.mqtt({ protocolVersion: 5, clientId: uniqueName('p') });
    for (let i = 0; i < 5; i++) await publish(client, topic, `m${i}`, { qos: 1 });
    const first = onlyPublishes(await collectPackets(sub.raw, 'publish', 3, 800));
    expect(first.map((p) => p.payload.toString())).toEqual(['m0', 'm1']);
    sub.send({ cmd: 'puback', messageId: first[0]!.messageId! });
    const next = onlyPublishes(await collectPackets(sub.raw, 'publish', 2, 800));
    expect(next.map((p) => p.payload.toString())).toEqual(['m2']);
    sub.send({ cmd: 'puback', messageId: first[1]!.messageId! });
    sub.send({ cmd: 'puback', messageId: next[0]!.messageId! });
    const rest = onlyPublishes(await collectPackets(sub.raw, 'publish', 2, 2000));
    expect(rest.map((p) => p.payload.toString())).toEqual(['m3', 'm4']);
  });

  // Receive Maximum exceeded (§3.3.4, §4.9); mosquitto 2.0.11 offers 20 and accepts the 21st without complaint.
  it('bifro-only: offers Receive Maximum 1024 and answers the 1025th unacknowledged QoS 2 PUBLISH with DISCONNECT 0x93 [MQTT-3.3.4-7]', async () => {
    const s = await clients.raw({ protocolVersion: 5, clientId: uniqueName('overrun1024') });
    expect(s.connack.properties?.receiveMaximum).toBe(1024);
    const r = await overrunReceiveMaximum(s, uniqueName('e2e/11/o1024'), 1025);
    expect(r).toEqual({ pubrecs: 1024, disconnect: 0x93 });
  });

  it('bifro-only: answers a PUBLISH above its Maximum Packet Size (payload > 4 MiB) with DISCONNECT 0x95 and keeps serving', async () => {
    const topic = uniqueName('e2e/11/huge');
    const sub = await rawSubscriber(clients, topic, 0);
    const s = await clients.raw({ protocolVersion: 5, clientId: uniqueName('huge') });
    const max = s.connack.properties?.maximumPacketSize;
    expect(max).toBeGreaterThanOrEqual(4 * 1024 * 1024);
    s.raw.write(mqttPacket.generate(publishPacket(topic, Buffer.alloc((max ?? 4 * 1024 * 1024) + 1024, 0x7a), 0), { protocolVersion: 5 }));
    const d = await expectPacket(s.raw, 'disconnect', 5000);
    expect(d.reasonCode).toBe(0x95);
    expect(await s.raw.waitClosed()).toBe(true);
    expect(onlyPublishes(await drainPackets(sub.raw, 200))).toEqual([]);
    const { client } = await clients.mqtt({ protocolVersion: 5, clientId: uniqueName('p') });
    await publish(client, topic, 'fine', { qos: 1 });
    expect((await expectPacket(sub.raw, 'publish')).payload.toString()).toBe('fine');
  });

  it('bifro-only: accepts a PUBLISH whose payload is exactly MaxUserPayloadBytes (4 MiB)', async () => {
    const topic = uniqueName('e2e/11/max');
    const sub = await rawSubscriber(clients, topic, 0);
    const s = await clients.raw({ protocolVersion: 5, clientId: uniqueName('max') });
    s.send(publishPacket(topic, Buffer.alloc(4 * 1024 * 1024, 0x79), 1, 1));
    const ack = await expectPacket(s.raw, 'puback', 5000);
    expect(ack.reasonCode ?? 0).toBe(0);
    const got = await expectPacket(sub.raw, 'publish', 5000);
    expect(got.payload.length).toBe(4 * 1024 * 1024);
  });
});
