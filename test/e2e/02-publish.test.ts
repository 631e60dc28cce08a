import { randomBytes } from 'node:crypto';
import type { IPublishPacket } from 'mqtt-packet';
import { useBrokerUnderTest } from '../support/broker-under-test';
import {
  collect,
  drainPackets,
  expectPacket,
  mosquittoPub,
  mosquittoSub,
  publish,
  subscribe,
  uniqueName,
  withClients,
  type ProtocolVersion,
} from '../support/mqtt-helpers';
import { startTestBroker, type TestBroker } from '../support/test-broker';

/**
 * Area 02, PUBLISH: QoS 0/1/2 in both directions for v3.1.1 and v5, the QoS a subscriber gets,
 * the QoS 2 exactly-once handshake, ordering, payload shapes and topic encoding. Runs against
 * the broker under test (Bifro, or mosquitto with BIFRO_E2E_TARGET=mosquitto); the last describe
 * checks Bifro's documented choice for overlapping subscriptions and always runs on Bifro.
 */

jest.setTimeout(15000);

const VERSIONS: ProtocolVersion[] = [4, 5];
const QOS = [0, 1, 2] as const;

/** Subscription identifiers of a delivered v5 PUBLISH, as a sorted list. */
function subscriptionIds(packet: IPublishPacket): number[] {
  const ids = packet.properties?.subscriptionIdentifier;
  if (ids === undefined) return [];
  return (Array.isArray(ids) ? [...ids] : [ids]).sort((a, b) => a - b);
}

describe('02 publish', () => {
  const broker = useBrokerUnderTest();
  const clients = broker.clients;

  describe.each(VERSIONS)('v%s', (protocolVersion) => {
    it.each(QOS)(
      'delivers a QoS %s message publisher → broker → subscriber with its QoS [MQTT-4.3.1-1][MQTT-4.3.2-1][MQTT-4.3.3-1]',
      async (qos) => {
        const topic = uniqueName(`pub-roundtrip-v${protocolVersion}-q${qos}`);
        const sub = await clients.subscriber(topic, { qos: 2 }, { protocolVersion, clientId: uniqueName('rt-sub') });
        expect(sub.granted[0]?.qos).toBe(2);
        const { client: pub } = await clients.mqtt({ protocolVersion, clientId: uniqueName('rt-pub') });
        await publish(pub, topic, `hello q${qos}`, { qos });
        const [m] = await sub.messages.waitFor(1);
        expect(m?.topic).toBe(topic);
        expect(m?.payload.toString()).toBe(`hello q${qos}`);
        expect(m?.packet.qos).toBe(qos);
        expect(m?.packet.retain).toBe(false);
        expect((await sub.messages.settle()).length).toBe(1);
      },
    );

    it('answers an inbound QoS 1 PUBLISH with a PUBACK that echoes the packet id [MQTT-2.3.1-6][MQTT-3.3.4-1]', async () => {
      const topic = uniqueName(`pub-puback-v${protocolVersion}`);
      const sub = await clients.subscriber(topic, { qos: 1 }, { protocolVersion, clientId: uniqueName('pa-sub') });
      const pub = await clients.raw({ protocolVersion, clientId: uniqueName('pa-raw') });
      pub.send({ cmd: 'publish', topic, payload: Buffer.from('q1'), qos: 1, dup: false, retain: false, messageId: 4242 });
      const puback = await expectPacket(pub.raw, 'puback');
      expect(puback.messageId).toBe(4242);
      if (protocolVersion === 5) expect(puback.reasonCode ?? 0).toBe(0);
      expect((await sub.messages.waitFor(1)).map((m) => m.payload.toString())).toEqual(['q1']);
    });

    it('delivers an inbound QoS 2 PUBLISH exactly once even when it is resent with DUP before PUBREL [MQTT-4.3.3-2][MQTT-3.6.4-1]', async () => {
      const topic = uniqueName(`pub-qos2-dup-v${protocolVersion}`);
      const sub = await clients.subscriber(topic, { qos: 2 }, { protocolVersion, clientId: uniqueName('eo-sub') });
      const pub = await clients.raw({ protocolVersion, clientId: uniqueName('eo-raw') });
      const publishPacket = { cmd: 'publish', topic, payload: Buffer.from('once'), qos: 2, retain: false, messageId: 7 } as const;
      pub.send({ ...publishPacket, dup: false });
      const pubrec = await expectPacket(pub.raw, 'pubrec');
      expect(pubrec.messageId).toBe(7);
      if (protocolVersion === 5) expect(pubrec.reasonCode ?? 0).toBe(0);
      // The same message again (a sender that lost the PUBREC): acknowledged again, not delivered again.
      pub.send({ ...publishPacket, dup: true });
      expect((await expectPacket(pub.raw, 'pubrec')).messageId).toBe(7);
      pub.send({ cmd: 'pubrel', messageId: 7 });
      const pubcomp = await expectPacket(pub.raw, 'pubcomp');
      expect(pubcomp.messageId).toBe(7);
      await sub.messages.waitFor(1);
      const got = await sub.messages.settle(500);
      expect(got.map((m) => m.payload.toString())).toEqual(['once']);
      expect(got[0]?.packet.qos).toBe(2);
      expect(await drainPackets(pub.raw, 0)).toEqual([]);
    });

    it('runs the outbound QoS 1 and QoS 2 flows with a raw subscriber [MQTT-2.3.1-1][MQTT-4.3.2-2][MQTT-4.3.3-2]', async () => {
      const topic = uniqueName(`pub-outbound-v${protocolVersion}`);
      const sub = await clients.raw({ protocolVersion, clientId: uniqueName('ob-raw') });
      sub.send({ cmd: 'subscribe', messageId: 3, subscriptions: [{ topic, qos: 2 }] });
      const suback = await expectPacket(sub.raw, 'suback');
      expect(suback.messageId).toBe(3);
      expect(suback.granted).toEqual([2]);
      const { client: pub } = await clients.mqtt({ protocolVersion, clientId: uniqueName('ob-pub') });

      await publish(pub, topic, 'one', { qos: 1 });
      const p1 = await expectPacket(sub.raw, 'publish');
      expect([p1.qos, p1.dup, p1.retain, p1.payload.toString()]).toEqual([1, false, false, 'one']);
      expect(p1.messageId).toBeGreaterThan(0);
      sub.send({ cmd: 'puback', messageId: p1.messageId! });

      const sent = publish(pub, topic, 'two', { qos: 2 });
      const p2 = await expectPacket(sub.raw, 'publish');
      expect([p2.qos, p2.dup, p2.payload.toString()]).toEqual([2, false, 'two']);
      expect(p2.messageId).toBeGreaterThan(0);
      sub.send({ cmd: 'pubrec', messageId: p2.messageId! });
      const pubrel = await expectPacket(sub.raw, 'pubrel');
      expect(pubrel.messageId).toBe(p2.messageId);
      sub.send({ cmd: 'pubcomp', messageId: p2.messageId! });
      await sent;
      expect(await drainPackets(sub.raw)).toEqual([]);
    });

    it('delivers at min(publish QoS, granted QoS) [MQTT-3.8.4-8]', async () => {
      const topic = uniqueName(`pub-minqos-v${protocolVersion}`);
      const subs = [];
      for (const subQos of QOS) {
        const s = await clients.subscriber(topic, { qos: subQos }, { protocolVersion, clientId: uniqueName(`mq-sub${subQos}`) });
        expect(s.granted[0]?.qos).toBe(subQos);
        subs.push({ subQos, messages: s.messages });
      }
      const { client: pub } = await clients.mqtt({ protocolVersion, clientId: uniqueName('mq-pub') });
      for (const pubQos of QOS) await publish(pub, topic, `p${pubQos}`, { qos: pubQos });
      for (const { subQos, messages } of subs) {
        const got = await messages.waitFor(3);
        expect(got.map((m) => [m.payload.toString(), m.packet.qos])).toEqual(QOS.map((pubQos) => [`p${pubQos}`, Math.min(pubQos, subQos)]));
      }
    });

    it('keeps the order of 500 QoS 1 messages from one publisher on one topic [MQTT-4.6.0-5]', async () => {
      const topic = uniqueName(`pub-order-v${protocolVersion}`);
      const sub = await clients.subscriber(topic, { qos: 1 }, { protocolVersion, clientId: uniqueName('or-sub') });
      const { client: pub } = await clients.mqtt({ protocolVersion, clientId: uniqueName('or-pub') });
      const n = 500;
      await Promise.all(Array.from({ length: n }, (_, i) => publish(pub, topic, String(i), { qos: 1 }, 10000)));
      const got = await sub.messages.waitFor(n, 10000);
      expect(got.map((m) => Number(m.payload.toString()))).toEqual(Array.from({ length: n }, (_, i) => i));
    });

    it.each([
      ['empty', Buffer.alloc(0)],
      ['binary (every byte value)', Buffer.from(Array.from({ length: 512 }, (_, i) => i % 256))],
      ['1 MB', randomBytes(1024 * 1024)],
    ])('carries a %s payload unchanged', async (_label, payload) => {
      const topic = uniqueName(`pub-payload-v${protocolVersion}`);
      const sub = await clients.subscriber(topic, { qos: 1 }, { protocolVersion, clientId: uniqueName('pl-sub') });
      const { client: pub } = await clients.mqtt({ protocolVersion, clientId: uniqueName('pl-pub') });
      await publish(pub, topic, payload, { qos: 1 }, 10000);
      const [m] = await sub.messages.waitFor(1, 10000);
      expect(m).toBeDefined();
      expect(m!.payload.length).toBe(payload.length);
      expect(m!.payload.equals(payload)).toBe(true);
    });

    it('routes a topic with multibyte UTF-8 levels, matched by a wildcard filter [MQTT-1.5.3-1][MQTT-4.7.3-4]', async () => {
      const root = uniqueName(`pub-utf8-v${protocolVersion}`);
      const topic = `${root}/ünïcødé/日本語/😀`;
      const sub = await clients.subscriber(`${root}/+/日本語/#`, { qos: 1 }, { protocolVersion, clientId: uniqueName('u8-sub') });
      const { client: pub } = await clients.mqtt({ protocolVersion, clientId: uniqueName('u8-pub') });
      await publish(pub, topic, 'utf8', { qos: 1 });
      const [m] = await sub.messages.waitFor(1);
      expect(m?.topic).toBe(topic);
    });

    it('delivers a message back to its publisher when it is subscribed (no No Local) [MQTT-3.8.3-3]', async () => {
      const topic = uniqueName(`pub-self-v${protocolVersion}`);
      const me = await clients.subscriber(topic, { qos: 1 }, { protocolVersion, clientId: uniqueName('self') });
      await publish(me.client, topic, 'echo', { qos: 1 });
      expect((await me.messages.waitFor(1)).map((m) => m.payload.toString())).toEqual(['echo']);
    });
  });

  it('v5: with overlapping subscriptions sends a copy at the maximum QoS, each copy with its subscription identifiers [MQTT-3.3.4-2][MQTT-3.3.4-4][MQTT-3.3.4-5]', async () => {
    const root = uniqueName('pub-overlap-v5');
    const { client: sub } = await clients.mqtt({ protocolVersion: 5, clientId: uniqueName('ov-sub') });
    const messages = collect(sub);
    await subscribe(sub, `${root}/+`, { qos: 0, properties: { subscriptionIdentifier: 1 } });
    await subscribe(sub, `${root}/#`, { qos: 2, properties: { subscriptionIdentifier: 2 } });
    const { client: pub } = await clients.mqtt({ protocolVersion: 5, clientId: uniqueName('ov-pub') });
    await publish(pub, `${root}/x`, 'overlap', { qos: 2 });
    await messages.waitFor(1);
    const got = await messages.settle(500);
    expect(got.length).toBeGreaterThanOrEqual(1);
    expect(got.length).toBeLessThanOrEqual(2);
    expect(Math.max(...got.map((m) => m.packet.qos))).toBe(2);
    if (got.length === 1) {
      // One copy: it carries the identifiers of all matching subscriptions.
      expect(subscriptionIds(got[0]!.packet)).toEqual([1, 2]);
    } else {
      // One copy per subscription, each with that subscription's identifier and QoS.
      const byId = got.map((m) => [subscriptionIds(m.packet), m.packet.qos]).sort((a, b) => String(a[0]).localeCompare(String(b[0])));
      expect(byId).toEqual([
        [[1], 0],
        [[2], 2],
      ]);
    }
  });

  it('mosquitto_pub -V mqttv311 and -V mqttv5 publish QoS 1 and 2 to an MQTT.js subscriber', async () => {
    const topic = uniqueName('pub-cli-in');
    const sub = await clients.subscriber(topic, { qos: 2 }, { protocolVersion: 5, clientId: uniqueName('cli-sub') });
    const runs = [
      ['mqttv311', '1'],
      ['mqttv5', '2'],
    ];
    for (const [version, qos] of runs) {
      const r = await mosquittoPub(broker.port, [
        '-V',
        version!,
        '-q',
        qos!,
        '-i',
        uniqueName('cli-pub'),
        '-t',
        topic,
        '-m',
        `${version} q${qos}`,
      ]);
      expect(r.code).toBe(0);
    }
    const got = await sub.messages.waitFor(2);
    expect(got.map((m) => [m.payload.toString(), m.packet.qos])).toEqual([
      ['mqttv311 q1', 1],
      ['mqttv5 q2', 2],
    ]);
  });

  it('mosquitto_sub -V mqttv311 -q 2 -C 3 receives an MQTT.js publisher’s messages in order', async () => {
    const topic = uniqueName('pub-cli-out');
    const cli = clients.track(mosquittoSub(broker.port, ['-V', 'mqttv311', '-q', '2', '-C', '3', '-W', '8', '-t', topic]));
    expect(await cli.subscribed).toBe(true);
    const { client: pub } = await clients.mqtt({ protocolVersion: 4, clientId: uniqueName('cli-pub') });
    for (const qos of QOS) await publish(pub, topic, `m${qos}`, { qos });
    const done = await cli.done;
    expect(done.code).toBe(0);
    expect(done.messages).toEqual([`${topic} m0`, `${topic} m1`, `${topic} m2`]);
  });
});

/**
 * Bifro's documented choice: a client whose subscriptions overlap gets ONE copy of a message, at
 * the highest granted QoS of the matching subscriptions (v5: carrying every matching subscription
 * identifier). Bifro-only because mosquitto 2.0.11 differs: for v5 it sends one copy per
 * subscription (which the spec allows), and for v3.1.1 it sends a single copy at the QoS of one
 * subscription that need not be the highest (against [MQTT-3.3.5-1]).
 */
describe('02 publish (Bifro): overlapping subscriptions deliver one copy', () => {
  let tb: TestBroker;
  const clients = withClients(() => tb.port);

  beforeAll(async () => {
    tb = await startTestBroker();
  });
  afterAll(() => tb?.stop());

  it.each(VERSIONS)(
    'v%s: one copy at the maximum QoS of the matching subscriptions [MQTT-3.3.5-1][MQTT-3.3.4-2]',
    async (protocolVersion) => {
      const root = uniqueName(`bifro-overlap-v${protocolVersion}`);
      const { client: sub } = await clients.mqtt({ protocolVersion, clientId: uniqueName('bo-sub') });
      const messages = collect(sub);
      const props = (id: number) => (protocolVersion === 5 ? { properties: { subscriptionIdentifier: id } } : {});
      await subscribe(sub, `${root}/+`, { qos: 0, ...props(1) });
      await subscribe(sub, `${root}/#`, { qos: 2, ...props(2) });
      await subscribe(sub, `${root}/x`, { qos: 1 });
      const { client: pub } = await clients.mqtt({ protocolVersion, clientId: uniqueName('bo-pub') });
      await publish(pub, `${root}/x`, 'one copy', { qos: 2 });
      await messages.waitFor(1);
      const got = await messages.settle(500);
      expect(got.map((m) => [m.payload.toString(), m.packet.qos])).toEqual([['one copy', 2]]);
      if (protocolVersion === 5) expect(subscriptionIds(got[0]!.packet)).toEqual([1, 2]);
    },
  );
});
