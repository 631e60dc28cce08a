import { mkdtempSync, rmSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import type { IPublishPacket, MqttClient } from 'mqtt';
import { connect as natsConnect } from 'nats';
import { type ClusterNode, nodeIds, nodeMetric as metric, startClusterNode, waitForMetric } from '../support/cluster-node';
import {
  collect,
  connectAsync,
  connectCollecting,
  publish,
  sleep,
  subscribe,
  unsubscribe,
  waitUntil,
  withTimeout,
} from '../support/mqtt-helpers';
import { startNatsServer, type NatsCluster } from '../support/nats-server';
import { routeKey } from '../../core/src/cluster/routes';

/**
 * Routes and cross-node delivery over a real nats-server (docs/cluster.md § Routes, § Forwarding):
 * two broker processes, a message published on one reaches the subscribers of the other once, in
 * order, with its properties; tenants never cross; a destination that is gone fails the QoS 1
 * publisher's PUBACK (v5 0x80, v3 disconnected) instead of acknowledging it.
 */

type BrokerNode = ClusterNode;

let root: string;
let nats: NatsCluster;
let a: BrokerNode;
let b: BrokerNode;
const clients: MqttClient[] = [];

/** Each node's own storage (level): these cases are about routes, a restarted node keeps its sessions. */
const OWN_STORAGE = 'plugins:\n  storage: "@bifro/plugin-storage-level"';

function startNode(nodeId: string): Promise<BrokerNode> {
  return startClusterNode(root, nats, nodeId, { extraYaml: OWN_STORAGE });
}

async function client(node: BrokerNode, clientId: string, opts: { username?: string; protocolVersion?: 4 | 5 } = {}): Promise<MqttClient> {
  const { client: c } = await connectAsync(node.proc.port, { clientId, protocolVersion: 5, ...opts });
  clients.push(c);
  return c;
}

/** Waits until every gauge of `names` reads 1 on every node at each look for `forMs` in a row. */
async function steady(nodes: readonly BrokerNode[], names: readonly string[], forMs: number, timeoutMs: number): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  let since: number | undefined;
  while (Date.now() < deadline) {
    const values = await Promise.all(nodes.flatMap((n) => names.map((name) => metric(n, name))));
    if (values.every((v) => v === 1)) {
      since ??= Date.now();
      if (Date.now() - since >= forMs) return;
    } else since = undefined;
    await sleep(100);
  }
  throw new Error(`${names.join(', ')} not steadily 1 on every node within ${timeoutMs} ms`);
}

/** Subscribes on B and waits until A knows B's routes grew by `more`. */
async function subscribeOnB(c: MqttClient, filter: string, opts: { qos: 0 | 1 | 2; nl?: boolean }, more = 1): Promise<void> {
  const before = await metric(a, 'cluster_routes');
  await subscribe(c, filter, opts);
  await waitForMetric(a, 'cluster_routes', (v) => v >= before + more);
}

beforeAll(async () => {
  root = mkdtempSync(path.join(os.tmpdir(), 'bifro-routes-'));
  nats = await startNatsServer();
  [a, b] = await Promise.all([startNode('node-a'), startNode('node-b')]);
  const deadline = Date.now() + 8000;
  while ((await nodeIds(a)).length < 2 || (await nodeIds(b)).length < 2) {
    if (Date.now() > deadline) throw new Error('the nodes do not see each other');
    await sleep(200);
  }
}, 40_000);
afterEach(() => {
  for (const c of clients.splice(0)) c.end(true);
});
afterAll(async () => {
  await Promise.all([a?.proc.stop(), b?.proc.stop()]);
  await nats?.dispose();
  rmSync(root, { recursive: true, force: true });
});

describe('cross-node delivery (2 nodes, 1 NATS server)', () => {
  it('delivers QoS 0/1/2 published on A to a wildcard subscriber on B once each, in order, with its properties; A subscriber once too', async () => {
    const subB = await client(b, 'sub-b');
    const subA = await client(a, 'sub-a');
    const gotB = collect(subB);
    const gotA = collect(subA);
    // The order PUBLISH packets arrive in: MQTT.js emits a QoS 2 message only at its PUBREL, later.
    const arrived = (c: MqttClient): string[] => {
      const order: string[] = [];
      c.on('packetreceive', (p) => {
        if (p.cmd === 'publish') order.push(p.payload.toString());
      });
      return order;
    };
    const orderB = arrived(subB);
    const orderA = arrived(subA);
    await subscribeOnB(subB, 'fwd/+/x', { qos: 2 });
    await subscribe(subA, 'fwd/#', { qos: 2 });
    const pub = await client(a, 'pub-a');
    const sent: string[] = [];
    for (let i = 0; i < 12; i++) {
      const qos = (i % 3) as 0 | 1 | 2;
      sent.push(`m${i}`);
      await publish(pub, `fwd/${i}/x`, `m${i}`, {
        qos,
        properties:
          i === 4
            ? {
                contentType: 'text/plain',
                responseTopic: 'reply/to',
                correlationData: Buffer.from([1, 2, 3]),
                payloadFormatIndicator: true,
                messageExpiryInterval: 300,
                userProperties: { k: ['v1', 'v2'], z: 'last' },
              }
            : undefined,
      });
    }
    await gotB.waitFor(12);
    await gotA.waitFor(12);
    await sleep(300);
    expect(orderB).toEqual(sent);
    expect(orderA).toEqual(sent);
    expect([...gotB.payloads()].sort()).toEqual([...sent].sort());
    expect([...gotA.payloads()].sort()).toEqual([...sent].sort());
    const byPayload = new Map(gotB.messages.map((m) => [m.payload.toString(), m.packet]));
    expect(sent.map((p) => byPayload.get(p)!.qos)).toEqual(sent.map((_, i) => i % 3));
    const withProps = byPayload.get('m4')!.properties!;
    expect(withProps).toMatchObject({
      contentType: 'text/plain',
      responseTopic: 'reply/to',
      correlationData: Buffer.from([1, 2, 3]),
      payloadFormatIndicator: true,
      userProperties: { k: ['v1', 'v2'], z: 'last' },
    });
    expect(withProps.messageExpiryInterval).toBeGreaterThan(290);
    expect(withProps.messageExpiryInterval).toBeLessThanOrEqual(300);
    expect(await metric(a, 'cluster_forwarded_messages_total')).toBeGreaterThanOrEqual(12);
    expect(await metric(b, 'cluster_received_messages_total')).toBeGreaterThanOrEqual(12);
  }, 20_000);

  it("keeps No Local for the publisher's own subscription, and stops forwarding after the unsubscribe on B", async () => {
    // One session per client id in the cluster: the publisher's own No Local subscription is on its node.
    const other = await client(b, 'nl-other');
    const gotOther = collect(other);
    await subscribeOnB(other, 'nl/t', { qos: 1 });
    const pub = await client(a, 'nl-x');
    const gotSame = collect(pub);
    await subscribe(pub, 'nl/t', { qos: 1, nl: true });
    await publish(pub, 'nl/t', 'one', { qos: 1 });
    await gotOther.waitFor(1);
    await sleep(300);
    expect(gotOther.payloads()).toEqual(['one']);
    expect(gotSame.payloads()).toEqual([]);

    const routes = await metric(a, 'cluster_routes');
    await unsubscribe(other, 'nl/t');
    await waitForMetric(a, 'cluster_routes', (v) => v === routes - 1);
    const forwarded = await metric(a, 'cluster_forwarded_messages_total');
    await publish(pub, 'nl/t', 'two', { qos: 1 });
    await sleep(300);
    expect(await metric(a, 'cluster_forwarded_messages_total')).toBe(forwarded);
    expect(gotOther.payloads()).toEqual(['one']);
  }, 20_000);

  it("sends SUBACK once the subscription's route is in the bucket", async () => {
    const nc = await natsConnect({ servers: nats.urls[0]! });
    try {
      const kv = await nc.jetstream().views.kv('bifro_routes');
      const sub = await client(b, 'suback-after-route');
      for (const filter of ['fresh/1/#', 'fresh/2/+', 'fresh/3']) {
        await subscribe(sub, filter, { qos: 1 });
        expect((await kv.get(routeKey('node-b', 'default', filter)))?.operation).toBe('PUT');
      }
    } finally {
      await nc.close();
    }
  });

  it('never crosses tenants', async () => {
    const sub1 = await client(b, 'same', { username: 'ten1/u' });
    const sub2 = await client(b, 'same', { username: 'ten2/u' });
    const got1 = collect(sub1);
    const got2 = collect(sub2);
    await subscribeOnB(sub1, 'iso/#', { qos: 1 });
    await subscribeOnB(sub2, 'iso/#', { qos: 1 });
    const pub1 = await client(a, 'p', { username: 'ten1/p' });
    const pub2 = await client(a, 'p', { username: 'ten2/p' });
    await publish(pub1, 'iso/x', 'from-1', { qos: 1 });
    await publish(pub2, 'iso/x', 'from-2', { qos: 1 });
    await got1.waitFor(1);
    await got2.waitFor(1);
    await sleep(300);
    expect(got1.payloads()).toEqual(['from-1']);
    expect(got2.payloads()).toEqual(['from-2']);
  }, 20_000);

  it('drops a malformed frame and keeps serving', async () => {
    const nc = await natsConnect({ servers: nats.urls[0]! });
    try {
      nc.publish('bifro.fwd.node-b', Uint8Array.of(1, 0, 0, 0, 9, 1, 2, 3));
      const reply = await nc.request('bifro.fwd.node-b', Uint8Array.of(7, 7, 7), { timeout: 3000 });
      expect([...reply.data]).toEqual([1]);
    } finally {
      await nc.close();
    }
    expect(await waitUntil(() => b.proc.output().includes('dropped a malformed forwarded frame'))).toBe(true);
    const sub = await client(b, 'after-garbage');
    const got = collect(sub);
    await subscribeOnB(sub, 'still/works', { qos: 1 });
    const pub = await client(a, 'pub-g');
    await publish(pub, 'still/works', 'yes', { qos: 1 });
    expect((await got.waitFor(1)).map((m) => m.payload.toString())).toEqual(['yes']);
  }, 20_000);

  it('writes a route of B again when someone else deletes it (a node that took B for departed), so B is still reached', async () => {
    const sub = await client(b, 'heal-sub');
    const got = collect(sub);
    await subscribeOnB(sub, 'heal/#', { qos: 1 });
    const routesOnA = await metric(a, 'cluster_routes');
    const nc = await natsConnect({ servers: nats.urls[0]! });
    try {
      const kv = await nc.jetstream().views.kv('bifro_routes');
      const mine: string[] = [];
      const keys: string[] = [];
      for await (const key of await kv.keys('node-b.>')) keys.push(key);
      for (const key of keys) {
        const e = await kv.get(key);
        if (e !== null && (e.json() as { filter: string }).filter === 'heal/#') mine.push(key);
      }
      expect(mine).toHaveLength(1);
      await kv.delete(mine[0]!);
      expect(await waitUntil(() => b.proc.output().includes('route(s) of this node again: deleted by another node'), 5000)).toBe(true);
      const deadline = Date.now() + 5000;
      while ((await kv.get(mine[0]!))?.operation !== 'PUT' && Date.now() < deadline) await sleep(50);
      expect((await kv.get(mine[0]!))?.operation).toBe('PUT');
    } finally {
      await nc.close();
    }
    await waitForMetric(a, 'cluster_routes', (v) => v >= routesOnA);
    expect(await metric(b, 'cluster_routes_mended_total')).toBe(1);
    // The subscriber there, and one that subscribes afterwards, both get what A publishes.
    const late = await client(b, 'heal-late');
    const lateGot = collect(late);
    await subscribe(late, 'heal/#', { qos: 1 });
    const pub = await client(a, 'heal-pub');
    await publish(pub, 'heal/x', 'mended', { qos: 1 });
    expect((await got.waitFor(1)).map((m) => m.payload.toString())).toEqual(['mended']);
    expect((await lateGot.waitFor(1)).map((m) => m.payload.toString())).toEqual(['mended']);
  }, 20_000);

  it('fails the QoS 1 publisher when the destination is gone: v5 PUBACK 0x80, v3 disconnected without PUBACK', async () => {
    const sub = await client(b, 'doomed');
    await subscribeOnB(sub, 'doomed/#', { qos: 1 });
    const failuresBefore = await metric(a, 'cluster_forward_failures_total');
    await b.proc.kill9();
    // Within the 10 s before A drops B: its route is still in the bucket and B still in A's list.
    expect(await nodeIds(a)).toContain('node-b');

    const v5 = await client(a, 'pub-v5');
    const ack = await withTimeout(
      new Promise<{ err: (Error & { code?: number }) | undefined; packet: IPublishPacket | undefined }>((resolve) =>
        v5.publish('doomed/x', 'lost?', { qos: 1 }, (err, packet) =>
          resolve({ err: err as (Error & { code?: number }) | undefined, packet: packet as IPublishPacket | undefined }),
        ),
      ),
      7000,
      'the PUBACK',
    );
    expect(ack.err?.code).toBe(0x80);

    const v3 = await client(a, 'pub-v3', { protocolVersion: 4 });
    let acked = false;
    const closed = new Promise<void>((resolve) => v3.once('close', () => resolve()));
    v3.publish('doomed/y', 'lost?', { qos: 1 }, (err) => (acked = err === undefined || err === null));
    await withTimeout(closed, 7000, 'the v3 connection to close');
    expect(acked).toBe(false);
    expect(await metric(a, 'cluster_forward_failures_total')).toBeGreaterThanOrEqual(failuresBefore + 2);
  }, 25_000);

  it('cleans the routes of its previous run at restart, and keeps those of a persistent session, offline and restored', async () => {
    // The killed B left its route in the bucket; restarted, it deletes it once its sessions are back (its clean session is gone).
    b = await startNode('node-b');
    await waitForMetric(a, 'cluster_routes', (v) => v === 0, 10_000);
    expect(b.proc.output()).toContain("route(s) of this node it does not serve (a previous run's)");

    const persistent = { clean: false, properties: { sessionExpiryInterval: 300 } };
    const { client: sub } = await connectAsync(b.proc.port, { clientId: 'keeper', protocolVersion: 5, ...persistent });
    await subscribeOnB(sub, 'keep/#', { qos: 1 });
    sub.end(true);
    // A clean stop and start: the session is restored from B's storage, and its route written again.
    expect(await b.proc.stop()).toBe(0);
    b = await startNode('node-b');
    const deadline = Date.now() + 8000;
    while (!(await nodeIds(a)).includes('node-b')) {
      if (Date.now() > deadline) throw new Error('A does not see the restarted B');
      await sleep(100);
    }
    await waitForMetric(a, 'cluster_routes', (v) => v === 1);
    const pub = await client(a, 'pub-keep');
    await publish(pub, 'keep/it', 'queued', { qos: 1 });
    const { client: back, messages } = await connectCollecting(b.proc.port, { clientId: 'keeper', protocolVersion: 5, ...persistent });
    clients.push(back);
    expect((await messages.waitFor(1)).map((m) => m.payload.toString())).toEqual(['queued']);
  }, 40_000);

  it('refuses QoS 1/2 while its routes are unconfirmed (NATS gone and back), accepts them once its probe came back, and routes reach fresh subscribers', async () => {
    const pub = await client(a, 'unconfirmed-pub');
    const refusedBefore = await metric(a, 'cluster_unconfirmed_refused_total');
    expect(await metric(a, 'cluster_routes_confirmed')).toBe(1);
    await nats.servers[0]!.kill9();
    await waitForMetric(a, 'cluster_routes_confirmed', (v) => v === 0, 5000);
    // A topic no node subscribes to: refused all the same, the table cannot be trusted to know that.
    const ack = await withTimeout(
      new Promise<(Error & { code?: number }) | undefined>((resolve) =>
        pub.publish('nobody/here', 'refused', { qos: 1 }, (err) => resolve(err as (Error & { code?: number }) | undefined)),
      ),
      5000,
      'the PUBACK',
    );
    expect(ack?.code).toBe(0x80);
    expect(await metric(a, 'cluster_unconfirmed_refused_total')).toBe(refusedBefore + 1);
    await nats.servers[0]!.restart();
    // NATS may take longer than the lease (7 s) to come back with JetStream: then the nodes also
    // cut off their sessions and confirm their routes once more after taking the lease again.
    await steady([a, b], ['cluster_lease_held', 'cluster_routes_confirmed'], 2000, 20_000);
    expect(a.proc.output()).toMatch(/routes confirmed after \d+ ms \(the NATS connection was lost\)/);
    const fresh = await client(b, 'after-heal');
    const got = collect(fresh);
    await subscribeOnB(fresh, 'healed/#', { qos: 1 });
    await publish(await client(a, 'after-heal-pub'), 'healed/x', 'after', { qos: 1 });
    expect((await got.waitFor(1)).map((m) => m.payload.toString())).toEqual(['after']);
  }, 40_000);
});
