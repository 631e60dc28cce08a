import { mkdtempSync, rmSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import type { MqttClient } from 'mqtt';
import { startClusterNode, waitForMetric, waitForNodes, type ClusterNode } from '../support/cluster-node';
import {
  collect,
  connectAsync,
  connectCollecting,
  disconnectOf,
  publish,
  publishAcked,
  sleep,
  subscribe,
  waitUntil,
} from '../support/mqtt-helpers';
import { startNatsServer, type NatsCluster } from '../support/nats-server';

/**
 * The cluster-wide session registry over a real nats-server and three broker processes
 * (docs/cluster.md § Sessions): one session per client id across the cluster (a CONNECT on
 * another node takes it over with 0x8E), tenants apart, and the wills of a killed node's clients
 * published once, by one survivor.
 */

let root: string;
let nats: NatsCluster;
let a: ClusterNode;
let b: ClusterNode;
let c: ClusterNode;
const clients: MqttClient[] = [];

async function client(node: ClusterNode, clientId: string, opts: Parameters<typeof connectAsync>[1] = {}): Promise<MqttClient> {
  const { client: m } = await connectAsync(node.proc.port, { clientId, protocolVersion: 5, reconnectPeriod: 0, ...opts });
  clients.push(m);
  return m;
}

beforeAll(async () => {
  root = mkdtempSync(path.join(os.tmpdir(), 'bifro-sessions-'));
  nats = await startNatsServer();
  [a, b, c] = await Promise.all([
    startClusterNode(root, nats, 'node-a'),
    startClusterNode(root, nats, 'node-b'),
    startClusterNode(root, nats, 'node-c'),
  ]);
  await waitForNodes([a, b, c], 3);
}, 60_000);
afterEach(() => {
  for (const m of clients.splice(0)) m.end(true);
});
afterAll(async () => {
  await Promise.all([a?.proc.stop(), b?.proc.stop(), c?.proc.stop()]);
  await nats?.dispose();
  rmSync(root, { recursive: true, force: true });
});

describe('one session per client id across the cluster', () => {
  it('a CONNECT on another node takes the session over: the old connection gets DISCONNECT 0x8E', async () => {
    const first = await client(a, 'roamer');
    const gone = disconnectOf(first);
    const second = await client(b, 'roamer');
    expect((await gone)?.reasonCode).toBe(0x8e);
    // The new owner serves it; and taking it back to the first node works the same way.
    const got = collect(second);
    await subscribe(second, 'roam/t', { qos: 1 });
    await publish(second, 'roam/t', 'here', { qos: 1 });
    await got.waitFor(1);
    const goneAgain = disconnectOf(second);
    await client(a, 'roamer');
    expect((await goneAgain)?.reasonCode).toBe(0x8e);
    expect(a.proc.output() + b.proc.output()).not.toMatch(/"level":50/);
  }, 30_000);

  it('closes an MQTT 3.1.1 connection taken over from another node', async () => {
    const first = await client(b, 'roamer-v4', { protocolVersion: 4 });
    const gone = disconnectOf(first);
    await client(c, 'roamer-v4', { protocolVersion: 4 });
    expect(await gone).toBeUndefined();
  }, 20_000);

  it('keeps the same client id of two tenants apart on two nodes', async () => {
    const one = await client(a, 'twin', { username: 'ten1/u' });
    const two = await client(b, 'twin', { username: 'ten2/u' });
    let closed = 0;
    one.on('close', () => closed++);
    two.on('close', () => closed++);
    await sleep(1000);
    expect(closed).toBe(0);
    expect(one.connected && two.connected).toBe(true);
  }, 20_000);

  it('hands over a session whose client reconnects to a third node at once, many times', async () => {
    // A device bouncing between nodes: every CONNECT wins, and only the latest connection stays.
    const order = [a, b, c, a, c, b];
    const conns: MqttClient[] = [];
    for (const node of order) conns.push(await client(node, 'bouncer'));
    await sleep(500);
    expect(conns.map((m) => m.connected)).toEqual([false, false, false, false, false, true]);
  }, 30_000);
});

describe('state the nodes share (the default storage on JetStream)', () => {
  it('moves a persistent session with its subscriptions and inbox to the node it reconnects to', async () => {
    const persistent = { clean: false, properties: { sessionExpiryInterval: 300 } };
    const first = await client(a, 'traveller', persistent);
    await subscribe(first, 'travel/#', { qos: 1 });
    await new Promise<void>((resolve) => first.end(false, {}, () => resolve()));
    // Queued while it is away: published on the third node, kept in its inbox on JetStream.
    const pub = await client(c, 'travel-pub');
    for (let i = 0; i < 5; i++) await publish(pub, 'travel/t', `queued-${i}`, { qos: 1 });
    const {
      client: back,
      connack,
      messages: got,
    } = await connectCollecting(b.proc.port, {
      clientId: 'traveller',
      protocolVersion: 5,
      reconnectPeriod: 0,
      ...persistent,
    });
    clients.push(back);
    expect(connack.sessionPresent).toBe(true);
    expect((await got.waitFor(5)).map((m) => m.payload.toString())).toEqual([0, 1, 2, 3, 4].map((i) => `queued-${i}`));
    // Its subscription came along: a message published now reaches it on its new node.
    await publishAcked(pub, 'travel/t', 'live');
    expect((await got.waitFor(6))[5]!.payload.toString()).toBe('live');
  }, 30_000);

  it('matches a retained message set on one node with a wildcard subscribe on another', async () => {
    const setter = await client(a, 'retainer');
    await publish(setter, 'shelf/left/book', 'kept', { qos: 1, retain: true });
    const reader = await client(b, 'shelf-reader');
    const got = collect(reader);
    await subscribe(reader, 'shelf/+/#', { qos: 1 });
    const [m] = await got.waitFor(1);
    expect(m!.topic).toBe('shelf/left/book');
    expect(m!.payload.toString()).toBe('kept');
    expect(m!.packet.retain).toBe(true);
  }, 20_000);
});

describe('a killed node', () => {
  it("publishes its clients' wills once, from one survivor, within about 12 s", async () => {
    const victim = await startClusterNode(root, nats, 'node-victim');
    await waitForNodes([a, b, c, victim], 4);
    const watcher = await client(a, 'will-watcher');
    const got = collect(watcher);
    await subscribe(watcher, 'wills/#', { qos: 1 });
    // The routes of A reach the victim before the wills are set up there.
    await waitForMetric(victim, 'cluster_routes', (v) => v >= 1);
    const ids = ['w1', 'w2', 'w3', 'w4', 'w5'];
    for (const id of ids)
      await client(victim, id, { will: { topic: `wills/${id}`, payload: Buffer.from(`gone ${id}`), qos: 1, retain: false } });
    // One client leaves cleanly first: no will for it [MQTT-3.14.4-3].
    const polite = await client(victim, 'polite', { will: { topic: 'wills/polite', payload: Buffer.from('no'), qos: 1, retain: false } });
    await new Promise<void>((resolve) => polite.end(false, {}, () => resolve()));
    await sleep(300);
    const killedAt = Date.now();
    await victim.proc.kill9();
    expect(await waitUntil(() => got.messages.length >= ids.length, 20_000, 100)).toBe(true);
    const tookMs = Date.now() - killedAt;
    await sleep(2000);
    expect(got.messages.map((m) => m.topic).sort()).toEqual(ids.map((id) => `wills/${id}`).sort());
    expect(tookMs).toBeLessThan(16_000);
    // Exactly one survivor published each will.
    const published = [a, b, c].map((n) => (n.proc.output().match(/"adopted \d+ sessions of node node-victim"/g) ?? []).length);
    expect(published.reduce((x, y) => x + y, 0)).toBeGreaterThanOrEqual(1);
  }, 60_000);
});
