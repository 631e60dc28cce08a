import type { IPublishPacket } from 'mqtt-packet';
import { useBrokerUnderTest } from '../support/broker-under-test';
import {
  collectPackets,
  expectPacket,
  mosquittoPub,
  publish,
  rawConnect,
  uniqueName,
  waitUntil,
  withClients,
  type RawSession,
} from '../support/mqtt-helpers';
import { vbi } from '../support/mqtt-bytes';
import { RawClient } from '../support/raw-client';
import { startTestBroker, type TestBroker } from '../support/test-broker';

/**
 * Area 08, MQTT 5 properties: what the broker forwards unchanged to subscribers (user properties
 * in order, response topic, correlation data, content type, payload format indicator), message
 * expiry, subscription identifiers, and what it says in CONNACK. Standard behaviour runs against
 * the broker under test (Bifro, or mosquitto with BIFRO_E2E_TARGET=mosquitto); Bifro's own choices
 * and limits are in the `bifro-only` block.
 */

jest.setTimeout(15_000);

// ---------------------------------------------------------------------------------------------
// Raw bytes: build a v5 PUBLISH with properties in a chosen order, and split/decode what arrives.

function str(s: string): number[] {
  const b = Buffer.from(s, 'utf8');
  return [b.length >> 8, b.length & 0xff, ...b];
}

/** A v5 PUBLISH (QoS 0 or 1) carrying only User Properties, written in exactly the given order. */
function publishWithUserProps(topic: string, qos: 0 | 1, userProps: [string, string][], payload: string, packetId = 1): Buffer {
  const props: number[] = [];
  for (const [k, v] of userProps) props.push(0x26, ...str(k), ...str(v));
  const body = [...str(topic), ...(qos === 1 ? [packetId >> 8, packetId & 0xff] : []), ...vbi(props.length), ...props];
  const pl = Buffer.from(payload);
  return Buffer.concat([Buffer.from([0x30 | (qos << 1), ...vbi(body.length + pl.length), ...body]), pl]);
}

/** Every complete MQTT frame a raw client's socket receives, as bytes, in order. */
class FrameTap {
  readonly frames: Buffer[] = [];
  private buf = Buffer.alloc(0);

  constructor(raw: RawClient) {
    raw.socket.on('data', (d: Buffer) => {
      this.buf = Buffer.concat([this.buf, d]);
      for (;;) {
        let len = 0;
        let mul = 1;
        let i = 1;
        for (; i < this.buf.length && i <= 4; i++) {
          len += (this.buf[i]! & 0x7f) * mul;
          mul *= 128;
          if ((this.buf[i]! & 0x80) === 0) break;
        }
        if (i >= this.buf.length || this.buf.length < i + 1 + len) return;
        this.frames.push(this.buf.subarray(0, i + 1 + len));
        this.buf = this.buf.subarray(i + 1 + len);
      }
    });
  }

  publishes(): Buffer[] {
    return this.frames.filter((f) => f[0]! >> 4 === 3);
  }
}

/** The User Properties of a v5 PUBLISH frame, in wire order (other properties skipped). */
function userPropsOf(frame: Buffer): [string, string][] {
  let i = 1;
  while (frame[i]! & 0x80) i++;
  i++;
  const topicLen = frame.readUInt16BE(i);
  i += 2 + topicLen;
  if ((frame[0]! & 0x06) !== 0) i += 2;
  let propLen = 0;
  let mul = 1;
  for (;;) {
    const b = frame[i++]!;
    propLen += (b & 0x7f) * mul;
    mul *= 128;
    if ((b & 0x80) === 0) break;
  }
  const end = i + propLen;
  const out: [string, string][] = [];
  const readStr = (): string => {
    const n = frame.readUInt16BE(i);
    const s = frame.subarray(i + 2, i + 2 + n).toString('utf8');
    i += 2 + n;
    return s;
  };
  while (i < end) {
    const id = frame[i++]!;
    switch (id) {
      case 0x01:
        i += 1;
        break;
      case 0x02:
        i += 4;
        break;
      case 0x23:
        i += 2;
        break;
      case 0x03:
      case 0x08:
        readStr();
        break;
      case 0x09:
        i += 2 + frame.readUInt16BE(i);
        break;
      case 0x0b:
        while (frame[i++]! & 0x80);
        break;
      case 0x26: {
        const k = readStr();
        out.push([k, readStr()]);
        break;
      }
      default:
        throw new Error(`unexpected PUBLISH property 0x${id.toString(16)}`);
    }
  }
  return out;
}

async function rawSub(
  port: number,
  filter: string,
  opts: { clientId?: string; subscriptionIdentifier?: number } = {},
): Promise<RawSession> {
  const s = await rawConnect(port, { protocolVersion: 5, clientId: opts.clientId ?? uniqueName('sub08') });
  s.send({
    cmd: 'subscribe',
    messageId: 1,
    subscriptions: [{ topic: filter, qos: 1 }],
    ...(opts.subscriptionIdentifier !== undefined ? { properties: { subscriptionIdentifier: opts.subscriptionIdentifier } } : {}),
  });
  await expectPacket(s.raw, 'suback');
  return s;
}

async function nextPublish(raw: RawClient, timeoutMs = 3000): Promise<IPublishPacket> {
  return expectPacket(raw, 'publish', timeoutMs);
}

describe('08 properties (v5)', () => {
  const but = useBrokerUnderTest();
  const clients = but.clients;

  it('forwards User Properties unaltered and in order, repeated names included [MQTT-3.3.2-17] [MQTT-3.3.2-18]', async () => {
    const topic = uniqueName('e2e/08/up');
    const sub = clients.track(await rawSub(but.port, topic));
    const tap = new FrameTap(sub.raw);
    const pub = clients.track(await rawConnect(but.port, { protocolVersion: 5, clientId: uniqueName('pub08') }));
    const sent: [string, string][] = [
      ['a', '1'],
      ['b', 'x'],
      ['a', '2'],
      ['c', 'ü-ñ'],
      ['a', '1'],
    ];
    pub.raw.write(publishWithUserProps(topic, 1, sent, 'hello'));
    await expectPacket(pub.raw, 'puback');
    const p = await nextPublish(sub.raw);
    expect(p.payload.toString()).toBe('hello');
    expect(await waitUntil(() => tap.publishes().length === 1)).toBe(true);
    expect(userPropsOf(tap.publishes()[0]!)).toEqual(sent);
  });

  it('forwards User Properties set by MQTT.js (repeated names as arrays) [MQTT-3.3.2-17]', async () => {
    const topic = uniqueName('e2e/08/up-js');
    const sub = await clients.subscriber(topic, { qos: 1 }, { protocolVersion: 5, clientId: uniqueName('s') });
    const { client: pub } = await clients.mqtt({ protocolVersion: 5, clientId: uniqueName('p') });
    await publish(pub, topic, 'm', { qos: 1, properties: { userProperties: { k: ['v1', 'v2'], z: 'last' } } });
    const [m] = await sub.messages.waitFor(1);
    expect(m?.packet.properties?.userProperties).toEqual({ k: ['v1', 'v2'], z: 'last' });
  });

  it('forwards Response Topic and Correlation Data unaltered [MQTT-3.3.2-15] [MQTT-3.3.2-16]', async () => {
    const topic = uniqueName('e2e/08/rr');
    const sub = await clients.subscriber(topic, { qos: 1 }, { protocolVersion: 5, clientId: uniqueName('s') });
    const { client: pub } = await clients.mqtt({ protocolVersion: 5, clientId: uniqueName('p') });
    const correlationData = Buffer.from([0x00, 0xff, 0x10, 0x80, 0x7f]);
    await publish(pub, topic, 'req', { qos: 1, properties: { responseTopic: 'reply/to/me', correlationData } });
    const [m] = await sub.messages.waitFor(1);
    expect(m?.packet.properties?.responseTopic).toBe('reply/to/me');
    expect(Buffer.compare(m?.packet.properties?.correlationData ?? Buffer.alloc(0), correlationData)).toBe(0);
  });

  it('forwards Content Type unaltered [MQTT-3.3.2-20]', async () => {
    const topic = uniqueName('e2e/08/ct');
    const sub = await clients.subscriber(topic, { qos: 0 }, { protocolVersion: 5, clientId: uniqueName('s') });
    const { client: pub } = await clients.mqtt({ protocolVersion: 5, clientId: uniqueName('p') });
    await publish(pub, topic, '{"a":1}', { qos: 1, properties: { contentType: 'application/json; charset=utf-8' } });
    const [m] = await sub.messages.waitFor(1);
    expect(m?.packet.properties?.contentType).toBe('application/json; charset=utf-8');
  });

  it('forwards the Payload Format Indicator unaltered [MQTT-3.3.2-4]', async () => {
    const topic = uniqueName('e2e/08/pfi');
    const sub = await clients.subscriber(topic, { qos: 1 }, { protocolVersion: 5, clientId: uniqueName('s') });
    const { client: pub } = await clients.mqtt({ protocolVersion: 5, clientId: uniqueName('p') });
    await publish(pub, topic, 'text ✓', { qos: 1, properties: { payloadFormatIndicator: true } });
    await publish(pub, topic, Buffer.from([0xff, 0x00]), { qos: 1 });
    const [utf8, bin] = await sub.messages.waitFor(2);
    expect(utf8?.packet.properties?.payloadFormatIndicator).toBe(true);
    expect(utf8?.payload.toString()).toBe('text ✓');
    expect(bin?.packet.properties?.payloadFormatIndicator ?? false).toBe(false);
  });

  it('forwards the properties mosquitto_pub -V mqttv5 sets, user properties in order [MQTT-3.3.2-15..20]', async () => {
    const topic = uniqueName('e2e/08/cli');
    const sub = clients.track(await rawSub(but.port, topic));
    const tap = new FrameTap(sub.raw);
    const args = ['-V', 'mqttv5', '-q', '1', '-t', topic, '-m', 'cli'];
    args.push('-D', 'publish', 'content-type', 'text/x-test', '-D', 'publish', 'response-topic', 'r/t');
    args.push('-D', 'publish', 'correlation-data', 'corr-1', '-D', 'publish', 'payload-format-indicator', '1');
    for (const [k, v] of [
      ['x', '1'],
      ['y', '2'],
      ['x', '3'],
    ])
      args.push('-D', 'publish', 'user-property', k!, v!);
    const r = await mosquittoPub(but.port, args);
    expect(r.code).toBe(0);
    const p = await nextPublish(sub.raw);
    expect(p.payload.toString()).toBe('cli');
    expect(p.properties?.contentType).toBe('text/x-test');
    expect(p.properties?.responseTopic).toBe('r/t');
    expect(p.properties?.correlationData?.toString()).toBe('corr-1');
    expect(p.properties?.payloadFormatIndicator).toBe(true);
    expect(await waitUntil(() => tap.publishes().length === 1)).toBe(true);
    expect(userPropsOf(tap.publishes()[0]!)).toEqual([
      ['x', '1'],
      ['y', '2'],
      ['x', '3'],
    ]);
  });

  it("keeps the order of a will's user properties across names when the will is published [MQTT-3.1.3-10]", async () => {
    const topic = uniqueName('e2e/08/will-up');
    const sub = clients.track(await rawSub(but.port, topic));
    const tap = new FrameTap(sub.raw);
    const willProps: number[] = [];
    for (const [k, v] of [
      ['x', '1'],
      ['y', '2'],
      ['x', '3'],
    ] as const)
      willProps.push(0x26, ...str(k), ...str(v));
    // CONNECT v5, clean start + will flag (QoS 0), keep alive 60, no properties.
    const body = [
      ...str('MQTT'),
      5,
      0x06,
      0,
      60,
      0,
      ...str(uniqueName('will-up')),
      ...vbi(willProps.length),
      ...willProps,
      ...str(topic),
      ...str('gone'),
    ];
    const raw = clients.track(await RawClient.connect(but.port, 5));
    raw.write([0x10, ...vbi(body.length), ...body]);
    expect((await raw.next())?.cmd).toBe('connack');
    raw.destroy();
    expect(await waitUntil(() => tap.publishes().length === 1)).toBe(true);
    expect(userPropsOf(tap.publishes()[0]!)).toEqual([
      ['x', '1'],
      ['y', '2'],
      ['x', '3'],
    ]);
  });

  it('decrements the Message Expiry Interval by the time a message waited [MQTT-3.3.2-6]', async () => {
    const topic = uniqueName('e2e/08/exp');
    const clientId = uniqueName('exp-sub');
    const first = await rawConnect(but.port, { protocolVersion: 5, clientId, clean: false, properties: { sessionExpiryInterval: 60 } });
    first.send({ cmd: 'subscribe', messageId: 1, subscriptions: [{ topic, qos: 1 }] });
    await expectPacket(first.raw, 'suback');
    first.send({ cmd: 'disconnect' });
    expect(await first.raw.waitClosed()).toBe(true);

    const { client: pub } = await clients.mqtt({ protocolVersion: 5, clientId: uniqueName('p') });
    await publish(pub, topic, 'kept', { qos: 1, properties: { messageExpiryInterval: 30 } });
    // The message waits 2.1 s for the broker (its clock moved; mosquitto sleeps).
    await but.passTime(2100);

    const again = clients.track(
      await rawConnect(but.port, { protocolVersion: 5, clientId, clean: false, properties: { sessionExpiryInterval: 0 } }),
    );
    expect(again.connack.sessionPresent).toBe(true);
    const p = await nextPublish(again.raw);
    expect(p.payload.toString()).toBe('kept');
    const left = p.properties?.messageExpiryInterval;
    expect(left).toBeDefined();
    expect(left!).toBeLessThanOrEqual(28);
    expect(left!).toBeGreaterThanOrEqual(20);
  });

  it('does not deliver a message whose expiry passed while the subscriber was offline [MQTT-3.3.2-5]', async () => {
    const topic = uniqueName('e2e/08/expired');
    const clientId = uniqueName('expd-sub');
    const first = await rawConnect(but.port, { protocolVersion: 5, clientId, clean: false, properties: { sessionExpiryInterval: 60 } });
    first.send({ cmd: 'subscribe', messageId: 1, subscriptions: [{ topic, qos: 1 }] });
    await expectPacket(first.raw, 'suback');
    first.send({ cmd: 'disconnect' });
    expect(await first.raw.waitClosed()).toBe(true);

    const { client: pub } = await clients.mqtt({ protocolVersion: 5, clientId: uniqueName('p') });
    await publish(pub, topic, 'expires', { qos: 1, properties: { messageExpiryInterval: 1 } });
    await publish(pub, topic, 'stays', { qos: 1 });
    // 2.2 s pass for the broker while the subscriber is offline: the 1 s expiry is over.
    await but.passTime(2200);

    const again = clients.track(
      await rawConnect(but.port, { protocolVersion: 5, clientId, clean: false, properties: { sessionExpiryInterval: 0 } }),
    );
    const got = await collectPackets(again.raw, 'publish', 2, 1500);
    const payloads = got.filter((p): p is IPublishPacket => p.cmd === 'publish').map((p) => p.payload.toString());
    expect(payloads).toEqual(['stays']);
  });

  it('sends the Subscription Identifier of the matching subscription, none when it had none [MQTT-3.3.4-3]', async () => {
    const root = uniqueName('e2e/08/sid');
    const withId = clients.track(await rawSub(but.port, `${root}/+`, { subscriptionIdentifier: 42 }));
    const withoutId = clients.track(await rawSub(but.port, `${root}/#`));
    const { client: pub } = await clients.mqtt({ protocolVersion: 5, clientId: uniqueName('p') });
    await publish(pub, `${root}/x`, 'sid', { qos: 1 });
    const a = await nextPublish(withId.raw);
    expect(a.properties?.subscriptionIdentifier).toBe(42);
    const b = await nextPublish(withoutId.raw);
    expect(b.properties?.subscriptionIdentifier).toBeUndefined();
  });

  it('sends the identifiers of all overlapping subscriptions of one client [MQTT-3.3.4-3] [MQTT-3.3.4-4] [MQTT-3.3.4-5]', async () => {
    const root = uniqueName('e2e/08/sids');
    const s = clients.track(await rawConnect(but.port, { protocolVersion: 5, clientId: uniqueName('sids') }));
    s.send({ cmd: 'subscribe', messageId: 1, subscriptions: [{ topic: `${root}/+`, qos: 1 }], properties: { subscriptionIdentifier: 7 } });
    await expectPacket(s.raw, 'suback');
    s.send({ cmd: 'subscribe', messageId: 2, subscriptions: [{ topic: `${root}/#`, qos: 1 }], properties: { subscriptionIdentifier: 9 } });
    await expectPacket(s.raw, 'suback');
    const { client: pub } = await clients.mqtt({ protocolVersion: 5, clientId: uniqueName('p') });
    await publish(pub, `${root}/y`, 'both', { qos: 0 });
    // One copy with both identifiers, or one copy per subscription with its own identifier.
    const got = (await collectPackets(s.raw, 'publish', 2, 1000)).filter((p): p is IPublishPacket => p.cmd === 'publish');
    expect(got.length).toBeGreaterThanOrEqual(1);
    const ids = got.flatMap((p) => {
      const id = p.properties?.subscriptionIdentifier;
      return id === undefined ? [] : Array.isArray(id) ? id : [id];
    });
    expect([...ids].sort((x, y) => x - y)).toEqual([7, 9]);
  });

  it('sends no Response Information when the auth provider gave none, even when asked [MQTT-3.1.2-28]', async () => {
    const { connack } = await clients.mqtt({
      protocolVersion: 5,
      clientId: uniqueName('ri'),
      properties: { requestResponseInformation: true },
    });
    expect(connack.reasonCode).toBe(0);
    expect(connack.properties?.responseInformation).toBeUndefined();
  });

  it('sends no Reason String or User Properties on SUBACK/PUBACK when Request Problem Information is 0 [MQTT-3.1.2-29]', async () => {
    const topic = uniqueName('e2e/08/rpi');
    const s = clients.track(
      await rawConnect(but.port, { protocolVersion: 5, clientId: uniqueName('rpi'), properties: { requestProblemInformation: false } }),
    );
    s.send({ cmd: 'subscribe', messageId: 3, subscriptions: [{ topic, qos: 1 }] });
    const suback = await expectPacket(s.raw, 'suback');
    expect(suback.properties?.reasonString).toBeUndefined();
    expect(suback.properties?.userProperties).toBeUndefined();
    s.send({ cmd: 'publish', topic, payload: Buffer.from('x'), qos: 1, retain: false, dup: false, messageId: 4 });
    const got = await collectPackets(s.raw, 'puback', 1);
    const puback = got.find((p) => p.cmd === 'puback');
    expect(puback).toBeDefined();
    if (puback?.cmd === 'puback') {
      expect(puback.properties?.reasonString).toBeUndefined();
      expect(puback.properties?.userProperties).toBeUndefined();
    }
  });
});

describe('08 properties (v5): bifro-only', () => {
  let tb: TestBroker;
  const clients = withClients(() => tb.port);

  beforeAll(async () => {
    tb = await startTestBroker();
  });
  afterAll(() => tb.stop());

  it('bifro-only: CONNACK advertises Receive Maximum 1024, Topic Alias Maximum 64, a Maximum Packet Size ≥ 4 MiB, no QoS cap', async () => {
    const { connack } = await clients.mqtt({ protocolVersion: 5, clientId: uniqueName('caps') });
    const p = connack.properties ?? {};
    expect(p.receiveMaximum).toBe(1024);
    expect(p.topicAliasMaximum).toBe(64);
    expect(p.maximumPacketSize).toBeGreaterThanOrEqual(4 * 1024 * 1024);
    expect(p.maximumQoS).toBeUndefined();
    expect(p.retainAvailable ?? true).toBe(true);
    expect(p.wildcardSubscriptionAvailable ?? true).toBe(true);
    expect(p.sharedSubscriptionAvailable ?? true).toBe(true);
    expect(p.subscriptionIdentifiersAvailable ?? true).toBe(true);
  });

  it('bifro-only: PayloadFormatValidationEnabled refuses invalid UTF-8 with PFI 1: PUBACK 0x99 at QoS 1, not delivered', async () => {
    const topic = uniqueName('e2e/08/bad-utf8');
    const sub = clients.track(await rawSub(tb.port, topic));
    const pub = clients.track(await rawConnect(tb.port, { protocolVersion: 5, clientId: uniqueName('p') }));
    pub.send({
      cmd: 'publish',
      topic,
      payload: Buffer.from([0x61, 0xc3, 0x28]),
      qos: 1,
      retain: false,
      dup: false,
      messageId: 11,
      properties: { payloadFormatIndicator: true },
    });
    const puback = await expectPacket(pub.raw, 'puback');
    expect(puback.messageId).toBe(11);
    expect(puback.reasonCode).toBe(0x99);
    const delivered = await collectPackets(sub.raw, 'publish', 1, 500);
    expect(delivered).toEqual([]);
  });

  it('bifro-only: PayloadFormatValidationEnabled answers invalid UTF-8 with PFI 1 at QoS 0 with DISCONNECT 0x99', async () => {
    const topic = uniqueName('e2e/08/bad-utf8-0');
    const pub = clients.track(await rawConnect(tb.port, { protocolVersion: 5, clientId: uniqueName('p') }));
    pub.send({
      cmd: 'publish',
      topic,
      payload: Buffer.from([0xed, 0xa0, 0x80]),
      qos: 0,
      retain: false,
      dup: false,
      properties: { payloadFormatIndicator: true },
    });
    const d = await expectPacket(pub.raw, 'disconnect');
    expect(d.reasonCode).toBe(0x99);
    expect(await pub.raw.waitClosed()).toBe(true);
  });

  it('bifro-only: a refused CONNECT with Request Problem Information 0 carries no Reason String', async () => {
    const props = (await rawConnectRefused(tb.port, { requestProblemInformation: false })).properties ?? {};
    expect(props.reasonString).toBeUndefined();
    expect(props.userProperties).toBeUndefined();
  });
});

/**
 * A v5 CONNECT Bifro refuses even with the default dev auth: an Authentication Method no provider
 * supports (CONNACK 0x8C Bad authentication method, or another failure code).
 */
async function rawConnectRefused(
  port: number,
  props: { requestProblemInformation: boolean },
): Promise<{ properties?: Record<string, unknown> }> {
  const raw = await RawClient.connect(port, 5);
  try {
    raw.send(
      {
        cmd: 'connect',
        protocolId: 'MQTT',
        protocolVersion: 5,
        clientId: uniqueName('refused'),
        clean: true,
        keepalive: 30,
        properties: { requestProblemInformation: props.requestProblemInformation, authenticationMethod: 'NO-SUCH-METHOD' },
      },
      5,
    );
    const connack = await expectPacket(raw, 'connack');
    expect(connack.reasonCode).toBeGreaterThanOrEqual(0x80);
    return { properties: connack.properties as Record<string, unknown> | undefined };
  } finally {
    raw.destroy();
  }
}
