import { mkdtempSync, rmSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import mqtt from 'mqtt';
import type { IPublishPacket } from 'mqtt-packet';
import { collectPackets, drainPackets, expectPacket, rawConnect, type RawSession } from '../support/mqtt-helpers';
import { startTestBroker, type TestBroker } from '../support/test-broker';

/**
 * Area 51, deliveries larger than the client's Maximum Packet Size [MQTT-3.1.2-24]: discarded as
 * if sent and completed [MQTT-3.1.2-25], reported as a drop, and the session goes on: the next
 * message that fits arrives, live and from a persistent session's queue, before and after a
 * restart. The Maximum Packet Size counts the whole packet, fixed header included (§3.1.2.11.4):
 * a PUBLISH of 20 bytes reaches a client that set 20, one of 21 does not. (mosquitto's own
 * 12-prop-maximum-packet-size-publish-qos1/qos2 cases expect the 21-byte one to arrive: mosquitto
 * leaves the fixed header byte out of the count.)
 */

interface RecordedEvent {
  type: string;
  clientId?: string;
  detail: Record<string, unknown>;
}
function drops(clientId: string): RecordedEvent[] {
  const sinks = (globalThis as { __bifroRecordedEvents?: Record<string, RecordedEvent[]> }).__bifroRecordedEvents ?? {};
  return (sinks.oversized ?? []).filter((e) => e.type === 'oversizePacketDropped' && e.clientId === clientId);
}

const EVENTS =
  'plugins:\n  storage: "@bifro/plugin-storage-level"\n  events:\n    - { use: "@fixtures/recording-events", options: { sink: oversized, eventTypes: [oversizePacketDropped] } }';

let dir: string;
let broker: TestBroker;
beforeAll(async () => {
  dir = mkdtempSync(path.join(os.tmpdir(), 'bifro-e2e-oversized-'));
  broker = await startTestBroker(EVENTS, { dir, keepDir: true });
});
afterAll(async () => {
  await broker.stop();
  rmSync(dir, { recursive: true, force: true });
});

/** Topic `test/topic` (10 bytes): a QoS 1/2 PUBLISH to a v5 client is 17 bytes plus the payload. */
const TOPIC = 'test/topic';

async function publishFrom(port: number, payloads: readonly string[], qos: 1 | 2): Promise<void> {
  const pub = await mqtt.connectAsync({ host: '127.0.0.1', port, protocolVersion: 5, reconnectPeriod: 0 });
  for (const p of payloads) await pub.publishAsync(TOPIC, p, { qos });
  await pub.endAsync();
}

async function subscriber(clientId: string, persistent: boolean): Promise<RawSession> {
  const s = await rawConnect(broker.port, {
    protocolVersion: 5,
    clientId,
    clean: !persistent,
    properties: { maximumPacketSize: 20, ...(persistent ? { sessionExpiryInterval: 600 } : {}) },
  });
  return s;
}

async function subscribe(s: RawSession, qos: 0 | 1 | 2): Promise<void> {
  s.send({ cmd: 'subscribe', messageId: 1, subscriptions: [{ topic: TOPIC, qos }] });
  await expectPacket(s.raw, 'suback');
}

/** The PUBLISH packets among `packets`, acknowledged as a client would. */
function publishes(s: RawSession, packets: readonly { cmd: string }[]): IPublishPacket[] {
  const out = packets.filter((p): p is IPublishPacket => p.cmd === 'publish');
  for (const p of out) {
    if (p.qos === 1) s.send({ cmd: 'puback', messageId: p.messageId! });
    if (p.qos === 2) s.send({ cmd: 'pubrec', messageId: p.messageId! });
  }
  return out;
}

describe.each([1, 2] as const)('51 oversized deliveries, QoS %s', (qos) => {
  it('live: a 21-byte PUBLISH is discarded and reported, the 20-byte and later ones arrive, packet ids go on', async () => {
    const id = `ov-live-${qos}`;
    const s = await subscriber(id, false);
    await subscribe(s, qos);
    await publishFrom(broker.port, ['1234', '123', 'x'], qos);
    const got = publishes(s, await collectPackets(s.raw, 'publish', 2));
    expect(got.map((p) => [p.payload.toString(), p.messageId])).toEqual([
      ['123', 2],
      ['x', 3],
    ]);
    expect(drops(id)).toHaveLength(1);
    s.raw.destroy();
  });

  it('persistent, from the queue after a reconnect and after a restart: discarded once, the rest arrives, nothing is resent', async () => {
    const id = `ov-queue-${qos}`;
    let s = await subscriber(id, true);
    await subscribe(s, qos);
    s.raw.destroy();
    await publishFrom(broker.port, ['1234', '123', 'x'], qos);
    s = await subscriber(id, true);
    const got = publishes(s, await collectPackets(s.raw, 'publish', 2));
    expect(got.map((p) => p.payload.toString())).toEqual(['123', 'x']);
    expect(drops(id)).toHaveLength(1);
    if (qos === 2) for (const p of got) s.send({ cmd: 'pubcomp', messageId: p.messageId! });
    await drainPackets(s.raw);
    s.raw.destroy();

    await broker.stop();
    broker = await startTestBroker(EVENTS, { dir, keepDir: true });
    s = await subscriber(id, true);
    expect(s.connack.sessionPresent).toBe(true);
    // The discarded message left no in-flight record behind: nothing comes back, no second drop.
    expect((await drainPackets(s.raw, 500)).filter((p) => p.cmd === 'publish')).toEqual([]);
    expect(drops(id)).toHaveLength(1);
    await publishFrom(broker.port, ['y'], qos);
    expect(publishes(s, await collectPackets(s.raw, 'publish', 1)).map((p) => p.payload.toString())).toEqual(['y']);
    s.raw.destroy();
  });
});
