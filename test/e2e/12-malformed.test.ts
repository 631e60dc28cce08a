import { readdirSync } from 'node:fs';
import net from 'node:net';
import mqttPacket, { type IConnectPacket, type Packet } from 'mqtt-packet';
import { useBrokerUnderTest } from '../support/broker-under-test';
import { connectPacket, publish, sleep, uniqueName, waitUntil, withClients, type ClientRegistry } from '../support/mqtt-helpers';
import { expectOthersUnaffected, failedLogins, USER_TABLE_AUTH, USERS } from '../support/isolation';
import { RawClient } from '../support/raw-client';
import { startTestBroker, type TestBroker } from '../support/test-broker';

/**
 * Area 12, malformed and hostile input over raw bytes: for each, the broker closes the connection
 * (a v5 client may first get a DISCONNECT with a reason code ≥ 0x80) and keeps serving a healthy
 * client. Then floods of connects and half-open sockets. Bifro's exact DISCONNECT reason codes and
 * its file descriptor hygiene are in the `bifro-only` block.
 */

jest.setTimeout(15_000);

type V = 4 | 5;

function connectBytes(protocolVersion: V, clientId = uniqueName('bad')): Buffer {
  return mqttPacket.generate(connectPacket({ protocolVersion, clientId }), { protocolVersion });
}

function str(s: Buffer | string): number[] {
  const b = Buffer.isBuffer(s) ? s : Buffer.from(s, 'utf8');
  return [b.length >> 8, b.length & 0xff, ...b];
}

/** A PUBLISH with a raw topic (any bytes) and a given first byte; v5 gets an empty property block. */
function rawPublish(first: number, topic: Buffer | string, protocolVersion: V, payload = 'x'): Buffer {
  const qos = (first >> 1) & 0x03;
  const body = [...str(topic), ...(qos > 0 ? [0x00, 0x01] : []), ...(protocolVersion === 5 ? [0x00] : []), ...Buffer.from(payload)];
  return Buffer.from([first, body.length, ...body]);
}

interface Outcome {
  closed: boolean;
  /** Reason code of a DISCONNECT the broker sent before closing (v5). */
  disconnect?: number;
  /** Every packet received before the close (CONNACK included). */
  packets: Packet[];
}

/** Opens a raw connection, optionally completes CONNECT, writes `bytes`, and waits for the close. */
async function sendBad(
  clients: ClientRegistry,
  protocolVersion: V,
  bytes: Buffer | number[],
  opts: { connect?: boolean } = {},
): Promise<Outcome> {
  const raw = await clients.rawSocket(protocolVersion);
  if (opts.connect !== false) {
    raw.write(connectBytes(protocolVersion));
    const ack = await raw.next(3000);
    if (ack?.cmd !== 'connack') throw new Error(`no CONNACK before the bad packet: ${ack ? ack.cmd : 'nothing'}`);
  }
  raw.write(Buffer.isBuffer(bytes) ? bytes : Buffer.from(bytes));
  const closed = await raw.waitClosed(3000);
  const packets = raw.packets.splice(0);
  const d = packets.find((p) => p.cmd === 'disconnect');
  return { closed, packets, ...(d?.cmd === 'disconnect' && d.reasonCode !== undefined ? { disconnect: d.reasonCode } : {}) };
}

/** The connection was closed; a v5 DISCONNECT, if one came first, carried an error code (one of `codes` when given). */
function expectRefused(o: Outcome, codes?: number[]): void {
  expect(o.closed).toBe(true);
  if (o.disconnect !== undefined) {
    expect(o.disconnect).toBeGreaterThanOrEqual(0x80);
    if (codes !== undefined) expect(codes).toContain(o.disconnect);
  }
  expect(o.packets.filter((p) => p.cmd !== 'disconnect' && p.cmd !== 'connack')).toEqual([]);
}

/** A fresh client can connect, subscribe and get its own message back. */
async function expectHealthy(clients: ClientRegistry, protocolVersion: V = 5): Promise<void> {
  const topic = uniqueName('e2e/12/healthy');
  const sub = await clients.subscriber(topic, { qos: 1 }, { protocolVersion, clientId: uniqueName('healthy') });
  await publish(sub.client, topic, 'alive', { qos: 1 });
  expect((await sub.messages.waitFor(1)).map((m) => m.payload.toString())).toEqual(['alive']);
}

describe('12 malformed input', () => {
  const but = useBrokerUnderTest();
  const clients = but.clients;

  it.each([4, 5] as const)('v%s: closes on a Remaining Length of five bytes (§1.5.5, §2.1.4)', async (v) => {
    expectRefused(await sendBad(clients, v, [0x30, 0xff, 0xff, 0xff, 0xff, 0x7f], { connect: true }));
    expectRefused(await sendBad(clients, v, [0x10, 0xff, 0xff, 0xff, 0xff, 0x7f], { connect: false }));
    await expectHealthy(clients, v);
  });

  it('closes a CONNECT with a wrong protocol name, without accepting it [MQTT-3.1.2-1]', async () => {
    const bytes = connectBytes(4);
    const at = bytes.indexOf(Buffer.from('MQTT'));
    bytes.write('MQTX', at, 'latin1');
    const o = await sendBad(clients, 4, bytes, { connect: false });
    expect(o.closed).toBe(true);
    for (const p of o.packets) if (p.cmd === 'connack') expect(p.returnCode ?? p.reasonCode).not.toBe(0);
    await expectHealthy(clients);
  });

  it('answers an unsupported protocol level (6) with CONNACK 0x01 (v3.1.1 form) or 0x84, then closes [MQTT-3.1.2-2]', async () => {
    const bytes = connectBytes(4);
    const at = bytes.indexOf(Buffer.from('MQTT')) + 4;
    expect(bytes[at]).toBe(4);
    bytes[at] = 6;
    const socket = net.connect(but.port, '127.0.0.1');
    try {
      const received: Buffer[] = [];
      let closed = false;
      socket.on('data', (d: Buffer) => received.push(d));
      socket.on('close', () => (closed = true));
      socket.on('error', () => undefined);
      socket.write(bytes);
      expect(await waitUntil(() => closed, 3000)).toBe(true);
      const all = Buffer.concat(received);
      expect(all[0]).toBe(0x20);
      expect([0x01, 0x84]).toContain(all[3]);
    } finally {
      socket.destroy();
    }
    await expectHealthy(clients);
  });

  it.each([4, 5] as const)('v%s: closes a CONNECT whose reserved flag (bit 0) is set [MQTT-3.1.2-3]', async (v) => {
    const bytes = connectBytes(v);
    const flagsAt = bytes.indexOf(Buffer.from('MQTT')) + 5;
    bytes[flagsAt] = bytes[flagsAt]! | 0x01;
    const o = await sendBad(clients, v, bytes, { connect: false });
    expect(o.closed).toBe(true);
    for (const p of o.packets) if (p.cmd === 'connack') expect(p.returnCode ?? p.reasonCode).not.toBe(0);
    await expectHealthy(clients, v);
  });

  it.each([4, 5] as const)('v%s: closes on a second CONNECT [MQTT-3.1.0-2]', async (v) => {
    expectRefused(await sendBad(clients, v, connectBytes(v)), [0x82]);
    await expectHealthy(clients, v);
  });

  it.each([4, 5] as const)('v%s: closes on a PUBLISH before CONNECT [MQTT-3.1.0-1]', async (v) => {
    const o = await sendBad(clients, v, rawPublish(0x30, uniqueName('e2e/12/early'), v), { connect: false });
    expect(o.closed).toBe(true);
    expect(o.packets.filter((p) => p.cmd !== 'disconnect')).toEqual([]);
    await expectHealthy(clients, v);
  });

  it.each([4, 5] as const)('v%s: closes on a PUBLISH with QoS 3 [MQTT-3.3.1-4]', async (v) => {
    expectRefused(await sendBad(clients, v, rawPublish(0x36, uniqueName('e2e/12/qos3'), v)), [0x81, 0x82]);
    await expectHealthy(clients, v);
  });

  it.each([
    [4, 'a/+/b'],
    [4, 'a/#'],
    [5, 'a/+'],
    [5, '#'],
  ] as const)('v%s: closes on a PUBLISH to a topic with a wildcard (%s) [MQTT-3.3.2-2]', async (v, topic) => {
    expectRefused(await sendBad(clients, v, rawPublish(0x32, topic, v)), [0x90, 0x81, 0x82]);
    await expectHealthy(clients, v);
  });

  it.each([4, 5] as const)('v%s: closes on a SUBSCRIBE whose fixed header flags are not 0010 [MQTT-3.8.1-1]', async (v) => {
    const good = mqttPacket.generate({ cmd: 'subscribe', messageId: 1, subscriptions: [{ topic: 'x', qos: 0 }] }, { protocolVersion: v });
    expect(good[0]).toBe(0x82);
    good[0] = 0x80;
    expectRefused(await sendBad(clients, v, good), [0x81, 0x82]);
    await expectHealthy(clients, v);
  });

  it.each([4, 5] as const)('v%s: closes on a SUBSCRIBE without any topic filter [MQTT-3.8.3-3] (v5 [MQTT-3.8.3-2])', async (v) => {
    const bytes = v === 5 ? [0x82, 0x03, 0x00, 0x01, 0x00] : [0x82, 0x02, 0x00, 0x01];
    expectRefused(await sendBad(clients, v, bytes), [0x81, 0x82]);
    await expectHealthy(clients, v);
  });

  it.each([4, 5] as const)('v%s: closes on a topic containing U+0000 [MQTT-1.5.3-2] (v5 [MQTT-1.5.4-2])', async (v) => {
    expectRefused(await sendBad(clients, v, rawPublish(0x30, Buffer.from('a\u0000b'), v)), [0x81, 0x82, 0x90]);
    await expectHealthy(clients, v);
  });

  it.each([4, 5] as const)('v%s: closes on a topic that is not valid UTF-8 [MQTT-1.5.3-1] (v5 [MQTT-1.5.4-1])', async (v) => {
    expectRefused(await sendBad(clients, v, rawPublish(0x30, Buffer.from([0x61, 0xc3, 0x28]), v)), [0x81, 0x82, 0x90]);
    await expectHealthy(clients, v);
  });

  it.each([4, 5] as const)('v%s: closes on a SUBSCRIBE filter that is not valid UTF-8 [MQTT-1.5.3-1]', async (v) => {
    const filter = [0x61, 0xed, 0xa0, 0x80];
    const body = [0x00, 0x02, ...(v === 5 ? [0x00] : []), ...str(Buffer.from(filter)), 0x00];
    expectRefused(await sendBad(clients, v, [0x82, body.length, ...body]), [0x81, 0x82, 0x8f]);
    await expectHealthy(clients, v);
  });

  it.each([4, 5] as const)('v%s: closes on a PUBREL whose fixed header flags are not 0010 [MQTT-3.6.1-1]', async (v) => {
    const bytes = v === 5 ? [0x60, 0x03, 0x00, 0x01, 0x00] : [0x60, 0x02, 0x00, 0x01];
    expectRefused(await sendBad(clients, v, bytes), [0x81, 0x82]);
    await expectHealthy(clients, v);
  });

  it('closes on a packet of reserved type 0 and keeps serving', async () => {
    expectRefused(await sendBad(clients, 5, [0x00, 0x00]), [0x81, 0x82]);
    await expectHealthy(clients);
  });

  it('survives 500 connect/disconnect cycles and 200 half-open sockets', async () => {
    await connectFlood(but.port, 500);
    const halfOpen = await openHalfOpen(but.port, 200);
    try {
      await expectHealthy(clients, 4);
      await expectHealthy(clients, 5);
    } finally {
      for (const s of halfOpen) s.destroy();
    }
    await expectHealthy(clients);
  });
});

/** `n` clients, 50 at a time, each: CONNECT, wait for CONNACK, DISCONNECT, close. */
async function connectFlood(port: number, n: number): Promise<void> {
  const one = async (i: number): Promise<void> => {
    const v: V = i % 2 === 0 ? 4 : 5;
    const raw = await RawClient.connect(port, v);
    try {
      raw.send(connectPacket({ protocolVersion: v, clientId: uniqueName('flood') }) as IConnectPacket, v);
      const ack = await raw.next(3000);
      expect(ack?.cmd).toBe('connack');
      raw.send({ cmd: 'disconnect' }, v);
      await raw.waitClosed(1000);
    } finally {
      raw.destroy();
    }
  };
  for (let i = 0; i < n; i += 50) await Promise.all(Array.from({ length: Math.min(50, n - i) }, (_, j) => one(i + j)));
}

/** `n` TCP connections that never send a byte. */
async function openHalfOpen(port: number, n: number): Promise<net.Socket[]> {
  return Promise.all(
    Array.from(
      { length: n },
      () =>
        new Promise<net.Socket>((resolve, reject) => {
          const s = net.connect(port, '127.0.0.1', () => resolve(s));
          s.on('error', reject);
        }),
    ),
  );
}

function openFds(): number {
  return readdirSync('/proc/self/fd').length;
}

describe('12 malformed input: bifro-only', () => {
  let tb: TestBroker;
  const clients = withClients(() => tb.port);

  beforeAll(async () => {
    tb = await startTestBroker();
  });
  afterAll(() => tb.stop());

  it.each([
    ['QoS 3', 0x81, () => rawPublish(0x36, uniqueName('e2e/12/b-qos3'), 5)],
    ['a wildcard in the topic name [MQTT-3.3.2-2]', 0x90, () => rawPublish(0x32, 'a/+', 5)],
    ['a topic with U+0000', 0x81, () => rawPublish(0x30, Buffer.from('a\u0000b'), 5)],
    ['a topic that is not UTF-8', 0x81, () => rawPublish(0x30, Buffer.from([0xc3, 0x28]), 5)],
    ['SUBSCRIBE flags 0000', 0x81, () => Buffer.from([0x80, 0x06, 0x00, 0x01, 0x00, 0x00, 0x01, 0x78, 0x00])],
    ['SUBSCRIBE without filters', 0x82, () => Buffer.from([0x82, 0x03, 0x00, 0x01, 0x00])],
    ['a second CONNECT', 0x82, () => connectBytes(5)],
  ] as const)('bifro-only: v5 %s gets DISCONNECT with reason code %i before the close', async (_what, code, bytes) => {
    const o = await sendBad(clients, 5, bytes());
    expect(o.disconnect).toBe(code);
    expect(o.closed).toBe(true);
    await expectHealthy(clients);
  });

  it('bifro-only: releases its sockets after a connect flood and closed half-open sockets (fd count back near baseline)', async () => {
    await expectHealthy(clients);
    await sleep(200);
    const baseline = openFds();
    await connectFlood(tb.port, 500);
    const halfOpen = await openHalfOpen(tb.port, 200);
    expect(openFds()).toBeGreaterThanOrEqual(baseline + 200);
    for (const s of halfOpen) s.destroy();
    await waitUntil(() => openFds() <= baseline + 10, 5000, 50);
    expect(openFds()).toBeLessThanOrEqual(baseline + 10);
    await expectHealthy(clients);
  });
});

describe('12 malformed input: no decoder state shared between connections', () => {
  let tb: TestBroker;

  beforeAll(async () => {
    tb = await startTestBroker(USER_TABLE_AUTH);
  });
  afterAll(() => tb.stop());

  /** A CONNECT whose user-name length (0x0003 at the end) runs past the packet: it used to leave the shared parser mid-packet. */
  const USERNAME_PAST_END = Buffer.from('101200044d515454048000050003667a10120004', 'hex');

  it('bifro-only: after a CONNECT whose user name runs past the packet, the next ten clients log in with their own credentials', async () => {
    const bad = await RawClient.connect(tb.port, 4);
    bad.write(USERNAME_PAST_END);
    expect(await bad.waitClosed(3000)).toBe(true);
    expect(bad.packets.filter((p) => p.cmd === 'connack' && (p.returnCode ?? 0) === 0)).toEqual([]);
    expect(await failedLogins(tb.port, 10)).toEqual([]);
    await expectOthersUnaffected(tb.port, 4);
    await expectOthersUnaffected(tb.port, 5);
  });

  it('bifro-only: a malformed frame on one connection cannot join bytes of another: interleaved bad and good CONNECTs', async () => {
    // Half the sockets send the bad CONNECT, the other half a good one, written in the same turn.
    const sockets = await Promise.all(Array.from({ length: 20 }, () => RawClient.connect(tb.port, 4)));
    sockets.forEach((s, i) => {
      if (i % 2 === 0) s.write(USERNAME_PAST_END);
      else
        s.send(
          connectPacket({ protocolVersion: 4, clientId: uniqueName('good'), username: 'bob', password: Buffer.from(USERS.bob.password) }),
        );
    });
    try {
      for (let i = 0; i < sockets.length; i++) {
        const s = sockets[i]!;
        if (i % 2 === 0) {
          expect(await s.waitClosed(3000)).toBe(true);
          expect(s.packets.filter((p) => p.cmd === 'connack' && (p.returnCode ?? 0) === 0)).toEqual([]);
        } else {
          const ack = await s.next(3000);
          expect(ack?.cmd === 'connack' ? ack.returnCode : ack?.cmd).toBe(0);
        }
      }
    } finally {
      for (const s of sockets) s.destroy();
    }
    await expectOthersUnaffected(tb.port);
  });
});
