import { mkdtempSync, rmSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import type { IPublishPacket, MqttClient } from 'mqtt';
import { type ClusterNode, nodeIds, nodeMetric as metric, startClusterNode, waitForMetric } from '../support/cluster-node';
import { connectAsync, publish, sleep, subscribe, unsubscribe, waitUntil } from '../support/mqtt-helpers';
import { startNatsServer, type NatsCluster } from '../support/nats-server';

/**
 * Shared subscriptions across nodes over a real nats-server (docs/cluster.md § Shared
 * subscriptions): three broker processes; a `$share` or `$oshare` group with members on several
 * nodes gets each message once, on one node, picked by the publishing node; `$oshare` keeps each
 * publisher's order; tenants never cross; a node's other groups and plain subscribers are unaffected.
 */

type BrokerNode = ClusterNode;

let root: string;
let nats: NatsCluster;
let a: BrokerNode;
let b: BrokerNode;
let c: BrokerNode;
const clients: MqttClient[] = [];

function startNode(nodeId: string): Promise<BrokerNode> {
  return startClusterNode(root, nats, nodeId);
}

/** Waits until `node` knows exactly `n` routes of the other nodes (they travel through the bucket's watch). */
async function routesAre(node: BrokerNode, n: number): Promise<void> {
  await waitForMetric(node, 'cluster_routes', (v) => v === n);
}

async function client(node: BrokerNode, clientId: string, username?: string): Promise<MqttClient> {
  const { client: m } = await connectAsync(node.proc.port, { clientId, protocolVersion: 5, username });
  clients.push(m);
  return m;
}

/** One arrival at a member: who got it, and the PUBLISH as it came. */
interface Arrival {
  readonly member: string;
  readonly payload: string;
  readonly packet: IPublishPacket;
}

/** A connected member that records what it gets (MQTT.js emits a QoS 2 message at its PUBREL). */
async function member(
  node: BrokerNode,
  clientId: string,
  filter: string,
  into: Arrival[],
  qos: 1 | 2 = 2,
  username?: string,
): Promise<MqttClient> {
  const m = await client(node, clientId, username);
  m.on('message', (_topic, payload, packet) => into.push({ member: clientId, payload: payload.toString(), packet }));
  await subscribe(m, filter, { qos });
  return m;
}

/** Publishes `n` messages `<prefix>-<i>` without waiting between them (one connection keeps them in order), then waits for every acknowledgement. */
async function burst(pub: MqttClient, topic: string, prefix: string, n: number, qos: 1 | 2): Promise<string[]> {
  const sent = Array.from({ length: n }, (_, i) => `${prefix}-${i}`);
  await Promise.all(sent.map((p) => publish(pub, topic, p, { qos }, 8000)));
  return sent;
}

const countBy = (arrivals: readonly Arrival[], key: (a: Arrival) => string): Map<string, number> => {
  const out = new Map<string, number>();
  for (const x of arrivals) out.set(key(x), (out.get(key(x)) ?? 0) + 1);
  return out;
};

beforeAll(async () => {
  root = mkdtempSync(path.join(os.tmpdir(), 'bifro-shared-'));
  nats = await startNatsServer();
  [a, b, c] = await Promise.all([startNode('node-a'), startNode('node-b'), startNode('node-c')]);
  const deadline = Date.now() + 10_000;
  for (const n of [a, b, c])
    while ((await nodeIds(n)).length < 3) {
      if (Date.now() > deadline) throw new Error('the nodes do not see each other');
      await sleep(200);
    }
}, 45_000);
afterEach(async () => {
  for (const m of clients.splice(0)) m.end(true);
  // Every session was clean: once they are gone, no node has routes left.
  await Promise.all([a, b, c].map((n) => routesAre(n, 0)));
}, 15_000);
afterAll(async () => {
  await Promise.all([a?.proc.stop(), b?.proc.stop(), c?.proc.stop()]);
  await nats?.dispose();
  rmSync(root, { recursive: true, force: true });
});

describe('shared subscriptions across nodes (3 nodes, 1 NATS server)', () => {
  it('$share with members on A and B: every QoS 1 and 2 message once across the group, from publishers on A and C, and both nodes serve some', async () => {
    const got: Arrival[] = [];
    await member(a, 'sa1', '$share/g1/sh/+', got);
    await member(a, 'sa2', '$share/g1/sh/+', got);
    await member(b, 'sb1', '$share/g1/sh/+', got);
    // C knows the group on A and on B, A knows it on B.
    await routesAre(c, 2);
    await routesAre(a, 1);
    const pubA = await client(a, 'pub-a');
    const pubC = await client(c, 'pub-c');
    const sent = [
      ...(await burst(pubA, 'sh/1', 'a1', 30, 1)),
      ...(await burst(pubA, 'sh/2', 'a2', 30, 2)),
      ...(await burst(pubC, 'sh/1', 'c1', 30, 1)),
      ...(await burst(pubC, 'sh/2', 'c2', 30, 2)),
    ];
    expect(await waitUntil(() => new Set(got.map((x) => x.payload)).size >= sent.length, 8000)).toBe(true);
    await sleep(300);
    // No loss; QoS 2 never twice; a second QoS 1 copy would only be a resend (DUP).
    expect([...new Set(got.map((x) => x.payload))].sort()).toEqual([...sent].sort());
    const copies = countBy(got, (x) => x.payload);
    for (const [payload, n] of copies) {
      if (payload.startsWith('a2') || payload.startsWith('c2')) expect(`${payload}×${n}`).toBe(`${payload}×1`);
      else if (n > 1) expect(got.filter((x) => x.payload === payload && x.packet.dup).length).toBeGreaterThan(0);
    }
    const byMember = countBy(got, (x) => x.member);
    expect((byMember.get('sa1') ?? 0) + (byMember.get('sa2') ?? 0)).toBeGreaterThan(0);
    expect(byMember.get('sb1') ?? 0).toBeGreaterThan(0);
  }, 30_000);

  it('$oshare with members on A and B, publishers on C: each message once, each publisher in order at one member, only the picked node gets a copy', async () => {
    const got: Arrival[] = [];
    await member(a, 'oa', '$oshare/g2/os/#', got, 1);
    await member(b, 'ob', '$oshare/g2/os/#', got, 1);
    await routesAre(c, 2);
    const receivedBefore = (await metric(a, 'cluster_received_messages_total')) + (await metric(b, 'cluster_received_messages_total'));
    const pubs = await Promise.all(Array.from({ length: 6 }, (_, i) => client(c, `opub-${i}`)));
    const sent = (await Promise.all(pubs.map((p, i) => burst(p, `os/${i}`, `p${i}`, 25, 1)))).flat();
    expect(await waitUntil(() => got.length >= sent.length, 8000)).toBe(true);
    await sleep(300);
    expect(got.map((x) => x.payload).sort()).toEqual([...sent].sort());
    for (let i = 0; i < pubs.length; i++) {
      const mine = got.filter((x) => x.payload.startsWith(`p${i}-`));
      // One member for one publisher and topic while membership is unchanged, in publish order.
      expect(new Set(mine.map((x) => x.member)).size).toBe(1);
      expect(mine.map((x) => x.payload)).toEqual(Array.from({ length: 25 }, (_, k) => `p${i}-${k}`));
    }
    expect(new Set(got.map((x) => x.member))).toEqual(new Set(['oa', 'ob']));
    // One forwarded copy per message: none went to the node not picked.
    const receivedAfter = (await metric(a, 'cluster_received_messages_total')) + (await metric(b, 'cluster_received_messages_total'));
    expect(receivedAfter - receivedBefore).toBe(sent.length);
  }, 30_000);

  it('moves delivery to the other nodes when the members of one node leave', async () => {
    const got: Arrival[] = [];
    await member(a, 'ma', '$share/g3/mv/#', got, 1);
    const mb = await member(b, 'mb', '$share/g3/mv/#', got, 1);
    const oa = await member(a, 'moa', '$oshare/g3/mv/#', got, 1);
    await member(b, 'mob', '$oshare/g3/mv/#', got, 1);
    await routesAre(c, 4);
    const pubs = await Promise.all(Array.from({ length: 4 }, (_, i) => client(c, `mpub-${i}`)));
    const first = (await Promise.all(pubs.map((p, i) => burst(p, `mv/${i}`, `x${i}`, 6, 1)))).flat();
    expect(await waitUntil(() => got.length >= 2 * first.length, 8000)).toBe(true);
    expect(countBy(got, (x) => x.member).get('mb')).toBeGreaterThan(0);
    // The $share member on B and the $oshare member on A leave: each group is served by the node left.
    await unsubscribe(mb, '$share/g3/mv/#');
    await unsubscribe(oa, '$oshare/g3/mv/#');
    await routesAre(c, 2);
    got.length = 0;
    const second = (await Promise.all(pubs.map((p, i) => burst(p, `mv/${i}`, `y${i}`, 6, 1)))).flat();
    expect(await waitUntil(() => got.length >= 2 * second.length, 8000)).toBe(true);
    await sleep(300);
    const byMember = countBy(got, (x) => x.member);
    expect(Object.fromEntries(byMember)).toEqual({ ma: second.length, mob: second.length });
  }, 30_000);

  it("never crosses tenants: two tenants' groups of one name each get their own tenant's messages", async () => {
    const one: Arrival[] = [];
    const two: Arrival[] = [];
    // A client id is one session cluster-wide: the same id in the other tenant only.
    await member(a, 'iso-a', '$share/g/iso/#', one, 1, 'ten1/u');
    await member(b, 'iso-b', '$share/g/iso/#', one, 1, 'ten1/u');
    await member(b, 'iso-b', '$share/g/iso/#', two, 1, 'ten2/u');
    await routesAre(c, 3);
    const pub1 = await client(c, 'p', 'ten1/p');
    const pub2 = await client(c, 'p', 'ten2/p');
    const sent1 = await burst(pub1, 'iso/x', 'one', 10, 1);
    const sent2 = await burst(pub2, 'iso/x', 'two', 10, 1);
    expect(await waitUntil(() => one.length >= 10 && two.length >= 10, 8000)).toBe(true);
    await sleep(300);
    expect(one.map((x) => x.payload).sort()).toEqual([...sent1].sort());
    expect(two.map((x) => x.payload).sort()).toEqual([...sent2].sort());
  }, 30_000);

  it('gives a node with plain subscribers and members of a group assigned elsewhere only the plain copy', async () => {
    const group: Arrival[] = [];
    const plain: Arrival[] = [];
    await member(a, 'xa', '$share/g5/mix/#', group, 1);
    await member(b, 'xb', '$share/g5/mix/#', group, 1);
    await member(b, 'plain-b', 'mix/#', plain, 1);
    await routesAre(c, 3);
    const pub = await client(c, 'xpub');
    const sent = await burst(pub, 'mix/t', 'm', 20, 1);
    expect(await waitUntil(() => plain.length >= 20 && group.length >= 20, 8000)).toBe(true);
    await sleep(300);
    expect(plain.map((x) => x.payload)).toEqual(sent);
    // Once across the group: B serves its member only for the messages C assigned to B.
    expect(group.map((x) => x.payload).sort()).toEqual([...sent].sort());
    const byMember = countBy(group, (x) => x.member);
    expect(byMember.get('xa')).toBeGreaterThan(0);
    expect(byMember.get('xb')).toBeGreaterThan(0);
  }, 30_000);
});
