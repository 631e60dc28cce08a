import path from 'node:path';
import mqtt, { type IClientOptions, type MqttClient } from 'mqtt';
import { REPO, startTestBroker, type TestBroker } from '../support/test-broker';
import { sleep } from '../support/mqtt-helpers';

/**
 * Area 48, the reconnect race (issue "Nothing acknowledged is lost"): a persistent subscriber
 * reconnects every 150 ms while a publisher keeps 20 QoS 1/2 messages in flight. Every message
 * the broker acknowledged to the publisher must reach the subscriber (QoS 2 exactly once), in
 * publishing order of first receipt [MQTT-4.6.0-5], whether the subscriber leaves with
 * DISCONNECT, by a dropped socket or by a takeover from a second connection, on MQTT 3.1.1 and
 * 5.0, with the level and the memory storage.
 *
 * Before the fix, an append that landed while the inbox pump read the store was left behind: the
 * pump concluded the inbox was empty, and later reconnects did not read it again.
 */

const TRAFFIC_MS = 2000;
/** On a slow machine the traffic runs longer, until the subscriber has come back this often, up to MAX_TRAFFIC_MS. */
const MIN_CONNECTS = 8;
const MAX_TRAFFIC_MS = 15_000;
const RECONNECT_MS = 150;
const WINDOW = 20;

type Leave = 'disconnect' | 'drop' | 'takeover';
interface Case {
  readonly v: 4 | 5;
  readonly qos: 1 | 2;
  readonly leave: Leave;
}
const CASES: Case[] = [];
for (const v of [4, 5] as const)
  for (const qos of [1, 2] as const) for (const leave of ['disconnect', 'drop', 'takeover'] as const) CASES.push({ v, qos, leave });

/** MQTT.js ends its stores with the client: this one outlives each connection, as a device's own QoS 2 state does. */
class LastingStore extends mqtt.Store {
  override close(cb?: () => void): this {
    cb?.();
    return this;
  }
}

interface Outcome {
  acked: number[];
  received: Map<number, number>;
  order: number[];
  connects: number;
}

function connect(port: number, opts: IClientOptions, onMessage: (payload: Buffer) => void): Promise<MqttClient> {
  return new Promise((resolve, reject) => {
    const client = mqtt.connect({ host: '127.0.0.1', port, reconnectPeriod: 0, connectTimeout: 5000, ...opts });
    // Attached before CONNACK: what the broker resends right after it arrives in the same read.
    client.on('message', (_topic, payload) => onMessage(payload));
    client.once('connect', () => resolve(client));
    client.once('error', reject);
    client.once('close', () => reject(new Error(`${String(opts.clientId)}: closed before CONNACK`)));
  });
}

async function leave(client: MqttClient, how: Leave, takeOver: () => Promise<MqttClient>): Promise<MqttClient | undefined> {
  if (how === 'disconnect') {
    await client.endAsync();
    return undefined;
  }
  if (how === 'drop') {
    client.stream.destroy();
    client.end(true);
    return undefined;
  }
  const next = await takeOver();
  client.end(true);
  return next;
}

async function runCase(port: number, name: string, c: Case): Promise<Outcome> {
  const topic = `race/${name}`;
  const store = new LastingStore();
  const received = new Map<number, number>();
  const order: number[] = [];
  const onMessage = (payload: Buffer): void => {
    const n = Number(payload.toString());
    const times = (received.get(n) ?? 0) + 1;
    received.set(n, times);
    if (times === 1) order.push(n);
  };
  const subOpts: IClientOptions = {
    clientId: `${name}-sub`,
    protocolVersion: c.v,
    clean: false,
    incomingStore: store,
    ...(c.v === 5 ? { properties: { sessionExpiryInterval: 600 } } : {}),
  };
  const first = await connect(port, subOpts, onMessage);
  await first.subscribeAsync(topic, { qos: c.qos });
  await first.endAsync();

  const pub = await connect(port, { clientId: `${name}-pub`, protocolVersion: c.v }, () => undefined);
  const acked: number[] = [];
  let publishing = true;
  const publisher = (async () => {
    const inflight = new Set<Promise<void>>();
    for (let i = 0; publishing; i++) {
      const p: Promise<void> = pub.publishAsync(topic, String(i), { qos: c.qos }).then(() => void acked.push(i));
      inflight.add(p);
      void p.finally(() => inflight.delete(p)).catch(() => undefined);
      if (inflight.size >= WINDOW) await Promise.race(inflight);
    }
    await Promise.all(inflight);
  })();

  let connects = 0;
  const started = Date.now();
  let current: MqttClient | undefined;
  const more = (): boolean => {
    const ran = Date.now() - started;
    return ran < MAX_TRAFFIC_MS && (ran < TRAFFIC_MS || connects < MIN_CONNECTS || acked.length < 100);
  };
  while (more()) {
    current ??= await connect(port, subOpts, onMessage);
    connects++;
    await sleep(RECONNECT_MS);
    current = await leave(current, c.leave, () => connect(port, subOpts, onMessage));
  }
  publishing = false;
  await publisher;
  await pub.endAsync();
  const last = current ?? (await connect(port, subOpts, onMessage));
  const waitUntil = Date.now() + 10_000;
  while (acked.some((n) => !received.has(n)) && Date.now() < waitUntil) await sleep(20);
  // A moment more for duplicates that would break QoS 2 exactly-once.
  await sleep(200);
  await last.endAsync();
  return { acked, received, order, connects };
}

function check(c: Case, o: Outcome): string[] {
  const problems: string[] = [];
  const missing = o.acked.filter((n) => !o.received.has(n));
  if (missing.length > 0)
    problems.push(`${missing.length} of ${o.acked.length} acknowledged messages never arrived (first: ${missing.slice(0, 5).join(', ')})`);
  if (c.qos === 2) {
    const twice = [...o.received].filter(([, times]) => times > 1).map(([n]) => n);
    if (twice.length > 0) problems.push(`QoS 2 delivered more than once: ${twice.slice(0, 5).join(', ')}`);
  }
  for (let i = 1; i < o.order.length; i++)
    if (o.order[i]! < o.order[i - 1]!) {
      problems.push(`out of order: ${o.order[i]} first arrived after ${o.order[i - 1]}`);
      break;
    }
  if (o.acked.length < 100) problems.push(`only ${o.acked.length} messages acknowledged: too little traffic to race`);
  if (o.connects < MIN_CONNECTS) problems.push(`only ${o.connects} connections`);
  return problems;
}

describe.each([
  ['level', '@bifro/plugin-storage-level'],
  ['memory', '@bifro/plugin-storage-memory'],
])('48 reconnect during QoS 1/2 traffic (%s storage)', (storage, plugin) => {
  let broker: TestBroker;
  beforeAll(async () => {
    broker = await startTestBroker(`plugins:\n  storage: "${plugin}"\n`, { pluginsDir: path.join(REPO, 'plugins') });
  });
  afterAll(() => broker.stop());

  it('delivers every acknowledged message to a subscriber that reconnects every 150 ms (v3.1.1 and v5, QoS 1 and 2, DISCONNECT, socket drop, takeover)', async () => {
    const outcomes = await Promise.all(CASES.map((c) => runCase(broker.port, `${storage}-v${c.v}-q${c.qos}-${c.leave}`, c)));
    const report = CASES.flatMap((c, i) => check(c, outcomes[i]!).map((p) => `v${c.v} QoS ${c.qos} ${c.leave}: ${p}`));
    expect(report).toEqual([]);
  }, 90_000);
});
