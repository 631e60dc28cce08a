import type { IConnectPacket } from 'mqtt-packet';
import { useBrokerUnderTest } from '../support/broker-under-test';
import { sleep, uniqueName, waitUntil, withClients, type ProtocolVersion, type RawSession } from '../support/mqtt-helpers';
import { startTestBroker, type TestBroker } from '../support/test-broker';
import { WHEEL_SLOT_MS } from '../support/test-clock';

/**
 * Area 06, Will messages: when a will is published (abnormal close, keep alive expiry, v5
 * DISCONNECT 0x04) and when not (normal DISCONNECT), its retain flag and QoS, and the v5 Will
 * Delay Interval against reconnects and session expiry. Standard MQTT only: runs against the
 * broker under test (Bifro, or mosquitto with BIFRO_E2E_TARGET=mosquitto).
 */

jest.setTimeout(15000);

const VERSIONS: ProtocolVersion[] = [4, 5];

function will(
  topic: string,
  payload: string,
  extra: Partial<NonNullable<IConnectPacket['will']>> = {},
): NonNullable<IConnectPacket['will']> {
  return { topic, payload: Buffer.from(payload), qos: 1, retain: false, ...extra };
}

/**
 * Drop the connection without DISCONNECT and give the broker a moment to see the close: the will
 * delay and the session expiry count from then, so the broker's clock is moved only after it.
 */
async function loseConnection(s: RawSession): Promise<void> {
  s.raw.destroy();
  await sleep(100);
}

describe('06 will', () => {
  const broker = useBrokerUnderTest();
  const clients = broker.clients;

  /** An MQTT.js watcher subscribed to the will topic at `qos`. */
  function watch(topic: string, qos: 0 | 1 | 2 = 1, protocolVersion: ProtocolVersion = 5) {
    return clients.subscriber(topic, { qos }, { protocolVersion, clientId: uniqueName('will-watch') });
  }

  describe.each(VERSIONS)('v%s', (protocolVersion) => {
    it('publishes the will when the network connection closes without DISCONNECT [MQTT-3.1.2-8]', async () => {
      const topic = uniqueName(`will-abrupt-v${protocolVersion}`);
      const watcher = await watch(topic);
      const s = await clients.raw({ protocolVersion, clientId: uniqueName('abrupt'), will: will(topic, 'gone') });
      s.raw.destroy();
      const [m] = await watcher.messages.waitFor(1);
      expect([m?.topic, m?.payload.toString(), m?.packet.qos, m?.packet.retain]).toEqual([topic, 'gone', 1, false]);
    });

    it('publishes the will when the keep alive expires [MQTT-3.1.2-8][MQTT-3.1.2-24]', async () => {
      const topic = uniqueName(`will-keepalive-v${protocolVersion}`);
      const watcher = await watch(topic);
      const s = await clients.raw({ protocolVersion, clientId: uniqueName('silent'), keepalive: 1, will: will(topic, 'timed out') });
      // The spec bound is 1.5 × keep alive: 2 s pass for the broker (its clock moved; mosquitto sleeps).
      await broker.passTime(2000);
      // Mosquitto's coarse keep alive check takes up to ~6 s here.
      expect(await s.raw.waitClosed(9000)).toBe(true);
      expect((await watcher.messages.waitFor(1)).map((m) => m.payload.toString())).toEqual(['timed out']);
    });

    it('does not publish the will after a normal DISCONNECT [MQTT-3.1.2-10]', async () => {
      const topic = uniqueName(`will-normal-v${protocolVersion}`);
      const watcher = await watch(topic);
      const s = await clients.raw({ protocolVersion, clientId: uniqueName('polite'), will: will(topic, 'must not appear') });
      s.send(protocolVersion === 5 ? { cmd: 'disconnect', reasonCode: 0 } : { cmd: 'disconnect' });
      expect(await s.raw.waitClosed()).toBe(true);
      expect(await watcher.messages.settle(500)).toEqual([]);
    });

    it('publishes a will with the retain flag as a retained message [MQTT-3.1.2-17]', async () => {
      const topic = uniqueName(`will-retain-v${protocolVersion}`);
      const s = await clients.raw({ protocolVersion, clientId: uniqueName('retainer'), will: will(topic, 'last words', { retain: true }) });
      s.raw.destroy();
      // Subscribe after the fact: the will must be there as the topic's retained message.
      let got: { payload: string; retain: boolean } | undefined;
      const deadline = Date.now() + 3000;
      while (got === undefined && Date.now() < deadline) {
        const late = await watch(topic, 1, protocolVersion);
        const [m] = await late.messages.waitFor(1, 300);
        if (m) got = { payload: m.payload.toString(), retain: m.packet.retain };
        late.client.end(true);
      }
      expect(got).toEqual({ payload: 'last words', retain: true });
    });

    it('publishes the will at its QoS, downgraded to each subscription’s QoS [MQTT-3.1.2-14][MQTT-3.8.4-8]', async () => {
      const topic = uniqueName(`will-qos-v${protocolVersion}`);
      const w2 = await watch(topic, 2);
      const w1 = await watch(topic, 1);
      const s = await clients.raw({ protocolVersion, clientId: uniqueName('qos2will'), will: will(topic, 'q2', { qos: 2 }) });
      s.raw.destroy();
      expect((await w2.messages.waitFor(1)).map((m) => m.packet.qos)).toEqual([2]);
      expect((await w1.messages.waitFor(1)).map((m) => m.packet.qos)).toEqual([1]);
    });
  });

  it('v5: DISCONNECT with reason 0x04 (Disconnect with Will Message) publishes the will [MQTT-3.1.2-8][MQTT-3.14.2-1] (v5)', async () => {
    const topic = uniqueName('will-rc04');
    const watcher = await watch(topic);
    const s = await clients.raw({ protocolVersion: 5, clientId: uniqueName('rc04'), will: will(topic, 'asked for it') });
    s.send({ cmd: 'disconnect', reasonCode: 0x04 });
    expect(await s.raw.waitClosed()).toBe(true);
    expect((await watcher.messages.waitFor(1)).map((m) => m.payload.toString())).toEqual(['asked for it']);
  });

  it('v5: Will Delay Interval 2 s: the will is published about 2 s after the connection is lost [MQTT-3.1.3-9] (v5)', async () => {
    const topic = uniqueName('will-delay');
    const watcher = await watch(topic);
    const s = await clients.raw({
      protocolVersion: 5,
      clientId: uniqueName('delayed'),
      properties: { sessionExpiryInterval: 60 },
      will: will(topic, 'later', { properties: { willDelayInterval: 2 } }),
    });
    await loseConnection(s);
    // Time passes for the broker (its clock moved; mosquitto sleeps). Brokers with whole-second
    // clocks (mosquitto) may fire up to ~1 s early, so "not yet" is checked well before 1 s; never at once.
    await broker.passTime(500);
    expect(watcher.messages.messages).toEqual([]);
    await broker.passTime(2000);
    expect(await waitUntil(() => watcher.messages.messages.length > 0, 2000)).toBe(true);
    expect(watcher.messages.payloads()).toEqual(['later']);
  });

  it('v5: reconnecting within the Will Delay Interval cancels the will [MQTT-3.1.3-9] (v5)', async () => {
    const topic = uniqueName('will-cancel');
    const clientId = uniqueName('comeback');
    const watcher = await watch(topic);
    const connect = {
      protocolVersion: 5 as const,
      clientId,
      clean: false,
      properties: { sessionExpiryInterval: 60 },
      will: will(topic, 'must not appear', { properties: { willDelayInterval: 2 } }),
    };
    const s = await clients.raw(connect);
    await loseConnection(s);
    await broker.passTime(500);
    const back = await clients.raw(connect);
    expect(back.connack.sessionPresent).toBe(true);
    // Past the will delay for the broker: the will stays cancelled.
    await broker.passTime(3000);
    expect(await watcher.messages.settle()).toEqual([]);
  });

  it('v5: reconnecting with clean start within the Will Delay Interval cancels the will too [MQTT-3.1.2-8] (v5)', async () => {
    const topic = uniqueName('will-cancel-clean');
    const clientId = uniqueName('comeback-clean');
    const watcher = await watch(topic);
    const s = await clients.raw({
      protocolVersion: 5,
      clientId,
      clean: false,
      properties: { sessionExpiryInterval: 60 },
      will: will(topic, 'must not appear', { properties: { willDelayInterval: 2 } }),
    });
    await loseConnection(s);
    await broker.passTime(500);
    // The old session ends (clean start), but a new network connection came within the delay.
    const back = await clients.raw({ protocolVersion: 5, clientId, clean: true });
    expect(back.connack.sessionPresent).toBe(false);
    await broker.passTime(3000);
    expect(await watcher.messages.settle()).toEqual([]);
  });

  it('v5: a will delay longer than the session expiry fires when the session ends [MQTT-3.1.3-9] (v5)', async () => {
    const topic = uniqueName('will-session-end');
    const watcher = await watch(topic);
    const s = await clients.raw({
      protocolVersion: 5,
      clientId: uniqueName('short-session'),
      properties: { sessionExpiryInterval: 1 },
      will: will(topic, 'session over', { properties: { willDelayInterval: 30 } }),
    });
    await loseConnection(s);
    // 2 s pass for the broker, far short of the 30 s will delay: the will came with the session's end.
    await broker.passTime(2000);
    expect(await waitUntil(() => watcher.messages.messages.length > 0, 1500)).toBe(true);
    expect(watcher.messages.payloads()).toEqual(['session over']);
  });
});

/** Bifro, its clock not moved: the will delay fires from the timer wheel ticking in real time. */
describe('06 will (Bifro)', () => {
  let tb: TestBroker;
  const clients = withClients(() => tb.port);

  beforeAll(async () => {
    tb = await startTestBroker();
  });
  afterAll(() => tb?.stop());

  it('v5: Will Delay Interval 1 s: the will is published 1 s after the connection is lost, in real time [MQTT-3.1.3-9]', async () => {
    const topic = uniqueName('will-delay-real');
    const watcher = await clients.subscriber(topic, { qos: 1 }, { protocolVersion: 5, clientId: uniqueName('will-watch') });
    const s = await clients.raw({
      protocolVersion: 5,
      clientId: uniqueName('delayed-real'),
      properties: { sessionExpiryInterval: 60 },
      will: will(topic, 'later', { properties: { willDelayInterval: 1 } }),
    });
    const lost = Date.now();
    s.raw.destroy();
    await sleep(700);
    expect(watcher.messages.messages).toEqual([]);
    expect(await waitUntil(() => watcher.messages.messages.length > 0, 2000)).toBe(true);
    const elapsed = Date.now() - lost;
    // Never early; at most one wheel slot late (and the coarse clock's slot).
    expect(elapsed).toBeGreaterThanOrEqual(1000);
    expect(elapsed).toBeLessThan(1000 + 2 * WHEEL_SLOT_MS + 300);
    expect(watcher.messages.payloads()).toEqual(['later']);
  });
});
