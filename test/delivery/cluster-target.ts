import { mkdtempSync, rmSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { startNatsCluster, startNatsServer, type NatsCluster } from '../support/nats-server';
import { sleep } from './clock';
import type { BrokerEvent } from './model';
import { NatsProxy } from './nats-proxy';
import { BrokerNode, pluginsDirIn, type ClusterControl, type StorageFault, type Target } from './target';

/**
 * A cluster target: N `bifro start` processes (2 or 3) with a `cluster` section on real
 * nats-server processes with JetStream (1 server at replicas 1, or 3 joined by routes at replicas
 * 3), each on the default cluster storage `@bifro/plugin-storage-nats`, with the settings-file
 * and events-log plugins as on the single-node target. Every node reaches each NATS server
 * through a proxy of its own (test/delivery/nats-proxy.ts), which a partition blackholes.
 *
 * No storage write failures here: the faulty-storage fixture wraps the level and memory storages
 * only, and a failing shared storage is what the NATS faults already are.
 */
export interface ClusterTargetOptions {
  readonly nodes: number;
  /** 1 (replicas 1) or 3 (replicas 3). */
  readonly natsServers: number;
}

/** Events of a cluster node the checker reads beyond the single-node ones: wills published. */
const CLUSTER_EVENTS = ['willDistributed'];
/** Event groups too: who serves a client id when (connected, and every kind of disconnect). */
const CLUSTER_GROUPS = ['clientConnected', 'clientDisconnected'];

export class ClusterTarget implements Target {
  readonly nodeCount: number;
  readonly durable = true;
  readonly dir: string;
  private nats: NatsCluster | undefined;
  private readonly nodes: BrokerNode[] = [];
  /** proxies[node][server] */
  private readonly proxies: NatsProxy[][] = [];
  private readonly paused = new Set<number>();
  readonly cluster: ClusterControl;

  constructor(readonly opts: ClusterTargetOptions) {
    if (opts.nodes < 2 || opts.nodes > 3) throw new Error('a cluster target has 2 or 3 nodes');
    if (opts.natsServers !== 1 && opts.natsServers !== 3) throw new Error('a cluster target has 1 or 3 NATS servers');
    this.nodeCount = opts.nodes;
    this.dir = mkdtempSync(path.join(os.tmpdir(), 'bifro-delivery-cluster-'));
    this.cluster = {
      natsServers: opts.natsServers,
      pause: (node) => {
        this.nodeAt(node).pause();
        this.paused.add(node);
      },
      resume: (node) => {
        this.paused.delete(node);
        this.nodeAt(node).resume();
      },
      killNats: async (i) => {
        await this.natsAt(i).kill9();
      },
      restartNats: async (i) => {
        await this.natsAt(i).restart();
      },
      partition: (node, on) => {
        for (const p of this.proxies[node] ?? []) {
          if (on) p.blackhole();
          else p.heal();
        }
      },
    };
  }

  get description(): string {
    return `${this.opts.nodes} cluster nodes on ${this.opts.natsServers} NATS server(s) at replicas ${this.opts.natsServers} (${this.dir})`;
  }

  get logFile(): string {
    return this.nodes.map((n) => n.logFile).join(' ');
  }

  async start(): Promise<void> {
    this.nats = this.opts.natsServers === 1 ? await startNatsServer() : await startNatsCluster(3);
    const servers = this.nats.servers;
    const plugins = pluginsDirIn(this.dir);
    for (let n = 0; n < this.opts.nodes; n++) {
      // One proxy per NATS server for this node; a URL of connect_urls becomes this node's proxy of that server.
      const byPort = new Map<number, NatsProxy>();
      const mine = servers.map((s) => {
        const p = new NatsProxy(s.port, (hostPort) => {
          const port = Number(hostPort.slice(hostPort.lastIndexOf(':') + 1));
          const proxy = byPort.get(port);
          return proxy === undefined ? undefined : `127.0.0.1:${proxy.port}`;
        });
        byPort.set(s.port, p);
        return p;
      });
      for (const p of mine) await p.start();
      this.proxies.push(mine);
      this.nodes.push(
        new BrokerNode(n, path.join(this.dir, `node${n}`), 'nats', plugins, {
          yaml: [
            'cluster:',
            `  servers: [${mine.map((p) => JSON.stringify(p.url)).join(', ')}]`,
            `  nodeId: delivery-${n}`,
            `  replicas: ${this.opts.natsServers}`,
          ],
          events: CLUSTER_EVENTS,
          groups: CLUSTER_GROUPS,
        }),
      );
    }
    // One at a time: the first creates the buckets and streams.
    for (const node of this.nodes) await node.start();
    // Every node has heard the others (heartbeats every 2 s).
    await sleep(2500);
  }

  async stop(keep = false): Promise<void> {
    for (const n of this.paused) this.nodeAt(n).resume();
    this.paused.clear();
    await Promise.all(this.nodes.map((n) => n.stop()));
    for (const list of this.proxies) for (const p of list) await p.stop();
    await this.nats?.dispose();
    if (!keep) rmSync(this.dir, { recursive: true, force: true });
  }

  port(node: number): number | undefined {
    return this.nodeAt(node).port;
  }

  async kill(node: number): Promise<void> {
    this.paused.delete(node);
    await this.nodeAt(node).kill();
  }

  restart(node: number): Promise<void> {
    return this.nodeAt(node).start();
  }

  setStorageFault(_node: number, fault: StorageFault | undefined): Promise<void> {
    if (fault !== undefined) throw new Error('the cluster target has no storage faults (storage-nats is not wrapped)');
    return Promise.resolve();
  }

  async setTenantSettings(tenant: string, settings: Readonly<Record<string, number | boolean>>): Promise<void> {
    await Promise.all(this.nodes.map((n) => n.setTenantSettings(tenant, settings)));
  }

  brokerEvents(tenant: string): BrokerEvent[] {
    return this.nodes.flatMap((n) => n.brokerEvents(tenant)).sort((a, b) => a.eventTime - b.eventTime);
  }

  forget(tenant: string): void {
    for (const n of this.nodes) n.forget(tenant);
  }

  trouble(since: number): string[] {
    return this.nodes.flatMap((n) => n.trouble(since));
  }

  /** Faults cleared: nodes resumed, partitions healed, NATS servers up. */
  async clearFaults(): Promise<void> {
    for (const n of [...this.paused]) this.cluster.resume(n);
    for (let n = 0; n < this.nodeCount; n++) this.cluster.partition(n, false);
    for (const s of this.nats?.servers ?? []) if (s.pid === undefined) await s.restart();
  }

  private nodeAt(node: number): BrokerNode {
    const n = this.nodes[node];
    if (n === undefined) throw new Error(`the cluster target has no node ${node}`);
    return n;
  }

  private natsAt(i: number): NatsCluster['servers'][number] {
    const s = this.nats?.servers[i];
    if (s === undefined) throw new Error(`the cluster target has no NATS server ${i}`);
    return s;
  }
}
