import { mkdtempSync, rmSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import type { MqttClient } from 'mqtt';
import { startClusterNode, waitForNodes, type ClusterNode } from '../support/cluster-node';
import { publishNumberedUntil, startFailoverSubscriber, track } from '../support/cluster-traffic';
import { connectAsync, sleep, subscribe, waitUntil } from '../support/mqtt-helpers';
import { startNatsServer, type NatsCluster } from '../support/nats-server';

/**
 * The faults real deployments see most, on two broker processes sharing one nats-server (the
 * NATS storage, the cluster default): node B paused for 20 s (SIGSTOP, a long GC pause or a VM
 * stall), and NATS killed and started again after 6 s. QoS 1 traffic flows from node A to a
 * persistent subscriber on node B that fails over to A as fleets do. Nothing acknowledged is
 * lost, B stops serving its sessions when its lease runs out (before A may adopt them), and a
 * fresh subscriber is served on each node after each fault. docs/cluster.md § What a failure loses.
 */

let root: string;
let nats: NatsCluster;
let a: ClusterNode;
let b: ClusterNode;
const clients: MqttClient[] = [];
/** Numbered messages of each run, and how many are acknowledged before the fault starts. */
const COUNT = 2500;
const FAULT_AT = 400;

beforeAll(async () => {
  root = mkdtempSync(path.join(os.tmpdir(), 'bifro-faults-'));
  nats = await startNatsServer();
  a = await startClusterNode(root, nats, 'node-a');
  b = await startClusterNode(root, nats, 'node-b');
  await waitForNodes([a, b], 2);
}, 60_000);

afterAll(async () => {
  for (const c of clients.splice(0)) c.end(true);
  await Promise.all([a, b].map((n) => n?.proc.stop().catch(() => undefined)));
  await nats?.dispose();
  rmSync(root, { recursive: true, force: true });
});

/**
 * A fresh subscriber on `on` gets a QoS 1 message published on `from` (its route reached `from`,
 * and `on` serves it), within `ms`.
 */
async function freshSubscriberServed(on: ClusterNode, from: ClusterNode, tag: string, ms = 15_000): Promise<boolean> {
  const { client: sub } = await connectAsync(on.proc.port, { clientId: `fresh-${tag}`, protocolVersion: 5, reconnectPeriod: 0 });
  const { client: pub } = await connectAsync(from.proc.port, { clientId: `fresh-pub-${tag}`, protocolVersion: 5, reconnectPeriod: 0 });
  try {
    let got = false;
    sub.on('message', () => (got = true));
    await subscribe(sub, `fresh/${tag}`, { qos: 1 });
    // The route travels through the routes bucket: published again until it arrives.
    return await waitUntil(
      () => {
        if (!got) pub.publish(`fresh/${tag}`, 'hello', { qos: 1 });
        return got;
      },
      ms,
      500,
    );
  } finally {
    sub.end(true);
    pub.end(true);
  }
}

/** A client on `on` whose will is 'gone' to `topic` at QoS 2 (published when its connection drops). */
async function willClient(on: ClusterNode, clientId: string, topic: string): Promise<MqttClient> {
  const { client } = await connectAsync(on.proc.port, {
    clientId,
    protocolVersion: 5,
    reconnectPeriod: 0,
    will: { topic, payload: Buffer.from('gone'), qos: 2, retain: false },
  });
  clients.push(client);
  return client;
}

interface Outcome {
  readonly acked: number;
  readonly missing: number[];
  readonly duplicates: number;
  readonly failures: number;
}

/**
 * Numbered QoS 1 messages from node A to `topic`, 8 in flight, each refused one sent again,
 * while `fault` runs once `startAt` are acknowledged; then waits until the subscriber has every
 * acknowledged one.
 */
async function trafficThrough(
  sub: { got: Map<number, number> },
  topic: string,
  count: number,
  startAt: number,
  fault: () => Promise<void>,
): Promise<Outcome> {
  let faulted: Promise<void> | undefined;
  const { acked, failures } = await publishNumberedUntil(clients, a.proc.port, topic, count, 1, 8, 90_000, (n) => {
    if (n >= startAt && faulted === undefined) faulted = fault();
  });
  await faulted;
  await waitUntil(() => [...acked].every((n) => sub.got.has(n)), 45_000, 200);
  return {
    acked: acked.size,
    missing: [...acked].filter((n) => !sub.got.has(n)),
    duplicates: [...sub.got.values()].reduce((x, k) => x + (k - 1), 0),
    failures,
  };
}

it('node B paused 20 s: its lease runs out before A adopts, nothing acknowledged is lost, and both nodes serve fresh subscribers after', async () => {
  const sub = track(clients, startFailoverSubscriber([b.proc.port, a.proc.port], 'bar-paused', { keepalive: 4 }));
  await waitUntil(() => sub.client.connected, 10_000);
  await subscribe(sub.client, 'paused/#', { qos: 1 });
  // A will published on A for this session while B is paused: B never takes its copy, A takes the session over.
  await subscribe(sub.client, 'will/#', { qos: 2 });
  const wills: string[] = [];
  sub.client.on('message', (topic, payload) => (topic.startsWith('will/') ? wills.push(payload.toString()) : undefined));
  const willer = await willClient(a, 'willer-on-a', 'will/paused');
  // A client that stays attached to B through the pause (keep alive 60 s): B cuts it off when it resumes.
  const { client: held } = await connectAsync(b.proc.port, {
    clientId: 'held-through-pause',
    protocolVersion: 5,
    clean: false,
    properties: { sessionExpiryInterval: 300 },
    keepalive: 60,
    reconnectPeriod: 0,
  });
  clients.push(held);
  const cutOff = new Promise<number | undefined>((resolve) => held.once('disconnect', (p) => resolve(p.reasonCode)));
  await sleep(1500);
  const [aLog, bLog] = [a.proc.output().length, b.proc.output().length];
  const outcome = await trafficThrough(sub, 'paused/n', COUNT, FAULT_AT, async () => {
    process.kill(b.proc.child.pid!, 'SIGSTOP');
    await sleep(2000);
    willer.stream.destroy();
    await sleep(18_000);
    process.kill(b.proc.child.pid!, 'SIGCONT');
  });
  process.stdout.write(
    `node paused 20 s: ${outcome.acked} acked, ${outcome.failures} refused and sent again, ${outcome.duplicates} duplicates, ${outcome.missing.length} missing\n`,
  );
  expect(outcome.missing.slice(0, 20)).toEqual([]);
  expect(outcome.acked).toBe(COUNT);
  const bAfter = b.proc.output().slice(bLog);
  // Before it served anything after the pause, B let its sessions go: 0x89 Server busy, not a second owner.
  expect(await Promise.race([cutOff, sleep(5000).then(() => 'still connected')])).toBe(0x89);
  // B saw its lease gone before it served anything, and took it again.
  expect(bAfter).toMatch(/this node's lease ran out/);
  expect(bAfter).toMatch(/this node holds its lease again/);
  // A claimed the session (after B's lease had run out for sure) or adopted it; B declared nobody dead.
  expect(a.proc.output().slice(aLog)).toMatch(/adopted \d+ sessions of node node-b|did not hand over session bar-paused in time/);
  expect(bAfter).not.toContain('node left');
  await waitForNodes([a, b], 2, 15_000);
  expect(await freshSubscriberServed(b, a, 'after-pause-b')).toBe(true);
  expect(await freshSubscriberServed(a, b, 'after-pause-a')).toBe(true);
  // The will reached the session once, wherever it was served by then.
  await waitUntil(() => wills.length > 0, 30_000, 200);
  await sleep(1000);
  expect(wills).toEqual(['gone']);
  sub.client.end(true);
}, 150_000);

it('NATS killed and started again after 6 s: nothing acknowledged is lost, no node declares another dead, and fresh subscribers are served after', async () => {
  const sub = track(clients, startFailoverSubscriber([b.proc.port, a.proc.port], 'bar-nats', { keepalive: 4 }));
  await waitUntil(() => sub.client.connected, 10_000);
  await subscribe(sub.client, 'natsrestart/#', { qos: 1 });
  await sleep(1500);
  const [aLog, bLog] = [a.proc.output().length, b.proc.output().length];
  const server = nats.servers[0]!;
  const outcome = await trafficThrough(sub, 'natsrestart/n', COUNT, FAULT_AT, async () => {
    await server.kill9();
    await sleep(6000);
    await server.restart();
  });
  process.stdout.write(
    `NATS down 6 s: ${outcome.acked} acked, ${outcome.failures} refused and sent again, ${outcome.duplicates} duplicates, ${outcome.missing.length} missing\n`,
  );
  expect(outcome.missing.slice(0, 20)).toEqual([]);
  expect(outcome.acked).toBe(COUNT);
  expect(a.proc.output().slice(aLog)).not.toContain('node left');
  expect(b.proc.output().slice(bLog)).not.toContain('node left');
  await waitForNodes([a, b], 2, 15_000);
  expect(await freshSubscriberServed(b, a, 'after-nats-b')).toBe(true);
  expect(await freshSubscriberServed(a, b, 'after-nats-a')).toBe(true);
  sub.client.end(true);
}, 150_000);

it('a will published while NATS is away reaches a persistent subscriber that moved to its node meanwhile, once', async () => {
  const wills: string[] = [];
  const watcherOptions = {
    clientId: 'moving-watcher',
    protocolVersion: 5 as const,
    clean: false,
    properties: { sessionExpiryInterval: 600 },
    reconnectPeriod: 0,
    connectTimeout: 30_000,
  };
  const { client: onB } = await connectAsync(b.proc.port, watcherOptions);
  clients.push(onB);
  await subscribe(onB, 'movewill/#', { qos: 2 });
  const willer = await willClient(a, 'willer-nats-away', 'movewill/w');
  await sleep(1500);
  const server = nats.servers[0]!;
  await server.kill9();
  // A publishes the will with its routes unconfirmed (NATS away): it waits, nothing is sent yet.
  willer.stream.destroy();
  await sleep(1500);
  await server.restart();
  // The subscriber leaves B and resumes its session on A (B hands it over) before A's routes are confirmed again.
  onB.end(true);
  // Refused (0x88/0x89) while A or B waits for NATS: tried again, as a device would.
  let resumed: Awaited<ReturnType<typeof connectAsync>> | undefined;
  for (const until = Date.now() + 30_000; resumed === undefined;) {
    try {
      resumed = await connectAsync(a.proc.port, watcherOptions);
    } catch (err) {
      if (Date.now() > until) throw err;
      await sleep(250);
    }
  }
  const { client: onA, connack } = resumed;
  clients.push(onA);
  expect(connack.sessionPresent).toBe(true);
  onA.on('message', (_topic, payload) => wills.push(payload.toString()));
  await waitUntil(() => wills.length > 0, 30_000, 200);
  // A's routes confirmed again, nothing else arrives: the will came once.
  await sleep(10_000);
  expect(wills).toEqual(['gone']);
  onA.end(true);
}, 90_000);
