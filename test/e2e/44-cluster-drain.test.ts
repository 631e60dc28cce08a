import { mkdtempSync, rmSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import type { IClientOptions, IConnackPacket, MqttClient } from 'mqtt';
import { API_TOKENS, startApiBroker } from '../support/api-broker';
import { nodeMetric, startClusterNode, waitForNodes, type ClusterNode } from '../support/cluster-node';
import { collect, disconnectOf, publishAcked, rawConnect, subscribe, tryConnect } from '../support/mqtt-helpers';
import { startNatsServer, type NatsCluster } from '../support/nats-server';

/**
 * Draining a node before its removal (docs/cluster.md § Drain and removal) over a real
 * nats-server and three broker processes: the drained node's v5 clients are sent to another node
 * with DISCONNECT 0x9C and its Server Reference, v3 clients closed, new CONNECTs refused the same
 * way; a persistent subscriber moved off keeps getting every acknowledged message, also once
 * the drained node stopped.
 */

let root: string;
let nats: NatsCluster;
let a: ClusterNode;
let b: ClusterNode;
let c: ClusterNode;
const clients: MqttClient[] = [];

interface Answer {
  status: number;
  body: Record<string, unknown>;
}

async function api(node: ClusterNode, method: string, route: string, opts: { token?: string; body?: unknown } = {}): Promise<Answer> {
  const res = await fetch(`${node.apiUrl}${route}`, {
    method,
    headers: {
      authorization: `Bearer ${opts.token ?? API_TOKENS.admin}`,
      ...(opts.body === undefined ? {} : { 'content-type': 'application/json' }),
    },
    body: opts.body === undefined ? undefined : JSON.stringify(opts.body),
  });
  return { status: res.status, body: (await res.json()) as Record<string, unknown> };
}

interface NodeEntry {
  id: string;
  listeners: string[];
  draining: boolean;
}

async function nodesOf(node: ClusterNode): Promise<NodeEntry[]> {
  return (await api(node, 'GET', '/api/v1/nodes')).body.nodes as NodeEntry[];
}

/** Polls until `node` lists `id` as draining (or not): heartbeats carry the flag. */
async function waitForDraining(node: ClusterNode, id: string, draining: boolean): Promise<void> {
  const deadline = Date.now() + 8000;
  while (Date.now() < deadline) {
    if ((await nodesOf(node)).some((n) => n.id === id && n.draining === draining)) return;
    await new Promise((resolve) => setTimeout(resolve, 100));
  }
  throw new Error(`${node.nodeId} does not list ${id} with draining ${draining}`);
}

/** A v5 client (unless `opts` says otherwise); `early` sees it before the CONNACK is read (queued messages follow it at once). */
async function client(
  node: ClusterNode | number,
  clientId: string,
  opts: IClientOptions = {},
  early?: (m: MqttClient) => void,
): Promise<{ client: MqttClient; connack: IConnackPacket }> {
  const port = typeof node === 'number' ? node : node.proc.port;
  const r = await tryConnect(port, { clientId, protocolVersion: 5, reconnectPeriod: 0, ...opts }, early);
  clients.push(r.client);
  if (r.connack === undefined) throw r.error ?? new Error('no CONNACK');
  return { client: r.client, connack: r.connack };
}

beforeAll(async () => {
  root = mkdtempSync(path.join(os.tmpdir(), 'bifro-drain-'));
  nats = await startNatsServer();
  // One after the other: the first creates the cluster's streams and buckets.
  a = await startClusterNode(root, nats, 'node-a');
  b = await startClusterNode(root, nats, 'node-b');
  c = await startClusterNode(root, nats, 'node-c');
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

describe('who may drain', () => {
  it('refuses a tenant token (403), a wrong token (401), and a standalone broker (409)', async () => {
    const standalone = await startApiBroker();
    try {
      const tenant = await standalone.inject({ method: 'POST', url: '/api/v1/nodes/self/drain', token: API_TOKENS.t1 });
      expect(tenant.statusCode).toBe(403);
      const alone = await standalone.inject({ method: 'POST', url: '/api/v1/nodes/self/drain' });
      expect(alone.statusCode).toBe(409);
      expect(alone.json()).toMatchObject({ code: 'BIFRO_API_CONFLICT', message: expect.stringMatching(/standalone/) });
      const nodes = (await standalone.inject({ method: 'GET', url: '/api/v1/nodes' })).json() as { nodes: NodeEntry[] };
      expect(nodes.nodes[0]!.draining).toBe(false);
    } finally {
      await standalone.stop();
    }
    expect((await api(c, 'POST', '/api/v1/nodes/self/drain', { token: 'not-a-token' })).status).toBe(401);
    // An unknown node does not exist; a bad rate is a bad request.
    expect((await api(c, 'POST', '/api/v1/nodes/node-x/drain')).status).toBe(404);
    expect((await api(c, 'POST', '/api/v1/nodes/self/drain', { body: { rate: 0 } })).status).toBe(400);
    expect(await nodeMetric(c, 'cluster_draining')).toBe(0);
  }, 30_000);
});

describe('drain, then stop', () => {
  it("moves a node's clients to the others and keeps every acknowledged message of a persistent subscriber", async () => {
    const listeners = new Map((await nodesOf(c)).map((n) => [n.id, n.listeners[0]!]));
    const others = [listeners.get('node-a'), listeners.get('node-b')];
    const { client: v5 } = await client(c, 'drain-v5');
    const { client: v4 } = await client(c, 'drain-v4', { protocolVersion: 4 });
    const { client: keeper } = await client(c, 'drain-keeper', { clean: false, properties: { sessionExpiryInterval: 300 } });
    await subscribe(keeper, 'drain/t', { qos: 1 });
    const { client: publisher } = await client(a, 'drain-publisher');
    const crowd = await Promise.all(Array.from({ length: 20 }, (_, i) => client(c, `drain-crowd-${i}`)));
    const crowdGone = crowd.map(async ({ client: m }) => ({ packet: await disconnectOf(m), at: Date.now() }));
    const gone = [disconnectOf(v5), disconnectOf(v4), disconnectOf(keeper)];

    // 20 a second: 2 clients every 100 ms.
    const drained = await api(c, 'POST', '/api/v1/nodes/node-c/drain', { body: { rate: 20 } });
    expect(drained).toMatchObject({ status: 200, body: { id: 'node-c', draining: true, rate: 20 } });
    const [v5Gone, v4Gone, keeperGone] = await Promise.all(gone);
    expect(v5Gone?.reasonCode).toBe(0x9c);
    expect(others).toContain(v5Gone?.properties?.serverReference);
    expect(v4Gone).toBeUndefined();
    expect(keeperGone?.reasonCode).toBe(0x9c);
    // Spread over time at the rate asked, and over both other nodes by their load.
    const crowdAnswers = await Promise.all(crowdGone);
    const times = crowdAnswers.map((g) => g.at);
    expect(Math.max(...times) - Math.min(...times)).toBeGreaterThanOrEqual(800);
    const references = new Set(crowdAnswers.map((g) => g.packet?.properties?.serverReference));
    expect([...references].sort()).toEqual([...others].sort());

    // A new CONNECT is refused the same way: v5 0x9C with a reference, v3 return code 3.
    const refused = await rawConnect(c.proc.port, { clientId: 'drain-late', protocolVersion: 5 });
    expect(refused.connack.reasonCode).toBe(0x9c);
    expect(others).toContain(refused.connack.properties?.serverReference);
    refused.raw.destroy();
    const refused3 = await rawConnect(c.proc.port, { clientId: 'drain-late-3', protocolVersion: 4 });
    expect(refused3.connack.returnCode).toBe(3);
    refused3.raw.destroy();
    await waitForDraining(a, 'node-c', true);
    expect(await nodeMetric(c, 'cluster_draining')).toBe(1);
    expect(await nodeMetric(c, 'cluster_drain_redirects_total')).toBeGreaterThanOrEqual(5);

    // Acknowledged while the persistent subscriber is between two nodes: queued in its inbox.
    for (let i = 0; i < 5; i++) await publishAcked(publisher, 'drain/t', `offline${i}`);
    // It goes where it was sent. With storage the nodes share, its session (subscription, inbox)
    // moves with it; storage that is not shared (each node's own) moves it empty (Session Present
    // 0), so it subscribes again, and what queued on the drained node stays there.
    const [host, port] = keeperGone!.properties!.serverReference!.split(':');
    expect(host).toBe('127.0.0.1');
    let got: ReturnType<typeof collect> | undefined;
    const moved = await client(Number(port), 'drain-keeper', { clean: false, properties: { sessionExpiryInterval: 300 } }, (m) => {
      got = collect(m);
    });
    const shared = moved.connack.sessionPresent;
    // The cluster's default storage is shared: the session moved with its inbox.
    expect(shared).toBe(true);
    if (!shared) await subscribe(moved.client, 'drain/t', { qos: 1 });
    const target = port === a.proc.port.toString() ? a : b;
    // Every message the publisher got a PUBACK for arrives: during the drain, and after C stopped.
    for (let i = 0; i < 20; i++) await publishAcked(publisher, 'drain/t', `m${i}`);
    expect((await got!.waitFor(shared ? 25 : 20, 8000)).length).toBeGreaterThanOrEqual(shared ? 25 : 20);

    expect(await c.proc.stop()).toBe(0);
    await waitForNodes([a, b], 2);
    for (let i = 20; i < 40; i++) await publishAcked(publisher, 'drain/t', `m${i}`);
    const all = await got!.waitFor(shared ? 45 : 40, 8000);
    const expected = [
      ...Array.from({ length: 40 }, (_, i) => `m${i}`),
      ...(shared ? Array.from({ length: 5 }, (_, i) => `offline${i}`) : []),
    ];
    expect(new Set(all.map((m) => m.payload.toString()))).toEqual(new Set(expected));
    expect(c.proc.output()).toMatch(/draining this node/);
    expect(a.proc.output() + b.proc.output()).not.toMatch(/"level":50/);
    expect(target.proc.output()).not.toMatch(/"level":50/);
  }, 45_000);

  it('drains another node through this one, refuses to drain the last node that is not draining, and ends a drain', async () => {
    // Asked of A, relayed to B over NATS: B answers for itself.
    expect(await api(a, 'POST', '/api/v1/nodes/node-b/drain')).toMatchObject({
      status: 200,
      body: { id: 'node-b', draining: true, rate: 500 },
    });
    await waitForDraining(a, 'node-b', true);
    const last = await api(a, 'POST', '/api/v1/nodes/self/drain');
    expect(last).toMatchObject({ status: 409, body: { code: 'BIFRO_API_CONFLICT', message: expect.stringMatching(/no other live node/) } });
    // B refuses a relayed drain of A the same way.
    const relayed = await api(b, 'POST', '/api/v1/nodes/node-a/drain');
    expect(relayed).toMatchObject({ status: 409, body: { message: expect.stringMatching(/^node node-a: no other live node/) } });
    expect(await api(a, 'DELETE', '/api/v1/nodes/node-b/drain')).toMatchObject({ status: 200, body: { id: 'node-b', draining: false } });
    await waitForDraining(a, 'node-b', false);
    // B takes clients again.
    const { connack } = await client(b, 'drain-back');
    expect(connack.reasonCode ?? 0).toBe(0);
  }, 30_000);
});
