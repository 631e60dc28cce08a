import { setFlagsFromString } from 'node:v8';
import { runInNewContext } from 'node:vm';
import type { MqttClient } from 'mqtt';
import type { BrokerEvent, EventType } from '@bifro/spi';
import {
  collect,
  connectAsync,
  expectPacket,
  rawConnect,
  sleep,
  uniqueName,
  waitUntil,
  withClients,
  type RawSession,
} from '../support/mqtt-helpers';
import { expectOthersUnaffected, USER_TABLE_AUTH, USERS } from '../support/isolation';
import { startTestBroker, type TestBroker } from '../support/test-broker';

/**
 * Area 23, memory bounds (docs/security.md § Memory bounds): what a subscriber that stops reading
 * can make the broker hold. Deliveries waiting in memory for one connection (its session queue plus
 * its socket's write buffer) stay under `mqtt.maxQueuedBytesPerConnection` [SEC-MEM-1]; those of
 * all of a tenant's connections under its `MaxTenantQueuedBytes` [SEC-MEM-2]; what goes is dropped
 * by the `QoS0DropOldest` policy and reported (`qos*Dropped` with reason `queue-bytes` /
 * `tenant-queue-bytes`, tenant counters `messagesDropped` and `bytesDropped`) [SEC-MEM-3]; a
 * persistent session's acknowledged QoS 1/2 messages are never dropped for it [SEC-MEM-4]; other
 * connections keep receiving [SEC-MEM-5].
 *
 * The brokers run in this process, so the RSS measured here is the broker's (plus the clients').
 */

jest.setTimeout(60_000);

const KiB = 1024;
const MiB = 1024 * KiB;
/** Defaults: mqtt.maxQueuedBytesPerConnection, mqtt.writeHighWaterBytes. */
const CONNECTION_BOUND = 8 * MiB;
const HIGH_WATER = 1 * MiB;
const PAYLOAD = 256 * KiB;
/** How long the publishers keep sending. */
const PUBLISH_MS = 4000;
/** Most messages the normal subscriber may be behind the publisher. */
const WINDOW = 8;

// A full garbage collection on demand (jest does not start node with --expose-gc): RSS after it is
// what the process retains, not the garbage of messages that already went through.
setFlagsFromString('--expose-gc');
const gc = runInNewContext('gc') as () => void;

/**
 * Live memory after two full collections: the JS heap in use plus memory outside it (Buffers).
 * RSS itself keeps freed malloc memory, so it shows the garbage of what went through too.
 */
async function liveMemory(): Promise<number> {
  for (let i = 0; i < 2; i++) {
    gc();
    await sleep(50);
  }
  const m = process.memoryUsage();
  return m.heapUsed + m.external;
}

const alice = { username: 'alice', password: USERS.alice.password };
const bob = { username: 'bob', password: USERS.bob.password };

function sink(name: string): BrokerEvent[] {
  const g = globalThis as { __bifroRecordedEvents?: Record<string, BrokerEvent[]> };
  const sinks = (g.__bifroRecordedEvents ??= {});
  return (sinks[name] ??= []);
}

function find(events: readonly BrokerEvent[], type: EventType, clientId: string): BrokerEvent[] {
  return events.filter((e) => e.type === type && e.clientId === clientId);
}

function recordingEvents(name: string): string {
  return `  events: [{ use: "@fixtures/recording-events", options: { sink: ${name} } }]\n`;
}

/** A message numbered `i`: a 4-byte index, then filler. */
function numbered(i: number): Buffer {
  const b = Buffer.alloc(PAYLOAD, 0x61);
  b.writeUInt32BE(i, 0);
  return b;
}

/** A raw v4 subscriber that subscribes, then never reads again (its socket is paused). */
async function stalledSubscriber(
  port: number,
  user: { username: string; password: string },
  topic: string,
  qos: 0 | 1 = 0,
  clean = true,
  clientId = uniqueName('stalled'),
): Promise<RawSession & { clientId: string }> {
  const s = await rawConnect(port, { clientId, clean, username: user.username, password: Buffer.from(user.password) });
  s.send({ cmd: 'subscribe', messageId: 1, subscriptions: [{ topic, qos }] });
  await expectPacket(s.raw, 'suback');
  s.raw.socket.pause();
  return { ...s, clientId };
}

/** Highest values seen while sampling. */
class Peaks {
  rss = 0;
  readonly gauges = new Map<string, number>();
  constructor(private readonly tb: TestBroker) {}
  sample(): void {
    this.rss = Math.max(this.rss, process.memoryUsage.rss());
    for (const t of this.tb.broker.tenants())
      this.gauges.set(t, Math.max(this.gauges.get(t) ?? 0, this.tb.broker.tenantMetrics(t).sessionMemoryBytes));
  }
  gauge(tenant: string): number {
    return this.gauges.get(tenant) ?? 0;
  }
}

/**
 * Publish numbered messages from each publisher (QoS 0) for PUBLISH_MS, never more than WINDOW
 * ahead of what `paced` received; returns how many each sent.
 */
async function publishPaced(
  publishers: readonly MqttClient[],
  topic: string,
  paced: { messages: unknown[] },
  peaks: Peaks,
): Promise<number> {
  const end = Date.now() + PUBLISH_MS;
  let sent = 0;
  while (Date.now() < end) {
    const payload = numbered(sent);
    await Promise.all(publishers.map((p) => p.publishAsync(topic, payload, { qos: 0 })));
    sent++;
    peaks.sample();
    if (!(await waitUntil(() => sent - paced.messages.length <= WINDOW, 5000, 2)))
      throw new Error(`the normal subscriber stopped receiving: ${paced.messages.length} of ${sent}`);
  }
  return sent;
}

describe('23 memory bounds: queued bytes per connection', () => {
  const events = sink('mem-conn');
  let tb: TestBroker;
  const clients = withClients(() => tb.port);

  beforeAll(async () => {
    events.length = 0;
    tb = await startTestBroker(USER_TABLE_AUTH + recordingEvents('mem-conn'));
  });
  afterAll(async () => {
    await tb.stop();
  });

  it('keeps two stalled subscribers under the bound, drops and reports the rest, and a normal subscriber gets every message', async () => {
    const topic = uniqueName('mem/big');
    // One stalled subscriber in each tenant: each tenant's gauge is then that one connection's queue.
    const stalledA = clients.track(await stalledSubscriber(tb.port, alice, topic));
    const stalledB = clients.track(await stalledSubscriber(tb.port, bob, topic));
    const normal = (await clients.mqtt({ ...alice, clientId: uniqueName('normal'), protocolVersion: 4 })).client;
    const got = collect(normal);
    await normal.subscribeAsync(topic, { qos: 0 });
    const pubA = (await clients.mqtt({ ...alice, clientId: uniqueName('pub-a'), protocolVersion: 4 })).client;
    const pubB = (await clients.mqtt({ ...bob, clientId: uniqueName('pub-b'), protocolVersion: 4 })).client;

    const before = await liveMemory();
    const rssBefore = process.memoryUsage.rss();
    const peaks = new Peaks(tb);
    const sent = await publishPaced([pubA, pubB], topic, got, peaks);
    expect(await waitUntil(() => got.messages.length >= sent, 5000)).toBe(true);
    peaks.sample();
    const payloads = got.messages.map((m) => m.payload.readUInt32BE(0));
    got.clear();
    // The stalled subscribers are still connected and hold what they hold: measured after a GC.
    const retained = (await liveMemory()) - before;
    const rssGrowth = peaks.rss - rssBefore;
    const mib = (n: number): string => (n / MiB).toFixed(1);
    // The figures docs/security.md quotes.
    console.log(
      `23: sent ${sent} × ${PAYLOAD / KiB} KiB per tenant; peak queued ta ${mib(peaks.gauge('ta'))} MiB, tb ${mib(peaks.gauge('tb'))} MiB; ` +
        `RSS peak growth ${mib(rssGrowth)} MiB; live memory retained after GC ${mib(retained)} MiB`,
    );

    // The normal subscriber got every message, in order.
    expect(payloads).toEqual(Array.from({ length: sent }, (_, i) => i));
    // More was published than the bound and the socket buffers together could hold.
    expect(sent * PAYLOAD).toBeGreaterThan(CONNECTION_BOUND + 16 * MiB);
    // tb: only the stalled subscriber queues. ta: the stalled one and at most a moment's backlog of the normal one.
    expect(peaks.gauge('tb')).toBeLessThanOrEqual(CONNECTION_BOUND);
    expect(peaks.gauge('ta')).toBeLessThanOrEqual(2 * CONNECTION_BOUND);
    // Two stalled connections retain at most their bound each (queue + socket buffer, plus one
    // packet written while under the high-water mark): with a factor 2 and 32 MiB of slack.
    const retentionBound = 2 * (2 * (CONNECTION_BOUND + HIGH_WATER + PAYLOAD)) + 32 * MiB;
    expect(retained).toBeLessThan(retentionBound);
    // RSS also keeps the freed memory of what flowed through, so it grows with the throughput: it
    // stays under the bound plus the bytes published (about 0.6 × them measured). Unbounded queues
    // kept every byte published, and RSS grew past 2 × them (743 MiB for 334 MiB published).
    const published = 2 * sent * PAYLOAD;
    expect(rssGrowth).toBeLessThan(retentionBound + published);

    // Dropped and reported, per connection: the event and the counters.
    for (const [s, tenant] of [
      [stalledA, 'ta'],
      [stalledB, 'tb'],
    ] as const) {
      const drops = find(events, 'qos0Dropped', s.clientId);
      expect(drops.length).toBeGreaterThan(0);
      expect(drops[0]!.detail).toEqual({ topic, reason: 'queue-bytes' });
      const m = tb.broker.tenantMetrics(tenant);
      expect(m.messagesDropped).toBeGreaterThanOrEqual(drops.length);
      expect(m.bytesDropped).toBeGreaterThanOrEqual(drops.length * PAYLOAD);
    }
    expect(find(events, 'qos0Dropped', normal.options.clientId!)).toHaveLength(0);

    // The stalled connections are still there (not cut off before slowConsumerTimeoutMs), and hold no more than before.
    expect(stalledA.raw.closed || stalledB.raw.closed).toBe(false);
    await expectOthersUnaffected(tb.port);
  });
});

describe('23 memory bounds: queued bytes per tenant', () => {
  const events = sink('mem-tenant');
  const TENANT_BOUND = 4 * MiB;
  let tb: TestBroker;
  const clients = withClients(() => tb.port);

  beforeAll(async () => {
    events.length = 0;
    tb = await startTestBroker(
      USER_TABLE_AUTH +
        recordingEvents('mem-tenant') +
        `  settings: { use: "@fixtures/valid-settings", options: { values: { ta: { MaxTenantQueuedBytes: ${TENANT_BOUND} } } } }\n`,
    );
  });
  afterAll(async () => {
    await tb.stop();
  });

  it("keeps the tenant's stalled subscribers together under MaxTenantQueuedBytes, and another tenant's under its own", async () => {
    const topic = uniqueName('mem/tenant');
    const stalledA = [];
    for (let i = 0; i < 3; i++) stalledA.push(clients.track(await stalledSubscriber(tb.port, alice, topic)));
    const stalledB = clients.track(await stalledSubscriber(tb.port, bob, topic));
    const normal = (await clients.mqtt({ ...bob, clientId: uniqueName('normal'), protocolVersion: 4 })).client;
    const got = collect(normal);
    await normal.subscribeAsync(topic, { qos: 0 });
    const pubA = (await clients.mqtt({ ...alice, clientId: uniqueName('pub-a'), protocolVersion: 4 })).client;
    const pubB = (await clients.mqtt({ ...bob, clientId: uniqueName('pub-b'), protocolVersion: 4 })).client;

    const peaks = new Peaks(tb);
    const sent = await publishPaced([pubA, pubB], topic, got, peaks);
    expect(await waitUntil(() => got.messages.length >= sent, 5000)).toBe(true);
    peaks.sample();

    expect(got.messages).toHaveLength(sent);
    // Three stalled connections of ta together: the tenant bound, below what each could queue alone.
    expect(peaks.gauge('ta')).toBeLessThanOrEqual(TENANT_BOUND);
    const tenantDrops = stalledA
      .flatMap((s) => find(events, 'qos0Dropped', s.clientId))
      .filter((e) => e.detail.reason === 'tenant-queue-bytes');
    expect(tenantDrops.length).toBeGreaterThan(0);
    // tb keeps the default tenant bound: its one stalled subscriber queued past ta's bound, up to its connection bound.
    expect(peaks.gauge('tb')).toBeGreaterThan(TENANT_BOUND);
    expect(peaks.gauge('tb')).toBeLessThanOrEqual(CONNECTION_BOUND);
    expect(find(events, 'qos0Dropped', stalledB.clientId).filter((e) => e.detail.reason === 'tenant-queue-bytes')).toHaveLength(0);
    expect(tb.broker.tenantMetrics('ta').bytesDropped).toBeGreaterThan(0);
    await expectOthersUnaffected(tb.port);
  });
});

describe('23 memory bounds: persistent sessions lose nothing acknowledged', () => {
  const events = sink('mem-persistent');
  let tb: TestBroker;
  const clients = withClients(() => tb.port);

  beforeAll(async () => {
    events.length = 0;
    tb = await startTestBroker(USER_TABLE_AUTH + recordingEvents('mem-persistent') + 'mqtt: { slowConsumerTimeoutMs: 1000 }\n');
  });
  afterAll(async () => {
    await tb.stop();
  });

  it('keeps QoS 1 messages of a stalled persistent subscriber in its inbox, cuts it off, and delivers all of them on reconnect', async () => {
    const topic = uniqueName('mem/persistent');
    const clientId = uniqueName('stalled-p');
    const stalled = clients.track(await stalledSubscriber(tb.port, alice, topic, 1, false, clientId));
    const pub = (await clients.mqtt({ ...alice, clientId: uniqueName('pub'), protocolVersion: 4 })).client;
    const peaks = new Peaks(tb);
    let acked = 0;
    const deadline = Date.now() + 15_000;
    // Every PUBACK is awaited: each acknowledged message must reach the subscriber some time.
    while ((acked * PAYLOAD < CONNECTION_BOUND + 16 * MiB || find(events, 'serverBusy', clientId).length === 0) && Date.now() < deadline) {
      await pub.publishAsync(topic, numbered(acked), { qos: 1 });
      acked++;
      peaks.sample();
    }
    expect(find(events, 'serverBusy', clientId)).toHaveLength(1);
    stalled.raw.socket.resume(); // reads what was buffered for it, then sees the close
    expect(await stalled.raw.waitClosed(5000)).toBe(true);
    // Nothing of it waited in memory queues, nothing was dropped.
    expect(peaks.gauge('ta')).toBe(0);
    for (const type of ['qos1Dropped', 'qos0Dropped'] as const) expect(find(events, type, clientId)).toHaveLength(0);

    const again = await connectAsync(tb.port, { ...alice, clientId, clean: false, protocolVersion: 4 });
    clients.track(again.client);
    expect(again.connack.sessionPresent).toBe(true);
    const got = new Set<number>();
    again.client.on('message', (_t, p) => got.add(p.readUInt32BE(0)));
    await waitUntil(() => got.size >= acked, 15_000);
    expect(got.size).toBe(acked);
    await expectOthersUnaffected(tb.port);
  });
});
