import net from 'node:net';
import path from 'node:path';
import mqtt, { type MqttClient } from 'mqtt';
import { launchBroker, type BrokerProcess } from '../../bench/src/broker-process';
import { cpuFloorLines, hasCpuFloor, parseCompareArgs } from '../../bench/src/compare';
import { encodeConnect, encodePublish, encodeSubscribe } from '../../bench/src/packets';
import type { ScenarioResult } from '../../bench/src/scenario';

/**
 * The CPU reference of `bench:compare --cpu-floor` (core/bench/node-forward.mjs), started as a
 * real process: it must forward QoS 0 and QoS 1 between real MQTT clients, re-framed for each
 * subscriber, whatever the TCP chunking. Correctness only, no timing assertions.
 */
const REPO = path.resolve(__dirname, '..', '..', '..');
const WAIT_MS = 5000;

interface Received {
  readonly topic: string;
  readonly payload: string;
  readonly qos: number;
  readonly retain: boolean;
}

let forwarder: BrokerProcess;
const clients: MqttClient[] = [];

beforeAll(async () => {
  forwarder = await launchBroker('node-forward', { repoRoot: REPO, cpus: null });
});

afterAll(async () => {
  for (const c of clients) c.end(true);
  await forwarder.stop();
});

function connect(id: string, protocolVersion: 4 | 5): Promise<MqttClient> {
  return new Promise((resolve, reject) => {
    const client = mqtt.connect({
      host: forwarder.host,
      port: forwarder.port,
      clientId: id,
      protocolVersion,
      reconnectPeriod: 0,
      connectTimeout: WAIT_MS,
    });
    clients.push(client);
    client.once('connect', () => resolve(client));
    client.once('error', reject);
  });
}

/** Resolves with the first `count` messages the client receives. */
function collect(client: MqttClient, count: number): Promise<Received[]> {
  return new Promise((resolve, reject) => {
    const got: Received[] = [];
    const timer = setTimeout(() => reject(new Error(`only ${got.length} of ${count} messages within ${WAIT_MS} ms`)), WAIT_MS);
    client.on('message', (topic, payload, packet) => {
      got.push({ topic, payload: payload.toString(), qos: packet.qos, retain: packet.retain });
      if (got.length === count) {
        clearTimeout(timer);
        resolve(got);
      }
    });
  });
}

describe('node-forward: the bare Node forwarder', () => {
  it.each([4, 5] as const)(
    'forwards QoS 0 and QoS 1 between MQTT.js clients (MQTT %s, to a 3.1.1 and a 5.0 subscriber)',
    async (version) => {
      const root = `fwd${version}`;
      const sub4 = await connect(`${root}-s4`, 4);
      const sub5 = await connect(`${root}-s5`, 5);
      const sub0 = await connect(`${root}-s0`, 4);
      const grants = await Promise.all([
        sub4.subscribeAsync(`${root}/+/c`, { qos: 1 }),
        sub5.subscribeAsync(`${root}/#`, { qos: 1 }),
        sub0.subscribeAsync(`${root}/b/c`, { qos: 0 }),
      ]);
      expect(grants.map((g) => g[0]?.qos)).toEqual([1, 1, 0]);
      const got4 = collect(sub4, 2);
      const got5 = collect(sub5, 3);
      const got0 = collect(sub0, 2);
      const pub = await connect(`${root}-p`, version);
      await pub.publishAsync(`${root}/b/c`, 'zero', { qos: 0 });
      // Resolves on the forwarder's PUBACK [MQTT-4.3.2-2].
      await pub.publishAsync(`${root}/b/c`, 'one', { qos: 1, retain: true });
      await pub.publishAsync(`${root}/x`, 'other', { qos: 1 });

      // Delivered at min(published, granted) QoS [MQTT-3.8.4-6], RETAIN 0 on a live delivery [MQTT-3.3.1-9].
      expect(await got4).toEqual([
        { topic: `${root}/b/c`, payload: 'zero', qos: 0, retain: false },
        { topic: `${root}/b/c`, payload: 'one', qos: 1, retain: false },
      ]);
      expect(await got5).toEqual([
        { topic: `${root}/b/c`, payload: 'zero', qos: 0, retain: false },
        { topic: `${root}/b/c`, payload: 'one', qos: 1, retain: false },
        { topic: `${root}/x`, payload: 'other', qos: 1, retain: false },
      ]);
      expect(await got0).toEqual([
        { topic: `${root}/b/c`, payload: 'zero', qos: 0, retain: false },
        { topic: `${root}/b/c`, payload: 'one', qos: 0, retain: false },
      ]);
    },
  );

  it('reads packets coalesced in one chunk and split across many', async () => {
    const root = 'fwd-chunks';
    const sub = await connect(`${root}-s`, 4);
    await sub.subscribeAsync(`${root}/+`, { qos: 1 });
    const got = collect(sub, 3);
    const socket = net.connect({ host: forwarder.host, port: forwarder.port, noDelay: true });
    await new Promise<void>((resolve, reject) => socket.once('connect', resolve).once('error', reject));
    const acks: Buffer[] = [];
    socket.on('data', (chunk: Buffer) => acks.push(chunk));
    try {
      // CONNECT, SUBSCRIBE and two PUBLISH packets in one write, then a third one byte at a time.
      socket.write(
        Buffer.concat([
          encodeConnect(`${root}-raw`),
          encodeSubscribe(1, `${root}/none`, 0),
          encodePublish(`${root}/a`, Buffer.from('first'), 1, 7),
          encodePublish(`${root}/b`, Buffer.from('second'), 0),
        ]),
      );
      const last = encodePublish(`${root}/c`, Buffer.from('third'), 1, 8);
      for (const byte of last) {
        socket.write(Buffer.from([byte]));
        await new Promise((resolve) => setTimeout(resolve, 2));
      }
      expect((await got).map((m) => [m.topic, m.payload, m.qos])).toEqual([
        [`${root}/a`, 'first', 1],
        [`${root}/b`, 'second', 0],
        [`${root}/c`, 'third', 1],
      ]);
      const deadline = Date.now() + WAIT_MS;
      while (Buffer.concat(acks).length < 4 + 5 + 4 + 4 && Date.now() < deadline) await new Promise((r) => setTimeout(r, 10));
      // CONNACK, SUBACK (granted 0), PUBACK 7, PUBACK 8.
      expect([...Buffer.concat(acks)]).toEqual([0x20, 2, 0, 0, 0x90, 3, 0, 1, 0, 0x40, 2, 0, 7, 0x40, 2, 0, 8]);
    } finally {
      socket.destroy();
    }
  });
});

describe('bench:compare --cpu-floor', () => {
  function withCpu(us: number): ScenarioResult {
    return {
      scenario: 'latency',
      params: {},
      metrics: { cpuPerMessage: { label: 'broker CPU per delivered message', value: us, unit: 'µs', better: 'lower' } },
      headline: ['cpuPerMessage'],
      notes: [],
    };
  }

  it('runs the floor only in fixed-rate cells it can serve, and prints it with each broker’s ratio', () => {
    expect(parseCompareArgs(['--cpu-floor'])!.cpuFloor).toBe(true);
    expect(parseCompareArgs([])!.cpuFloor).toBe(false);
    expect(hasCpuFloor('latency', { rate: 2000 })).toBe(true);
    expect(hasCpuFloor('qos1-pairs', { rate: 0 })).toBe(false);
    expect(hasCpuFloor('qos1-pairs', { rate: 1000 })).toBe(true);
    expect(hasCpuFloor('shared-sub', { rate: 1000 })).toBe(false);
    const runs: Record<string, ScenarioResult[]> = {
      bifro: [withCpu(68), withCpu(80), withCpu(60)],
      mosquitto: [withCpu(29.5)],
      'node-forward': [withCpu(46), withCpu(40), withCpu(47)],
    };
    const text = cpuFloorLines(['latency'], ['bifro', 'mosquitto'], (_s, b) => runs[b] ?? []);
    // Medians of each run's own figure: 46 of (40, 46, 47), 68 of (60, 68, 80).
    expect(text).toContain(
      'latency: bare Node forwarder: 46 µs per message, median of 3 (bifro/node-forward 1.48×, mosquitto/node-forward 0.64×)',
    );
    expect(cpuFloorLines(['latency'], ['bifro'], (_s, b) => (b === 'bifro' ? runs.bifro! : []))).toBe('');
  });
});
