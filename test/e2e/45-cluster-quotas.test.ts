import { mkdtempSync, rmSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import mqtt, { type MqttClient } from 'mqtt';
import { API_TOKENS } from '../support/api-broker';
import { startClusterNode, waitForNodes, type ClusterNode } from '../support/cluster-node';
import { sleep } from '../support/mqtt-helpers';
import { startNatsServer, type NatsCluster } from '../support/nats-server';
import { REPO } from '../support/test-broker';

/**
 * Tenant quotas across nodes (docs/cluster.md § Quotas across nodes), over a real nats-server and
 * two broker processes: a tenant's connections on one node count against its quota on the other
 * once the usage has travelled through the `bifro_usage` bucket; another tenant is not affected;
 * a node's usage stops counting when its connections close. The dev-only auth maps username
 * `tenant/user` to the tenant.
 */

let root: string;
let nats: NatsCluster;
let a: ClusterNode;
let b: ClusterNode;
const clients: MqttClient[] = [];

const QUOTA_YAML = [
  `pluginsDir: ${JSON.stringify(path.join(REPO, 'plugins'))}`,
  'plugins:',
  '  throttler:',
  '    use: "@bifro/plugin-throttler-quota"',
  '    options:',
  '      tenants:',
  '        capped: { TotalConnections: 4 }',
  '        other: { TotalConnections: 4 }',
].join('\n');

/** Connects and resolves with the CONNACK code (0 accepted). */
function connect(node: ClusterNode, clientId: string, username: string): Promise<{ client: MqttClient; code: number }> {
  return new Promise((resolve) => {
    const client = mqtt.connect({
      host: '127.0.0.1',
      port: node.proc.port,
      protocolVersion: 5,
      clientId,
      username,
      reconnectPeriod: 0,
      connectTimeout: 5000,
    });
    clients.push(client);
    client.once('connect', (connack) => resolve({ client, code: connack.reasonCode ?? 0 }));
    client.once('error', (err: Error & { code?: number }) => resolve({ client, code: err.code ?? -1 }));
  });
}

/** A tenant's TotalConnections as a node's quota checks see it (GET /api/v1/tenants/{tenant}). */
async function quotaUsage(node: ClusterNode, tenant: string): Promise<{ usage: number; clusterWide: boolean; connections: number }> {
  const res = await fetch(`${node.apiUrl}/api/v1/tenants/${tenant}`, { headers: { authorization: `Bearer ${API_TOKENS.admin}` } });
  if (res.status === 404) return { usage: 0, clusterWide: true, connections: 0 };
  const body = (await res.json()) as { connections: number; quotaScope: string; quota: { TotalConnections: { usage: number } } };
  return { usage: body.quota.TotalConnections.usage, clusterWide: body.quotaScope === 'cluster', connections: body.connections };
}

/** Polls until the node's quota checks see `expected` connections of the tenant. */
async function waitForUsage(node: ClusterNode, tenant: string, expected: number, timeoutMs = 10_000): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const { usage } = await quotaUsage(node, tenant);
    if (usage === expected) return;
    if (Date.now() > deadline) throw new Error(`${node.nodeId} sees ${usage} connections of ${tenant}, not ${expected}`);
    await sleep(100);
  }
}

beforeAll(async () => {
  root = mkdtempSync(path.join(os.tmpdir(), 'bifro-quotas-'));
  nats = await startNatsServer();
  [a, b] = await Promise.all([
    startClusterNode(root, nats, 'node-a', { extraYaml: QUOTA_YAML }),
    startClusterNode(root, nats, 'node-b', { extraYaml: QUOTA_YAML }),
  ]);
  await waitForNodes([a, b], 2);
}, 40_000);
afterEach(() => {
  for (const c of clients.splice(0)) c.end(true);
});
afterAll(async () => {
  await Promise.all([a?.proc.stop(), b?.proc.stop()]);
  await nats?.dispose();
  rmSync(root, { recursive: true, force: true });
});

describe('tenant quotas across nodes', () => {
  it("counts a tenant's connections on every node against its TotalConnections quota", async () => {
    const onA: MqttClient[] = [];
    for (let i = 0; i < 3; i++) {
      const { client, code } = await connect(a, `a-${i}`, 'capped/u');
      expect(code).toBe(0);
      onA.push(client);
    }
    await waitForUsage(b, 'capped', 3);
    // Node B's own figures stay its own; the quota figure is the cluster's.
    expect(await quotaUsage(b, 'capped')).toEqual({ usage: 3, clusterWide: true, connections: 0 });

    expect((await connect(b, 'b-0', 'capped/u')).code).toBe(0);
    expect((await connect(b, 'b-1', 'capped/u')).code).toBe(0x97); // Quota exceeded
    // Another tenant has its own quota.
    for (let i = 0; i < 3; i++) expect((await connect(b, `o-${i}`, 'other/u')).code).toBe(0);

    // A's connections close: once A's usage says so, B admits the tenant again.
    await Promise.all(onA.map((c) => c.endAsync()));
    await waitForUsage(b, 'capped', 1);
    expect((await connect(b, 'b-2', 'capped/u')).code).toBe(0);
    expect((await connect(b, 'b-3', 'capped/u')).code).toBe(0);
    expect((await connect(b, 'b-4', 'capped/u')).code).toBe(0);
    expect((await connect(b, 'b-5', 'capped/u')).code).toBe(0x97);
    // And A sees B's.
    await waitForUsage(a, 'capped', 4);
    expect((await connect(a, 'a-9', 'capped/u')).code).toBe(0x97);
    expect(a.proc.output() + b.proc.output()).not.toMatch(/"level":50/);
  }, 30_000);
});
