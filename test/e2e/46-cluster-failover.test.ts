import { mkdtempSync, rmSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import type { IClientOptions, MqttClient } from 'mqtt';
import { startClusterNode, waitForNodes, type ClusterNode } from '../support/cluster-node';
import { publishNumberedUntil, startFailoverSubscriber, track, type FailoverSubscriber } from '../support/cluster-traffic';
import { sleep, subscribe, waitUntil } from '../support/mqtt-helpers';
import { startNatsCluster, type NatsCluster } from '../support/nats-server';

/**
 * What a failure loses, over 3 NATS servers (JetStream, R3) and 3 broker processes sharing
 * @bifro/plugin-storage-nats (the cluster default): nothing acknowledged. A node holding a
 * persistent subscriber's connection is killed with SIGKILL while numbered messages flow from
 * another node; the subscriber comes back on the third node and gets every message whose
 * publisher had its PUBACK/PUBREC (QoS 1: duplicates reported; QoS 2: none). Then one NATS server
 * is killed mid-stream. docs/cluster.md § What a failure loses.
 */

let root: string;
let nats: NatsCluster;
const nodes: ClusterNode[] = [];
const clients: MqttClient[] = [];
const failoverSubscriber = (ports: number[], clientId: string, opts: IClientOptions = {}): FailoverSubscriber =>
  track(clients, startFailoverSubscriber(ports, clientId, opts));
const publishNumbered = (port: number, topic: string, count: number, qos: 1 | 2, window: number, onProgress: (acked: number) => void) =>
  publishNumberedUntil(clients, port, topic, count, qos, window, 90_000, onProgress);

async function node(id: string): Promise<ClusterNode> {
  const n = await startClusterNode(root, nats, id, { clusterYaml: '  replicas: 3' });
  nodes.push(n);
  return n;
}

beforeAll(async () => {
  root = mkdtempSync(path.join(os.tmpdir(), 'bifro-failover-'));
  nats = await startNatsCluster(3);
  // The first node creates the cluster's streams and buckets; the others open them.
  await node('node-a');
  await Promise.all([node('node-b'), node('node-c')]);
  await waitForNodes(nodes, 3);
}, 90_000);
afterAll(async () => {
  for (const c of clients.splice(0)) c.end(true);
  await Promise.all(nodes.map((n) => n.proc.stop().catch(() => undefined)));
  await nats?.dispose();
  rmSync(root, { recursive: true, force: true });
});

describe('kill -9 of the node holding a persistent subscriber', () => {
  it('loses no acknowledged QoS 1 message of 5,000 published from another node; the subscriber resumes on a third node', async () => {
    const [a, b, c] = nodes as [ClusterNode, ClusterNode, ClusterNode];
    const sub = failoverSubscriber([b.proc.port, c.proc.port], 'sink-q1');
    await waitUntil(() => sub.client.connected, 10_000);
    await subscribe(sub.client, 'flow1/#', { qos: 1 });
    await sleep(1500);
    let killed: Promise<void> | undefined;
    const run = publishNumbered(a.proc.port, 'flow1/n', 5000, 1, 64, (acked) => {
      if (acked >= 1500 && killed === undefined) killed = b.proc.kill9();
    });
    const { acked, failures } = await run;
    await killed;
    expect(acked.size).toBe(5000);
    // Every acknowledged message reaches the subscriber, wherever its session went.
    const complete = await waitUntil(() => [...acked].every((n) => sub.got.has(n)), 60_000, 200);
    const missing = [...acked].filter((n) => !sub.got.has(n));
    const duplicates = [...sub.got.values()].reduce((x, k) => x + (k - 1), 0);
    process.stdout.write(
      `QoS 1 across a node kill: 5000 acked, ${failures} publish attempts refused, ${duplicates} duplicates, ${missing.length} missing\n`,
    );
    expect(missing.slice(0, 20)).toEqual([]);
    expect(complete).toBe(true);
  }, 180_000);
});

describe('exactly once across a node kill', () => {
  it('delivers every acknowledged QoS 2 message once when the subscriber resumes on another node', async () => {
    const [a, , c] = nodes as [ClusterNode, ClusterNode, ClusterNode];
    // The killed node of the QoS 1 case comes back under a new id: a node joins with its config only.
    const d = await node('node-d');
    const live = nodes.filter((n) => n.proc.child.exitCode === null && n.proc.child.signalCode === null);
    await waitForNodes(live, live.length);
    const sub = failoverSubscriber([d.proc.port, c.proc.port], 'sink-q2', {
      properties: { sessionExpiryInterval: 600, receiveMaximum: 5 },
    });
    // A slow consumer: what waits beyond its 5 in flight is in the session's inbox, in JetStream.
    sub.client.handleMessage = (_packet, done) => void setTimeout(done, 4);
    await waitUntil(() => sub.client.connected, 10_000);
    await subscribe(sub.client, 'flow2/#', { qos: 2 });
    await sleep(1500);
    const { acked, failures } = await publishNumbered(a.proc.port, 'flow2/n', 1000, 2, 64, () => undefined);
    expect(failures).toBe(0);
    expect(acked.size).toBe(1000);
    expect(await waitUntil(() => sub.got.size >= 300, 30_000, 20)).toBe(true);
    expect(sub.got.size).toBeLessThan(1000);
    await d.proc.kill9();
    const complete = await waitUntil(() => sub.got.size === 1000, 60_000, 200);
    const duplicates = [...sub.got.values()].reduce((x, k) => x + (k - 1), 0);
    process.stdout.write(`QoS 2 across a node kill: 1000 acked, ${sub.got.size} received, ${duplicates} duplicates\n`);
    expect(complete).toBe(true);
    expect(duplicates).toBe(0);
  }, 120_000);
});

describe('kill -9 of one NATS server mid-stream', () => {
  it('loses no acknowledged QoS 1 message', async () => {
    const [a, , c] = nodes as [ClusterNode, ClusterNode, ClusterNode];
    const sub = failoverSubscriber([c.proc.port, a.proc.port], 'sink-nats');
    await waitUntil(() => sub.client.connected, 10_000);
    await subscribe(sub.client, 'flow3/#', { qos: 1 });
    await sleep(1500);
    let killed: Promise<void> | undefined;
    const { acked, failures } = await publishNumbered(a.proc.port, 'flow3/n', 3000, 1, 64, (n) => {
      if (n >= 1000 && killed === undefined) killed = nats.servers[0]!.kill9();
    });
    await killed;
    expect(acked.size).toBe(3000);
    const complete = await waitUntil(() => [...acked].every((n) => sub.got.has(n)), 60_000, 200);
    const missing = [...acked].filter((n) => !sub.got.has(n));
    const duplicates = [...sub.got.values()].reduce((x, k) => x + (k - 1), 0);
    process.stdout.write(
      `QoS 1 across a NATS server kill: 3000 acked, ${failures} refused, ${duplicates} duplicates, ${missing.length} missing\n`,
    );
    expect(missing.slice(0, 20)).toEqual([]);
    expect(complete).toBe(true);
  }, 150_000);
});
