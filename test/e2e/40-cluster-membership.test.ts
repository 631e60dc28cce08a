import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { connect as natsConnect } from 'nats';
import { tokenHash } from '../../core/src/api/api-auth';
import { startApiBroker, API_TOKENS } from '../support/api-broker';
import { startBrokerProcess, type BrokerProcess } from '../support/broker-process';
import { connectAsync, publish, subscribe, waitForMessages } from '../support/mqtt-helpers';
import { startNatsCluster, startNatsServer, type NatsCluster } from '../support/nats-server';
import { freePort } from '../support/server-processes';

/**
 * Cluster membership over real nats-server processes (docs/cluster.md): broker processes see each
 * other in GET /api/v1/nodes, a killed node is dropped once its heartbeats stop (10 s), a stopped
 * one at once; a broker whose NATS is unreachable still serves MQTT; bad `cluster` keys are named.
 */

interface NodeBody {
  id: string;
  self: boolean;
  listeners: string[];
  version: string;
  load: { connections: number; sessions: number; msgInPerSec: number; msgOutPerSec: number };
  lastSeen: string;
}
interface NodesBody {
  cluster: boolean;
  connected: boolean;
  nodes: NodeBody[];
}

/** A broker process with the admin API (its address read from its log). */
interface BrokerNode {
  readonly proc: BrokerProcess;
  readonly apiUrl: string;
}

let root: string;
let counter = 0;
const started: BrokerProcess[] = [];

function clusterYaml(servers: readonly string[], extra = ''): string {
  return ['cluster:', `  servers: [${servers.map((s) => JSON.stringify(s)).join(', ')}]`, ...(extra === '' ? [] : [extra])].join('\n');
}

function writeConfig(yaml: string): string {
  const dir = path.join(root, `b${++counter}`);
  const file = `${dir}.yml`;
  writeFileSync(
    file,
    [
      `dataDir: ${JSON.stringify(dir)}`,
      'sysInterval: 0',
      'api:',
      '  host: 127.0.0.1',
      '  port: 0',
      `  tokens: [{ name: admin, hash: "${tokenHash(API_TOKENS.admin)}" }, { name: t1-ops, hash: "${tokenHash(API_TOKENS.t1)}", tenant: t1 }]`,
      yaml,
      '',
    ].join('\n'),
  );
  return file;
}

async function startNode(yaml: string): Promise<BrokerNode> {
  const proc = await startBrokerProcess(writeConfig(yaml));
  started.push(proc);
  const line = proc
    .output()
    .split('\n')
    .find((l) => l.includes('"admin API listening'));
  const apiUrl = line === undefined ? undefined : (JSON.parse(line) as { api?: string }).api;
  if (apiUrl === undefined) throw new Error(`no admin API address in the output:\n${proc.output()}`);
  return { proc, apiUrl };
}

async function get(node: BrokerNode, route: string, token: string = API_TOKENS.admin): Promise<{ status: number; text: string }> {
  const res = await fetch(`${node.apiUrl}${route}`, { headers: { authorization: `Bearer ${token}` } });
  return { status: res.status, text: await res.text() };
}

async function nodesOf(node: BrokerNode): Promise<NodesBody> {
  const res = await get(node, '/api/v1/nodes');
  if (res.status !== 200) throw new Error(`GET /api/v1/nodes: ${res.status} ${res.text}`);
  return JSON.parse(res.text) as NodesBody;
}

/** Polls `node`'s list until `ok` holds; resolves with the list, rejects after `timeoutMs` with the last one. */
async function waitForNodes(node: BrokerNode, ok: (ids: string[]) => boolean, timeoutMs: number): Promise<NodesBody> {
  const deadline = Date.now() + timeoutMs;
  let last: NodesBody | undefined;
  for (;;) {
    last = await nodesOf(node);
    if (ok(last.nodes.map((n) => n.id))) return last;
    if (Date.now() > deadline) throw new Error(`node list not as expected after ${timeoutMs} ms: ${JSON.stringify(last)}`);
    await new Promise((resolve) => setTimeout(resolve, 200));
  }
}

const selfId = (body: NodesBody): string => body.nodes.find((n) => n.self)!.id;

beforeAll(() => {
  root = mkdtempSync(path.join(os.tmpdir(), 'bifro-cluster-'));
});
afterAll(async () => {
  await Promise.all(started.map((p) => p.stop()));
  rmSync(root, { recursive: true, force: true });
});

describe('cluster membership on one NATS server (replicas 1)', () => {
  let nats: NatsCluster;
  let a: BrokerNode;
  let b: BrokerNode;
  beforeAll(async () => {
    nats = await startNatsServer();
    [a, b] = await Promise.all([
      startNode(clusterYaml(nats.urls, '  nodeId: node-a\n  replicas: 1')),
      startNode(clusterYaml(nats.urls, '  replicas: 1')),
    ]);
  }, 40_000);
  afterAll(async () => {
    await Promise.all([a.proc.stop(), b.proc.stop()]);
    await nats.dispose();
  });

  it('lists both nodes on each, with listeners, load and the self flag; the default id ends with the listener port', async () => {
    const fromA = await waitForNodes(a, (ids) => ids.length === 2, 8000);
    const fromB = await waitForNodes(b, (ids) => ids.length === 2, 8000);
    expect(fromA).toMatchObject({ cluster: true, connected: true });
    expect(selfId(fromA)).toBe('node-a');
    const bId = selfId(fromB);
    expect(bId).toMatch(new RegExp(`^[A-Za-z0-9_-]+-${b.proc.port}$`));
    expect(fromA.nodes.map((n) => n.id)).toEqual(['node-a', bId]);
    expect(fromB.nodes.map((n) => n.id)).toEqual([bId, 'node-a']);
    const bSeenByA = fromA.nodes.find((n) => n.id === bId)!;
    expect(bSeenByA).toMatchObject({
      self: false,
      listeners: [`127.0.0.1:${b.proc.port}`],
      version: expect.any(String),
      load: { connections: expect.any(Number), sessions: expect.any(Number), msgInPerSec: expect.any(Number) },
    });
    expect(Number.isNaN(Date.parse(bSeenByA.lastSeen))).toBe(false);
    expect(a.proc.output()).toContain(`node joined: ${bId}`);
  }, 20_000);

  it('carries each node load in its heartbeat', async () => {
    const { client } = await connectAsync(b.proc.port, {
      clientId: 'load-1',
      clean: false,
      properties: { sessionExpiryInterval: 60 },
      protocolVersion: 5,
    });
    try {
      const bId = (await nodesOf(a)).nodes.find((n) => !n.self)!.id;
      const deadline = Date.now() + 8000;
      let seen: NodeBody | undefined;
      while (Date.now() < deadline) {
        seen = (await nodesOf(a)).nodes.find((n) => n.id === bId);
        if (seen !== undefined && seen.load.connections === 1 && seen.load.sessions === 1) break;
        await new Promise((resolve) => setTimeout(resolve, 200));
      }
      expect(seen?.load).toMatchObject({ connections: 1, sessions: 1 });
    } finally {
      client.end(true);
    }
  }, 15_000);

  it('refuses a tenant token and serves the cluster metrics', async () => {
    expect((await get(a, '/api/v1/nodes', API_TOKENS.t1)).status).toBe(403);
    const metrics = await get(a, '/metrics');
    expect(metrics.text).toMatch(/^bifro_cluster_nodes 2$/m);
    expect(metrics.text).toMatch(/^bifro_cluster_up 1$/m);
  });

  it('a NATS restart with 9 s of outage makes no node declare another dead', async () => {
    await waitForNodes(a, (ids) => ids.length === 2, 8000);
    const bId = selfId(await nodesOf(b));
    const server = nats.servers[0]!;
    const [aLog, bLog] = [a.proc.output().length, b.proc.output().length];
    await server.kill9();
    // Longer than the 10 s of silence that makes a node dead, counted from the last heartbeat seen.
    await new Promise((r) => setTimeout(r, 9000));
    await server.restart();
    // Each node counts the others' silence only from its own first heartbeat NATS accepted again.
    await new Promise((r) => setTimeout(r, 12_000));
    expect(a.proc.output().slice(aLog)).not.toContain('node left');
    expect(b.proc.output().slice(bLog)).not.toContain('node left');
    await waitForNodes(a, (ids) => ids.join() === `node-a,${bId}`, 5000);
    await waitForNodes(b, (ids) => ids.join() === `${bId},node-a`, 5000);
    // a still hears b: b's heartbeat carries a new connection to a's list (a watch that did not survive the restart is started again).
    const { client } = await connectAsync(b.proc.port, { clientId: 'after-nats-restart' });
    try {
      const deadline = Date.now() + 8000;
      let seen: NodeBody | undefined;
      while (Date.now() < deadline) {
        seen = (await nodesOf(a)).nodes.find((n) => n.id === bId);
        if (seen?.load.connections === 1) break;
        await new Promise((resolve) => setTimeout(resolve, 200));
      }
      expect(seen?.load.connections).toBe(1);
    } finally {
      client.end(true);
    }
  }, 55_000);

  it('drops a node killed with SIGKILL once its heartbeats stop, and a cleanly stopped one at once', async () => {
    const c = await startNode(clusterYaml(nats.urls, '  nodeId: node-c\n  replicas: 1'));
    const d = await startNode(clusterYaml(nats.urls, '  nodeId: node-d\n  replicas: 1'));
    await waitForNodes(a, (ids) => ids.includes('node-c') && ids.includes('node-d'), 8000);
    await c.proc.kill9();
    // Heartbeats every 2 s, dead after 10 s without one, swept every second.
    await waitForNodes(a, (ids) => !ids.includes('node-c'), 13_000);
    expect(a.proc.output()).toMatch(/node left: node-c \(no heartbeat/);
    expect((await nodesOf(a)).nodes.map((n) => n.id)).toContain('node-d');
    expect(await d.proc.stop()).toBe(0);
    // The stopped node deleted its key: gone well before any heartbeat could age out.
    await waitForNodes(a, (ids) => !ids.includes('node-d'), 3000);
    expect(a.proc.output()).toContain('node left: node-d (stopped)');
  }, 40_000);
});

describe('cluster membership on three NATS servers (replicas 3)', () => {
  let nats: NatsCluster;
  afterAll(() => nats?.dispose());

  it('creates the bucket with three replicas and the nodes see each other', async () => {
    nats = await startNatsCluster(3);
    // Each node dials a different server of the NATS cluster.
    const [x, y] = await Promise.all([
      startNode(clusterYaml([nats.urls[0]!], '  nodeId: node-x')),
      startNode(clusterYaml([nats.urls[2]!], '  nodeId: node-y')),
    ]);
    try {
      await waitForNodes(x, (ids) => ids.join() === 'node-x,node-y', 15_000);
      await waitForNodes(y, (ids) => ids.join() === 'node-y,node-x', 5000);
      const nc = await natsConnect({ servers: nats.urls[1]! });
      try {
        const info = await (await nc.jetstreamManager()).streams.info('KV_bifro_nodes');
        expect(info.config.num_replicas).toBe(3);
        expect(info.config.max_age).toBe(10_000 * 1_000_000);
      } finally {
        await nc.close();
      }
    } finally {
      await Promise.all([x.proc.stop(), y.proc.stop()]);
    }
  }, 45_000);
});

describe('cluster mode without NATS', () => {
  it('with its own storage, starts, serves MQTT and keeps retrying while NATS is unreachable', async () => {
    const nowhere = `nats://127.0.0.1:${await freePort()}`;
    const ownStorage = 'plugins:\n  storage: "@bifro/plugin-storage-level"';
    const n = await startNode(`${clusterYaml([nowhere], '  nodeId: lonely\n  replicas: 1')}\n${ownStorage}`);
    try {
      const { client: sub } = await connectAsync(n.proc.port, { clientId: 'sub' });
      const { client: pub } = await connectAsync(n.proc.port, { clientId: 'pub' });
      try {
        await subscribe(sub, 'alone/#', { qos: 1 });
        const received = waitForMessages(sub, 1);
        await publish(pub, 'alone/x', 'still here', { qos: 1 });
        expect((await received)[0]).toMatchObject({ topic: 'alone/x' });
        expect((await received)[0]!.payload.toString()).toBe('still here');
      } finally {
        sub.end(true);
        pub.end(true);
      }
      expect(await nodesOf(n)).toMatchObject({ cluster: true, connected: false, nodes: [{ id: 'lonely', self: true }] });
      expect((await get(n, '/metrics')).text).toMatch(/^bifro_cluster_up 0$/m);
      expect(n.proc.output()).toContain('NATS not reachable');
    } finally {
      expect(await n.proc.stop()).toBe(0);
    }
  }, 20_000);
});

describe('cluster mode with its default storage and no NATS', () => {
  it('refuses to start, naming the storage and the servers it could not reach', async () => {
    const nowhere = `nats://127.0.0.1:${await freePort()}`;
    // The storage the nodes share is on NATS: without it there is nowhere to keep a session.
    await expect(startBrokerProcess(writeConfig(clusterYaml([nowhere], '  nodeId: cut-off\n  replicas: 1')))).rejects.toThrow(
      /BIFRO_STORAGE_NATS_UNREACHABLE[\s\S]*127\.0\.0\.1/,
    );
  }, 30_000);
});

describe('cluster configuration', () => {
  it('refuses a server that is not a NATS URL, naming the key', async () => {
    await expect(startBrokerProcess(writeConfig(clusterYaml(['http://127.0.0.1:4222'])))).rejects.toThrow(
      /BIFRO_CONFIG_CLUSTER_SERVER.*cluster\.servers\[0\]/,
    );
  });
});

describe('standalone', () => {
  it('answers GET /api/v1/nodes with this broker alone', async () => {
    const b = await startApiBroker('nodeId: solo');
    try {
      const res = await b.inject({ method: 'GET', url: '/api/v1/nodes' });
      expect(res.statusCode).toBe(200);
      expect(res.json()).toMatchObject({
        cluster: false,
        connected: false,
        nodes: [{ id: 'solo', self: true, listeners: [`127.0.0.1:${b.port}`], load: { connections: 0, sessions: 0 } }],
      });
      const metrics = (await b.inject({ method: 'GET', url: '/metrics' })).body;
      expect(metrics).toMatch(/^bifro_cluster_nodes 1$/m);
      expect(metrics).toMatch(/^bifro_cluster_up 0$/m);
    } finally {
      await b.stop();
    }
  });
});
