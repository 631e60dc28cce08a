import type { Packet } from 'mqtt-packet';
import { useBrokerUnderTest } from '../support/broker-under-test';
import {
  collectPackets,
  drainPackets,
  expectPacket,
  mosquittoSub,
  publish,
  subscribe,
  uniqueName,
  unsubscribe,
  waitUntil,
  type ProtocolVersion,
  type RawSession,
} from '../support/mqtt-helpers';

/**
 * Area 03, SUBSCRIBE / UNSUBSCRIBE: SUBACK return codes, invalid filters, wildcard matching,
 * `$` topics, replacing and removing subscriptions. Standard MQTT only: runs against the broker
 * under test (Bifro, or mosquitto with BIFRO_E2E_TARGET=mosquitto).
 */

jest.setTimeout(15000);

const VERSIONS: ProtocolVersion[] = [4, 5];

/**
 * What a broker did with a SUBSCRIBE holding a valid filter followed by an invalid one: the
 * SUBACK's codes, or the DISCONNECT reason code (v5) / 'closed' when it dropped the connection.
 */
async function subscribeOutcome(s: RawSession, invalid: string): Promise<{ granted?: number[]; disconnect?: number; closed: boolean }> {
  s.send({
    cmd: 'subscribe',
    messageId: 21,
    subscriptions: [
      { topic: 'valid/filter', qos: 1 },
      { topic: invalid, qos: 1 },
    ],
  });
  const packets: Packet[] = await collectPackets(s.raw, 'suback', 1);
  const suback = packets.find((p) => p.cmd === 'suback');
  const disconnect = packets.find((p) => p.cmd === 'disconnect');
  const closed = await s.raw.waitClosed(suback ? 200 : 2000);
  const out: { granted?: number[]; disconnect?: number; closed: boolean } = { closed };
  if (suback?.cmd === 'suback') {
    expect(suback.messageId).toBe(21);
    out.granted = suback.granted as number[];
  }
  if (disconnect?.cmd === 'disconnect') out.disconnect = disconnect.reasonCode ?? 0;
  return out;
}

describe('03 subscribe', () => {
  const broker = useBrokerUnderTest();
  const clients = broker.clients;

  describe.each(VERSIONS)('v%s', (protocolVersion) => {
    it('answers with one return code per filter, in order, and the packet id of the SUBSCRIBE [MQTT-3.8.4-1][MQTT-3.8.4-2][MQTT-3.8.4-6][MQTT-3.9.3-1]', async () => {
      const root = uniqueName(`sub-codes-v${protocolVersion}`);
      const s = await clients.raw({ protocolVersion, clientId: uniqueName('codes') });
      s.send({
        cmd: 'subscribe',
        messageId: 11,
        subscriptions: [
          { topic: `${root}/two`, qos: 2 },
          { topic: `${root}/zero`, qos: 0 },
          { topic: `${root}/one/#`, qos: 1 },
        ],
      });
      const suback = await expectPacket(s.raw, 'suback');
      expect(suback.messageId).toBe(11);
      expect(suback.granted).toEqual([2, 0, 1]);
    });

    it('grants the requested QoS to an MQTT.js subscriber for each filter [MQTT-3.8.4-7]', async () => {
      const root = uniqueName(`sub-grant-v${protocolVersion}`);
      const { client } = await clients.mqtt({ protocolVersion, clientId: uniqueName('grant') });
      const granted = await subscribe(client, { [`${root}/a`]: { qos: 0 }, [`${root}/b`]: { qos: 1 }, [`${root}/c`]: { qos: 2 } });
      expect(granted.map((g) => [g.topic, g.qos])).toEqual([
        [`${root}/a`, 0],
        [`${root}/b`, 1],
        [`${root}/c`, 2],
      ]);
    });

    it('single-level wildcard + matches exactly one (possibly empty) level [MQTT-4.7.1-3]', async () => {
      const root = uniqueName(`sub-plus-v${protocolVersion}`);
      const sub = await clients.subscriber(`${root}/+/c`, { qos: 1 }, { protocolVersion, clientId: uniqueName('plus') });
      const { client: pub } = await clients.mqtt({ protocolVersion, clientId: uniqueName('plus-pub') });
      for (const t of [`${root}/a/c`, `${root}/a/b/c`, `${root}/c`, `${root}//c`, `${root}/a/c/d`, `${root}/b/c`]) {
        await publish(pub, t, t, { qos: 1 });
      }
      await sub.messages.waitFor(3);
      expect((await sub.messages.settle()).map((m) => m.topic)).toEqual([`${root}/a/c`, `${root}//c`, `${root}/b/c`]);
    });

    it('multi-level wildcard: a/# matches a itself and every level below [MQTT-4.7.1-2]', async () => {
      const root = uniqueName(`sub-hash-v${protocolVersion}`);
      const sub = await clients.subscriber(`${root}/a/#`, { qos: 1 }, { protocolVersion, clientId: uniqueName('hash') });
      const { client: pub } = await clients.mqtt({ protocolVersion, clientId: uniqueName('hash-pub') });
      for (const t of [`${root}/a`, `${root}/ab`, `${root}/a/b`, `${root}/b/a`, `${root}/a/b/c/d`, `${root}/a/`]) {
        await publish(pub, t, t, { qos: 1 });
      }
      await sub.messages.waitFor(4);
      expect((await sub.messages.settle()).map((m) => m.topic)).toEqual([`${root}/a`, `${root}/a/b`, `${root}/a/b/c/d`, `${root}/a/`]);
    });

    it('does not match topics starting with $ by filters starting with a wildcard [MQTT-4.7.2-1]', async () => {
      const root = uniqueName(`sub-dollar-v${protocolVersion}`);
      const dollarTopic = `$${root}/x`;
      const wild = await clients.subscriber(['#', '+/x', '+/+'], { qos: 1 }, { protocolVersion, clientId: uniqueName('dollar-wild') });
      const direct = await clients.subscriber(dollarTopic, { qos: 1 }, { protocolVersion, clientId: uniqueName('dollar-direct') });
      const { client: pub } = await clients.mqtt({ protocolVersion, clientId: uniqueName('dollar-pub') });
      await publish(pub, dollarTopic, 'dollar', { qos: 1 });
      // The explicit subscription shows the message was routed at all.
      expect((await direct.messages.waitFor(1)).map((m) => m.topic)).toEqual([dollarTopic]);
      await publish(pub, `${root}/x`, 'plain', { qos: 1 });
      expect(await waitUntil(() => wild.messages.messages.some((m) => m.topic === `${root}/x`))).toBe(true);
      const got = await wild.messages.settle();
      expect(got.filter((m) => m.topic.startsWith('$'))).toEqual([]);
    });

    it('replaces an existing subscription with the same filter: one copy at the new QoS [MQTT-3.8.4-3]', async () => {
      const topic = uniqueName(`sub-replace-v${protocolVersion}`);
      const { client } = await clients.mqtt({ protocolVersion, clientId: uniqueName('replace') });
      const sub = await clients.subscriber(topic, { qos: 0 }, { protocolVersion, clientId: uniqueName('replace-sub') });
      expect((await subscribe(sub.client, topic, { qos: 2 }))[0]?.qos).toBe(2);
      await publish(client, topic, 'once', { qos: 2 });
      await sub.messages.waitFor(1);
      expect((await sub.messages.settle(500)).map((m) => [m.payload.toString(), m.packet.qos])).toEqual([['once', 2]]);
    });

    it('stops delivering after UNSUBSCRIBE; UNSUBACK echoes the packet id [MQTT-3.10.4-1][MQTT-3.10.4-4][MQTT-3.10.4-5]', async () => {
      const root = uniqueName(`sub-unsub-v${protocolVersion}`);
      const s = await clients.raw({ protocolVersion, clientId: uniqueName('unsub') });
      s.send({
        cmd: 'subscribe',
        messageId: 5,
        subscriptions: [
          { topic: `${root}/gone`, qos: 1 },
          { topic: `${root}/kept`, qos: 0 },
        ],
      });
      expect((await expectPacket(s.raw, 'suback')).granted).toEqual([1, 0]);
      s.send({ cmd: 'unsubscribe', messageId: 6, unsubscriptions: [`${root}/gone`] });
      const unsuback = await expectPacket(s.raw, 'unsuback');
      expect(unsuback.messageId).toBe(6);
      const { client: pub } = await clients.mqtt({ protocolVersion, clientId: uniqueName('unsub-pub') });
      await publish(pub, `${root}/gone`, 'gone', { qos: 1 });
      await publish(pub, `${root}/kept`, 'kept', { qos: 0 });
      const p = await expectPacket(s.raw, 'publish');
      expect([p.topic, p.payload.toString()]).toEqual([`${root}/kept`, 'kept']);
      expect(await drainPackets(s.raw)).toEqual([]);
    });

    it('accepts many filters in one SUBSCRIBE and delivers for each of them', async () => {
      const root = uniqueName(`sub-many-v${protocolVersion}`);
      const n = 50;
      const filters = Array.from({ length: n }, (_, i) => `${root}/f${i}`);
      const s = await clients.raw({ protocolVersion, clientId: uniqueName('many') });
      s.send({ cmd: 'subscribe', messageId: 99, subscriptions: filters.map((topic, i) => ({ topic, qos: (i % 3) as 0 | 1 | 2 })) });
      const suback = await expectPacket(s.raw, 'suback');
      expect(suback.granted).toEqual(filters.map((_, i) => i % 3));
      const { client: pub } = await clients.mqtt({ protocolVersion, clientId: uniqueName('many-pub') });
      for (const f of filters) await publish(pub, f, f, { qos: 0 });
      const packets = await collectPackets(s.raw, 'publish', n);
      expect(packets.map((p) => (p.cmd === 'publish' ? p.topic : p.cmd)).sort()).toEqual([...filters].sort());
    });
  });

  it.each(['a/#/b', 'a+', '', 'a/b#', '#/a'])(
    'v4: an invalid filter %j is refused with SUBACK 0x80 for that filter or a closed connection [MQTT-4.7.1-2][MQTT-4.7.1-3][MQTT-4.7.3-1][MQTT-4.8.0-1]',
    async (invalid) => {
      const s = await clients.raw({ protocolVersion: 4, clientId: uniqueName('invalid4') });
      const r = await subscribeOutcome(s, invalid);
      // v3.1.1 leaves the choice: a protocol violation closes the connection (4.8), a refused
      // filter gets the Failure return code 0x80 (3.9.3) while the valid one is still granted.
      if (r.granted !== undefined) expect(r.granted).toEqual([1, 0x80]);
      else expect(r.closed).toBe(true);
    },
  );

  it.each(['a/#/b', 'a+', '', 'a/b#', '#/a'])(
    'v5: an invalid filter %j is refused with SUBACK 0x8F for that filter or DISCONNECT [MQTT-4.7.1-2][MQTT-4.7.1-3][MQTT-4.13.1-1][MQTT-3.9.3-1]',
    async (invalid) => {
      const s = await clients.raw({ protocolVersion: 5, clientId: uniqueName('invalid5') });
      const r = await subscribeOutcome(s, invalid);
      if (r.granted !== undefined) {
        expect(r.granted).toEqual([1, 0x8f]);
      } else {
        // A malformed filter may instead be treated as a malformed packet / protocol error:
        // DISCONNECT (0x81, 0x82 or 0x8F) is optional before the close.
        if (r.disconnect !== undefined) expect([0x81, 0x82, 0x8f]).toContain(r.disconnect);
        expect(r.closed).toBe(true);
      }
    },
  );

  it('v5: UNSUBACK has reason 0x00 for a removed filter and 0x11 for one that did not exist [MQTT-3.11.3-1][MQTT-3.11.3-2]', async () => {
    const root = uniqueName('sub-unsuback-v5');
    const s = await clients.raw({ protocolVersion: 5, clientId: uniqueName('unsuback5') });
    s.send({ cmd: 'subscribe', messageId: 1, subscriptions: [{ topic: `${root}/here`, qos: 1 }] });
    await expectPacket(s.raw, 'suback');
    s.send({ cmd: 'unsubscribe', messageId: 2, unsubscriptions: [`${root}/here`, `${root}/never`, `${root}/here`] });
    const unsuback = await expectPacket(s.raw, 'unsuback');
    expect(unsuback.messageId).toBe(2);
    // mqtt-packet reports the v5 UNSUBACK reason codes as `granted`.
    expect(unsuback.granted).toEqual([0x00, 0x11, 0x11]);
  });

  it('v4: MQTT.js unsubscribe then publish: no delivery [MQTT-3.10.4-1]', async () => {
    const topic = uniqueName('sub-unsub-mqttjs');
    const sub = await clients.subscriber(topic, { qos: 1 }, { protocolVersion: 4, clientId: uniqueName('uns-js') });
    await unsubscribe(sub.client, topic);
    const { client: pub } = await clients.mqtt({ protocolVersion: 4, clientId: uniqueName('uns-js-pub') });
    await publish(pub, topic, 'late', { qos: 1 });
    expect(await sub.messages.settle()).toEqual([]);
  });

  it.each(['mqttv311', 'mqttv5'])('mosquitto_sub -V %s with a + filter receives only matching topics', async (version) => {
    const root = uniqueName(`sub-cli-${version}`);
    const cli = clients.track(mosquittoSub(broker.port, ['-V', version, '-q', '1', '-C', '2', '-W', '8', '-t', `${root}/+/x`]));
    expect(await cli.subscribed).toBe(true);
    const { client: pub } = await clients.mqtt({ protocolVersion: 5, clientId: uniqueName('cli-pub') });
    for (const t of [`${root}/a/x`, `${root}/a/b/x`, `${root}/x`, `${root}/b/x`]) await publish(pub, t, 'p', { qos: 1 });
    const done = await cli.done;
    expect(done.code).toBe(0);
    expect(done.messages).toEqual([`${root}/a/x p`, `${root}/b/x p`]);
  });
});
