/**
 * Cluster mode on NATS JetStream (docs/cluster.md). Loaded by the composition root only when the
 * configuration has a `cluster` section: a standalone broker never loads NATS.
 */
import type { KV, NatsConnection } from 'nats';
import type { ClusterConfig } from '../base/config-types';
import type { Logger } from '../base/logger';
import { describeError } from '../base/errors';
import type { FilterIndex, LocalRoutes, NodeLoad, RunningCluster } from './cluster-view';
import { Forwarder, type DeliverReceived } from './forwarder';
import { knownServers, Membership } from './membership';
import { NatsLink } from './nats-connection';
import { ROUTES_BUCKET, RouteTable, RouteWriter } from './routes';

/** A bucket that could not be opened, or whose watch ended, is tried again after this long. */
const REOPEN_MS = 1000;

export interface StartClusterOptions {
  readonly cluster: ClusterConfig;
  /** This node's id (cluster.nodeId, or the default the composition root derived). */
  readonly nodeId: string;
  readonly version: string;
  readonly startedAt: number;
  /** `host:port` of each bound MQTT listener. */
  readonly listeners: readonly string[];
  load(): NodeLoad;
  readonly logger: Logger;
  /** This node's (tenant, filter) pairs with local non-shared subscribers (the cluster router). */
  readonly localRoutes: LocalRoutes;
  /** An empty filter index (the broker's topic trie) for the routes of other nodes. */
  newIndex(): FilterIndex<string>;
  /** Delivers what other nodes forward here, locally only (never forwarded again, never retained). */
  readonly deliver: DeliverReceived;
  /** The broker's clock (ms since the epoch). */
  readonly clock: () => number;
}

/**
 * Connects to NATS and starts membership, routes and forwarding. Returns at once: while NATS is
 * unreachable the node serves MQTT alone and keeps trying (the connection logs it).
 */
export function startCluster(opts: StartClusterOptions): RunningCluster {
  const logger = opts.logger.child({ cluster: opts.nodeId });
  const membership = new Membership({
    nodeId: opts.nodeId,
    version: opts.version,
    startedAt: opts.startedAt,
    listeners: opts.listeners,
    replicas: opts.cluster.replicas,
    load: opts.load,
    logger,
  });
  const table = new RouteTable(opts.nodeId, opts.newIndex, logger);
  const writer = new RouteWriter(opts.nodeId, opts.localRoutes, logger);
  const forwarder = new Forwarder({
    nodeId: opts.nodeId,
    routes: table,
    alive: (node) => membership.isAlive(node),
    deliver: opts.deliver,
    logger,
    clock: opts.clock,
  });
  let stopped = false;
  let reopen: NodeJS.Timeout | undefined;
  let generation = 0;

  const openRoutes = async (nc: NatsConnection): Promise<void> => {
    reopen = undefined;
    if (stopped || nc.isClosed()) return;
    const mine = ++generation;
    try {
      const replicas = Math.min(opts.cluster.replicas, knownServers(nc));
      const kv: KV = await nc.jetstream().views.kv(ROUTES_BUCKET, { history: 1, replicas });
      const entries = await kv.watch();
      table.clear();
      void (async () => {
        try {
          for await (const e of entries) {
            if (stopped || mine !== generation) break;
            table.apply(e);
          }
        } catch (err) {
          if (stopped || mine !== generation) return;
          logger.warn({ err: describeError(err) }, `the watch of ${ROUTES_BUCKET} ended; watching again`);
          reopen ??= setTimeout(() => void openRoutes(nc), REOPEN_MS);
        }
      })();
      await writer.attach(kv);
    } catch (err) {
      if (stopped) return;
      logger.warn({ err: describeError(err) }, `cannot open the NATS KV bucket ${ROUTES_BUCKET}; retrying`);
      reopen ??= setTimeout(() => void openRoutes(nc), REOPEN_MS);
    }
  };

  const link = new NatsLink(opts.cluster, opts.nodeId, logger, (nc) => {
    membership.attach(nc);
    forwarder.attach(nc);
    void openRoutes(nc);
  });
  logger.info(
    { servers: opts.cluster.servers, node: opts.nodeId },
    `cluster mode: node ${opts.nodeId}, NATS ${opts.cluster.servers.join(', ')}`,
  );
  return {
    clustered: true,
    nodeId: opts.nodeId,
    connected: () => link.connected(),
    nodes: () => membership.nodes(),
    traffic: () => ({
      forwarded: forwarder.forwarded,
      received: forwarder.received,
      forwardFailures: forwarder.failures,
      routes: table.size,
    }),
    forward: (tenantId, msg, waiter) => forwarder.forward(tenantId, msg, waiter),
    async stop() {
      stopped = true;
      if (reopen !== undefined) clearTimeout(reopen);
      writer.stop();
      forwarder.stop();
      await membership.stop(link.connected());
      await link.close();
    },
  };
}
