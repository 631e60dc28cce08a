import { useBrokerUnderTest } from '../support/broker-under-test';
import { expectPacket, mosquittoPub, publish, subscribe, uniqueName, type ProtocolVersion } from '../support/mqtt-helpers';

/**
 * Area 04, retained messages: store, replace, clear, the RETAIN flag on delivery, v5 Retain
 * Handling and Retain As Published, wildcard matches, message expiry and QoS downgrade.
 * Standard MQTT only: runs against the broker under test (Bifro, or mosquitto with
 * BIFRO_E2E_TARGET=mosquitto). Spec ids are v3.1.1's unless marked (v5).
 */

jest.setTimeout(15000);

const VERSIONS: ProtocolVersion[] = [4, 5];

describe('04 retain', () => {
  const broker = useBrokerUnderTest();
  const clients = broker.clients;

  describe.each(VERSIONS)('v%s', (protocolVersion) => {
    it('delivers a stored retained message to a new subscriber with RETAIN=1 [MQTT-3.3.1-5][MQTT-3.3.1-6][MQTT-3.3.1-8]', async () => {
      const topic = uniqueName(`ret-set-v${protocolVersion}`);
      const { client: pub } = await clients.mqtt({ protocolVersion, clientId: uniqueName('set-pub') });
      await publish(pub, topic, 'kept', { qos: 1, retain: true });
      const sub = await clients.subscriber(topic, { qos: 1 }, { protocolVersion, clientId: uniqueName('set-sub') });
      const [m] = await sub.messages.waitFor(1);
      expect([m?.topic, m?.payload.toString(), m?.packet.retain, m?.packet.qos]).toEqual([topic, 'kept', true, 1]);
      expect((await sub.messages.settle()).length).toBe(1);
    });

    it('replaces the retained message of a topic with the newest one [MQTT-3.3.1-5]', async () => {
      const topic = uniqueName(`ret-replace-v${protocolVersion}`);
      const { client: pub } = await clients.mqtt({ protocolVersion, clientId: uniqueName('rep-pub') });
      await publish(pub, topic, 'old', { qos: 1, retain: true });
      await publish(pub, topic, 'new', { qos: 1, retain: true });
      const sub = await clients.subscriber(topic, { qos: 1 }, { protocolVersion, clientId: uniqueName('rep-sub') });
      await sub.messages.waitFor(1);
      expect((await sub.messages.settle()).map((m) => m.payload.toString())).toEqual(['new']);
    });

    it('clears the retained message with an empty retained payload, which live subscribers still get [MQTT-3.3.1-10][MQTT-3.3.1-11]', async () => {
      const topic = uniqueName(`ret-clear-v${protocolVersion}`);
      const live = await clients.subscriber(topic, { qos: 1 }, { protocolVersion, clientId: uniqueName('clr-live') });
      const { client: pub } = await clients.mqtt({ protocolVersion, clientId: uniqueName('clr-pub') });
      await publish(pub, topic, 'soon gone', { qos: 1, retain: true });
      await publish(pub, topic, '', { qos: 1, retain: true });
      expect((await live.messages.waitFor(2)).map((m) => m.payload.toString())).toEqual(['soon gone', '']);
      const late = await clients.subscriber(topic, { qos: 1 }, { protocolVersion, clientId: uniqueName('clr-late') });
      expect(await late.messages.settle()).toEqual([]);
    });

    it('sends live deliveries with RETAIN=0 even when published retained [MQTT-3.3.1-9]', async () => {
      const topic = uniqueName(`ret-live-v${protocolVersion}`);
      const sub = await clients.subscriber(topic, { qos: 1 }, { protocolVersion, clientId: uniqueName('live-sub') });
      const { client: pub } = await clients.mqtt({ protocolVersion, clientId: uniqueName('live-pub') });
      await publish(pub, topic, 'live', { qos: 1, retain: true });
      const [m] = await sub.messages.waitFor(1);
      expect([m?.payload.toString(), m?.packet.retain]).toEqual(['live', false]);
    });

    it('delivers every retained message a wildcard filter matches, each with RETAIN=1 [MQTT-3.3.1-6]', async () => {
      const root = uniqueName(`ret-wild-v${protocolVersion}`);
      const { client: pub } = await clients.mqtt({ protocolVersion, clientId: uniqueName('wild-pub') });
      for (const t of [`${root}/a`, `${root}/b/c`, `${root}/d`, `${root}x/e`]) await publish(pub, t, t, { qos: 1, retain: true });
      const all = await clients.subscriber(`${root}/#`, { qos: 1 }, { protocolVersion, clientId: uniqueName('wild-all') });
      await all.messages.waitFor(3);
      const got = await all.messages.settle();
      expect(got.map((m) => m.topic).sort()).toEqual([`${root}/a`, `${root}/b/c`, `${root}/d`]);
      expect(got.every((m) => m.packet.retain)).toBe(true);
      const one = await clients.subscriber(`${root}/+`, { qos: 1 }, { protocolVersion, clientId: uniqueName('wild-one') });
      await one.messages.waitFor(2);
      expect((await one.messages.settle()).map((m) => m.topic).sort()).toEqual([`${root}/a`, `${root}/d`]);
    });

    it('delivers a retained QoS 2 message at the subscription QoS [MQTT-3.8.4-8]', async () => {
      const topic = uniqueName(`ret-qos-v${protocolVersion}`);
      const { client: pub } = await clients.mqtt({ protocolVersion, clientId: uniqueName('rq-pub') });
      await publish(pub, topic, 'q2', { qos: 2, retain: true });
      for (const subQos of [0, 1, 2] as const) {
        const sub = await clients.subscriber(topic, { qos: subQos }, { protocolVersion, clientId: uniqueName(`rq-sub${subQos}`) });
        const [m] = await sub.messages.waitFor(1);
        expect([m?.payload.toString(), m?.packet.qos, m?.packet.retain]).toEqual(['q2', subQos, true]);
      }
    });

    it('sets RETAIN=1 on the retained message delivered to a raw subscriber and keeps QoS 0 retained messages too [MQTT-3.3.1-7]', async () => {
      const topic = uniqueName(`ret-raw-v${protocolVersion}`);
      const { client: pub } = await clients.mqtt({ protocolVersion, clientId: uniqueName('raw-pub') });
      await publish(pub, topic, 'zero', { qos: 0, retain: true });
      // A QoS 0 publish completes when written: wait for a round trip before subscribing.
      await subscribe(pub, uniqueName('ret-raw-barrier'));
      const s = await clients.raw({ protocolVersion, clientId: uniqueName('raw-sub') });
      s.send({ cmd: 'subscribe', messageId: 1, subscriptions: [{ topic, qos: 1 }] });
      await expectPacket(s.raw, 'suback');
      const p = await expectPacket(s.raw, 'publish');
      expect([p.topic, p.payload.toString(), p.retain, p.qos, p.dup]).toEqual([topic, 'zero', true, 0, false]);
    });
  });

  it('v5: Retain As Published keeps RETAIN=1 on live deliveries; without it RETAIN=0 [MQTT-3.3.1-12][MQTT-3.3.1-13] (v5)', async () => {
    const root = uniqueName('ret-rap');
    const rap = await clients.subscriber(`${root}/t`, { qos: 1, rap: true }, { protocolVersion: 5, clientId: uniqueName('rap-on') });
    const plain = await clients.subscriber(`${root}/t`, { qos: 1, rap: false }, { protocolVersion: 5, clientId: uniqueName('rap-off') });
    const { client: pub } = await clients.mqtt({ protocolVersion: 5, clientId: uniqueName('rap-pub') });
    await publish(pub, `${root}/t`, 'retained', { qos: 1, retain: true });
    await publish(pub, `${root}/t`, 'not retained', { qos: 1, retain: false });
    expect((await rap.messages.waitFor(2)).map((m) => [m.payload.toString(), m.packet.retain])).toEqual([
      ['retained', true],
      ['not retained', false],
    ]);
    expect((await plain.messages.waitFor(2)).map((m) => [m.payload.toString(), m.packet.retain])).toEqual([
      ['retained', false],
      ['not retained', false],
    ]);
  });

  it('v5: Retain Handling 0 sends retained messages on every subscribe, also a repeated one [MQTT-3.3.1-9] (v5)', async () => {
    const topic = uniqueName('ret-rh0');
    const { client: pub } = await clients.mqtt({ protocolVersion: 5, clientId: uniqueName('rh0-pub') });
    await publish(pub, topic, 'r', { qos: 1, retain: true });
    const sub = await clients.subscriber(topic, { qos: 1, rh: 0 }, { protocolVersion: 5, clientId: uniqueName('rh0-sub') });
    await sub.messages.waitFor(1);
    await subscribe(sub.client, topic, { qos: 1, rh: 0 });
    await sub.messages.waitFor(2);
    expect((await sub.messages.settle()).map((m) => [m.payload.toString(), m.packet.retain])).toEqual([
      ['r', true],
      ['r', true],
    ]);
  });

  it('v5: Retain Handling 1 sends retained messages only when the subscription is new [MQTT-3.3.1-10] (v5)', async () => {
    const topic = uniqueName('ret-rh1');
    const { client: pub } = await clients.mqtt({ protocolVersion: 5, clientId: uniqueName('rh1-pub') });
    await publish(pub, topic, 'r', { qos: 1, retain: true });
    const sub = await clients.subscriber(topic, { qos: 1, rh: 1 }, { protocolVersion: 5, clientId: uniqueName('rh1-sub') });
    expect((await sub.messages.waitFor(1)).map((m) => m.payload.toString())).toEqual(['r']);
    await subscribe(sub.client, topic, { qos: 1, rh: 1 });
    expect((await sub.messages.settle()).length).toBe(1);
  });

  it('v5: Retain Handling 2 never sends retained messages on subscribe, live messages still flow [MQTT-3.3.1-11] (v5)', async () => {
    const topic = uniqueName('ret-rh2');
    const { client: pub } = await clients.mqtt({ protocolVersion: 5, clientId: uniqueName('rh2-pub') });
    await publish(pub, topic, 'r', { qos: 1, retain: true });
    const sub = await clients.subscriber(topic, { qos: 1, rh: 2 }, { protocolVersion: 5, clientId: uniqueName('rh2-sub') });
    expect(await sub.messages.settle()).toEqual([]);
    await publish(pub, topic, 'live', { qos: 1 });
    expect((await sub.messages.waitFor(1)).map((m) => m.payload.toString())).toEqual(['live']);
  });

  it('v5: a retained message past its Message Expiry Interval is not delivered to a new subscriber [MQTT-3.3.2-5][MQTT-3.3.2-6] (v5)', async () => {
    const topic = uniqueName('ret-expiry');
    const { client: pub } = await clients.mqtt({ protocolVersion: 5, clientId: uniqueName('exp-pub') });
    await publish(pub, topic, 'short lived', { qos: 1, retain: true, properties: { messageExpiryInterval: 1 } });
    const early = await clients.subscriber(topic, { qos: 1 }, { protocolVersion: 5, clientId: uniqueName('exp-early') });
    const [m] = await early.messages.waitFor(1);
    expect(m?.payload.toString()).toBe('short lived');
    // The forwarded expiry is the remaining lifetime: at most the original 1 s.
    expect(m?.packet.properties?.messageExpiryInterval).toBeLessThanOrEqual(1);
    // 2 s pass for the broker (moved on its clock; mosquitto sleeps): the 1 s expiry is over.
    await broker.passTime(2000);
    const late = await clients.subscriber(topic, { qos: 1 }, { protocolVersion: 5, clientId: uniqueName('exp-late') });
    expect(await late.messages.settle()).toEqual([]);
  });

  it.each(['mqttv311', 'mqttv5'])(
    'mosquitto_pub -V %s -r stores a retained message that a later subscriber gets with RETAIN=1',
    async (version) => {
      const topic = uniqueName(`ret-cli-${version}`);
      const r = await mosquittoPub(broker.port, [
        '-V',
        version,
        '-q',
        '1',
        '-r',
        '-i',
        uniqueName('cli-pub'),
        '-t',
        topic,
        '-m',
        'from cli',
      ]);
      expect(r.code).toBe(0);
      const sub = await clients.subscriber(topic, { qos: 1 }, { protocolVersion: 4, clientId: uniqueName('cli-sub') });
      const [m] = await sub.messages.waitFor(1);
      expect([m?.payload.toString(), m?.packet.retain]).toEqual(['from cli', true]);
    },
  );
});
