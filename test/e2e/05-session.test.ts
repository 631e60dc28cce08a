import type { IClientOptions } from 'mqtt';
import { useBrokerUnderTest } from '../support/broker-under-test';
import {
  drainPackets,
  expectPacket,
  mosquittoPub,
  mosquittoSub,
  publish,
  sleep,
  subscribe,
  uniqueName,
  withClients,
  type ClientRegistry,
  type ProtocolVersion,
} from '../support/mqtt-helpers';
import { startTestBroker, type TestBroker } from '../support/test-broker';
import { WHEEL_SLOT_MS } from '../support/test-clock';

/**
 * Area 05, sessions: clean vs persistent sessions, Session Present, subscriptions and queued
 * messages kept across connections, v5 Session Expiry, takeover, and resending unacknowledged
 * messages with DUP=1. Standard MQTT runs against the broker under test (Bifro, or mosquitto with
 * BIFRO_E2E_TARGET=mosquitto); the last describe checks Bifro-specific choices on Bifro.
 */

jest.setTimeout(15000);

const VERSIONS: ProtocolVersion[] = [4, 5];

/** MQTT.js options for a persistent session: clean=false (v3.1.1), clean start 0 + expiry 60 s (v5). */
function persistent(protocolVersion: ProtocolVersion, clientId: string): IClientOptions {
  return protocolVersion === 5
    ? { protocolVersion, clientId, clean: false, properties: { sessionExpiryInterval: 60 } }
    : { protocolVersion, clientId, clean: false };
}

/** Connects a persistent session, subscribes `topic` at QoS 2 and disconnects normally. */
async function leaveOfflineSubscriber(clients: ClientRegistry, protocolVersion: ProtocolVersion, clientId: string, topic: string) {
  const { client, connack } = await clients.mqtt(persistent(protocolVersion, clientId));
  expect(connack.sessionPresent).toBe(false);
  await subscribe(client, topic, { qos: 2 });
  await client.endAsync();
}

describe('05 session', () => {
  const broker = useBrokerUnderTest();
  const clients = broker.clients;

  describe.each(VERSIONS)('v%s', (protocolVersion) => {
    it('clean session / clean start: Session Present is 0, even when a session existed, and its subscriptions are gone [MQTT-3.1.2-6][MQTT-3.2.2-1]', async () => {
      const clientId = uniqueName(`ses-clean-v${protocolVersion}`);
      const topic = uniqueName('ses-clean-topic');
      const first = await clients.mqtt({ protocolVersion, clientId, clean: true });
      expect(first.connack.sessionPresent).toBe(false);
      await first.client.endAsync();
      await leaveOfflineSubscriber(clients, protocolVersion, clientId, topic);
      const again = await clients.mqttCollecting({ protocolVersion, clientId, clean: true });
      expect(again.connack.sessionPresent).toBe(false);
      const { client: pub } = await clients.mqtt({ protocolVersion, clientId: uniqueName('clean-pub') });
      await publish(pub, topic, 'nobody', { qos: 1 });
      expect(await again.messages.settle()).toEqual([]);
    });

    it('persistent session: reconnect gets Session Present 1 and keeps the subscriptions [MQTT-3.1.2-4][MQTT-3.2.2-2]', async () => {
      const clientId = uniqueName(`ses-keep-v${protocolVersion}`);
      const topic = uniqueName('ses-keep-topic');
      await leaveOfflineSubscriber(clients, protocolVersion, clientId, topic);
      const back = await clients.mqttCollecting(persistent(protocolVersion, clientId));
      expect(back.connack.sessionPresent).toBe(true);
      const { client: pub } = await clients.mqtt({ protocolVersion, clientId: uniqueName('keep-pub') });
      await publish(pub, topic, 'still subscribed', { qos: 1 });
      expect((await back.messages.waitFor(1)).map((m) => [m.payload.toString(), m.packet.qos])).toEqual([['still subscribed', 1]]);
    });

    it.each([1, 2] as const)(
      'queues QoS %s messages for an offline persistent session and delivers them on reconnect [MQTT-3.1.2-5]',
      async (qos) => {
        const clientId = uniqueName(`ses-queue-v${protocolVersion}-q${qos}`);
        const topic = uniqueName('ses-queue-topic');
        await leaveOfflineSubscriber(clients, protocolVersion, clientId, topic);
        const { client: pub } = await clients.mqtt({ protocolVersion, clientId: uniqueName('queue-pub') });
        for (const i of [1, 2, 3]) await publish(pub, topic, `offline ${i}`, { qos });
        const back = await clients.mqttCollecting(persistent(protocolVersion, clientId));
        expect(back.connack.sessionPresent).toBe(true);
        await back.messages.waitFor(3);
        expect((await back.messages.settle()).map((m) => [m.payload.toString(), m.packet.qos])).toEqual([
          ['offline 1', qos],
          ['offline 2', qos],
          ['offline 3', qos],
        ]);
      },
    );

    it('a second connection with the same client id closes the first one [MQTT-3.1.4-2][MQTT-3.1.4-3]', async () => {
      const clientId = uniqueName(`ses-takeover-v${protocolVersion}`);
      const first = await clients.raw({ protocolVersion, clientId });
      const second = await clients.raw({ protocolVersion, clientId });
      expect(second.connack.returnCode ?? second.connack.reasonCode).toBe(0);
      expect(await first.raw.waitClosed(3000)).toBe(true);
      const sent = first.raw.packets.filter((p) => p.cmd !== 'connack');
      // v5 may announce it with DISCONNECT 0x8E (Session taken over) before closing (Bifro does: see below).
      for (const p of sent) expect(p.cmd === 'disconnect' && p.reasonCode === 0x8e).toBe(true);
      second.send({ cmd: 'pingreq' });
      await expectPacket(second.raw, 'pingresp');
    });

    it('resends an unacknowledged QoS 1 PUBLISH with DUP=1 and its packet id after reconnect [MQTT-4.4.0-1][MQTT-3.3.1-1]', async () => {
      const clientId = uniqueName(`ses-dup1-v${protocolVersion}`);
      const topic = uniqueName('ses-dup1-topic');
      const properties = protocolVersion === 5 ? { sessionExpiryInterval: 60 } : undefined;
      const s1 = await clients.raw({ protocolVersion, clientId, clean: false, ...(properties && { properties }) });
      s1.send({ cmd: 'subscribe', messageId: 1, subscriptions: [{ topic, qos: 1 }] });
      await expectPacket(s1.raw, 'suback');
      const { client: pub } = await clients.mqtt({ protocolVersion, clientId: uniqueName('dup1-pub') });
      await publish(pub, topic, 'ack me', { qos: 1 });
      const first = await expectPacket(s1.raw, 'publish');
      expect([first.qos, first.dup]).toEqual([1, false]);
      s1.raw.destroy(); // no PUBACK
      await s1.raw.waitClosed();

      const s2 = await clients.raw({ protocolVersion, clientId, clean: false, ...(properties && { properties }) });
      expect(s2.connack.sessionPresent).toBe(true);
      const again = await expectPacket(s2.raw, 'publish');
      expect([again.topic, again.payload.toString(), again.qos, again.dup, again.messageId]).toEqual([
        topic,
        'ack me',
        1,
        true,
        first.messageId,
      ]);
      s2.send({ cmd: 'puback', messageId: again.messageId! });
      s2.send({ cmd: 'disconnect' });
      await s2.raw.waitClosed();

      // Acknowledged: not sent a third time.
      const s3 = await clients.raw({ protocolVersion, clientId, clean: false, ...(properties && { properties }) });
      expect(s3.connack.sessionPresent).toBe(true);
      expect(await drainPackets(s3.raw)).toEqual([]);
    });

    it('resends an unacknowledged QoS 2 PUBREL with its packet id after reconnect [MQTT-4.4.0-1][MQTT-4.3.3-2]', async () => {
      const clientId = uniqueName(`ses-pubrel-v${protocolVersion}`);
      const topic = uniqueName('ses-pubrel-topic');
      const properties = protocolVersion === 5 ? { sessionExpiryInterval: 60 } : undefined;
      const s1 = await clients.raw({ protocolVersion, clientId, clean: false, ...(properties && { properties }) });
      s1.send({ cmd: 'subscribe', messageId: 1, subscriptions: [{ topic, qos: 2 }] });
      await expectPacket(s1.raw, 'suback');
      const { client: pub } = await clients.mqtt({ protocolVersion, clientId: uniqueName('pubrel-pub') });
      await publish(pub, topic, 'exactly once', { qos: 2 });
      const p = await expectPacket(s1.raw, 'publish');
      s1.send({ cmd: 'pubrec', messageId: p.messageId! });
      expect((await expectPacket(s1.raw, 'pubrel')).messageId).toBe(p.messageId);
      s1.raw.destroy(); // no PUBCOMP
      await s1.raw.waitClosed();

      const s2 = await clients.raw({ protocolVersion, clientId, clean: false, ...(properties && { properties }) });
      expect(s2.connack.sessionPresent).toBe(true);
      expect((await expectPacket(s2.raw, 'pubrel')).messageId).toBe(p.messageId);
      s2.send({ cmd: 'pubcomp', messageId: p.messageId! });
      // The message itself is not sent again: the PUBREC already took it.
      expect(await drainPackets(s2.raw)).toEqual([]);
    });
  });

  it('v5: Session Expiry Interval 0 (the default) ends the session at disconnect: Session Present 0 [MQTT-3.1.2-23] (v5)', async () => {
    const clientId = uniqueName('ses-exp0');
    const { client } = await clients.mqtt({ protocolVersion: 5, clientId, clean: false });
    await subscribe(client, uniqueName('ses-exp0-topic'), { qos: 1 });
    await client.endAsync();
    const back = await clients.mqtt({ protocolVersion: 5, clientId, clean: false });
    expect(back.connack.sessionPresent).toBe(false);
  });

  it('v5: a session with Session Expiry Interval 1 s is gone when the client comes back after 2.5 s [MQTT-3.1.2-23] (v5)', async () => {
    const clientId = uniqueName('ses-exp1');
    const topic = uniqueName('ses-exp1-topic');
    const { client } = await clients.mqtt({ protocolVersion: 5, clientId, clean: false, properties: { sessionExpiryInterval: 1 } });
    await subscribe(client, topic, { qos: 1 });
    await client.endAsync();
    // 2.5 s pass for the broker (its clock moved; mosquitto sleeps).
    await broker.passTime(2500);
    const back = await clients.mqttCollecting({ protocolVersion: 5, clientId, clean: false, properties: { sessionExpiryInterval: 60 } });
    expect(back.connack.sessionPresent).toBe(false);
    const { client: pub } = await clients.mqtt({ protocolVersion: 5, clientId: uniqueName('exp1-pub') });
    await publish(pub, topic, 'expired', { qos: 1 });
    expect(await back.messages.settle()).toEqual([]);
  });

  it('v3.1.1: an empty client id with clean session 1 is accepted and works [MQTT-3.1.3-6][MQTT-3.1.3-7]', async () => {
    const topic = uniqueName('ses-empty-id');
    const s = await clients.raw({ protocolVersion: 4, clientId: '', clean: true });
    expect([s.connack.returnCode, s.connack.sessionPresent]).toEqual([0, false]);
    s.send({ cmd: 'subscribe', messageId: 1, subscriptions: [{ topic, qos: 1 }] });
    await expectPacket(s.raw, 'suback');
    s.send({ cmd: 'publish', topic, payload: Buffer.from('me'), qos: 1, dup: false, retain: false, messageId: 2 });
    const got = [await s.raw.next(), await s.raw.next()];
    expect(got.map((p) => p?.cmd).sort()).toEqual(['puback', 'publish']);
  });

  it.each([
    ['mqttv311', ['-c']],
    ['mqttv5', ['-c', '-x', '60']],
  ])('mosquitto_sub -V %s with a persistent session receives what was queued while it was away', async (version, sessionArgs) => {
    const clientId = uniqueName(`ses-cli-${version}`);
    const topic = uniqueName('ses-cli-topic');
    const common = ['-V', version, ...sessionArgs, '-i', clientId, '-q', '1', '-t', topic];
    const first = clients.track(mosquittoSub(broker.port, [...common, '-E'], 5000));
    expect(await first.subscribed).toBe(true);
    expect((await first.done).code).toBe(0);
    const r = await mosquittoPub(broker.port, ['-V', version, '-q', '1', '-t', topic, '-m', 'while away']);
    expect(r.code).toBe(0);
    const second = clients.track(mosquittoSub(broker.port, [...common, '-C', '1', '-W', '5']));
    const done = await second.done;
    expect(done.code).toBe(0);
    expect(done.messages).toEqual([`${topic} while away`]);
  });
});

/**
 * Bifro's choices beyond what the spec requires, so these run on Bifro whatever the target:
 * - QoS 0 messages are queued for offline persistent sessions (the spec lets a server choose;
 *   mosquitto does not queue them unless queue_qos0_messages is set).
 * - v5 takeover sends DISCONNECT 0x8E to the old connection before closing it, as
 *   [MQTT-3.1.4-3] describes; mosquitto 2.0.11 only closes the socket.
 */
describe('05 session (Bifro)', () => {
  let tb: TestBroker;
  const clients = withClients(() => tb.port);

  beforeAll(async () => {
    tb = await startTestBroker();
  });
  afterAll(() => tb?.stop());

  it.each(VERSIONS)('v%s: queues QoS 0 messages for an offline persistent session', async (protocolVersion) => {
    const clientId = uniqueName(`bifro-q0-v${protocolVersion}`);
    const topic = uniqueName('bifro-q0-topic');
    await leaveOfflineSubscriber(clients, protocolVersion, clientId, topic);
    const { client: pub } = await clients.mqtt({ protocolVersion, clientId: uniqueName('q0-pub') });
    await publish(pub, topic, 'zero', { qos: 0 });
    await publish(pub, topic, 'one', { qos: 1 }); // a round trip after the QoS 0 publish
    const back = await clients.mqttCollecting(persistent(protocolVersion, clientId));
    expect(back.connack.sessionPresent).toBe(true);
    await back.messages.waitFor(2);
    expect((await back.messages.settle()).map((m) => [m.payload.toString(), m.packet.qos])).toEqual([
      ['zero', 0],
      ['one', 1],
    ]);
  });

  it('v5: Session Expiry Interval 1 s ends the session in real time [MQTT-3.1.2-23]', async () => {
    // The broker's clock is not moved here: the session's deadline fires from the timer wheel ticking in real time.
    const clientId = uniqueName('bifro-exp-real');
    const { client } = await clients.mqtt({ protocolVersion: 5, clientId, clean: false, properties: { sessionExpiryInterval: 1 } });
    await subscribe(client, uniqueName('bifro-exp-real-topic'), { qos: 1 });
    await client.endAsync();
    // One slot late at most: 1 s + 2 slots.
    await sleep(1000 + 2 * WHEEL_SLOT_MS);
    const back = await clients.mqtt({ protocolVersion: 5, clientId, clean: false });
    expect(back.connack.sessionPresent).toBe(false);
  });

  it('v5: the taken-over connection receives DISCONNECT 0x8E (Session taken over) before it is closed [MQTT-3.1.4-3]', async () => {
    const clientId = uniqueName('bifro-takeover');
    const first = await clients.raw({ protocolVersion: 5, clientId });
    await clients.raw({ protocolVersion: 5, clientId });
    const disconnect = await expectPacket(first.raw, 'disconnect');
    expect(disconnect.reasonCode).toBe(0x8e);
    expect(await first.raw.waitClosed()).toBe(true);
  });
});
