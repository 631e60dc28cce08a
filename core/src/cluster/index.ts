/**
 * Cluster mode on NATS JetStream (docs/cluster.md). Loaded by the composition root only when the
 * configuration has a `cluster` section: a standalone broker never loads NATS.
 */
import type { KV, NatsConnection, Subscription } from 'nats';
import type { ClusterConfig } from '../base/config-types';
import type { Logger } from '../base/logger';
import { describeError } from '../base/errors';
import type { LocalRoutes } from '../routing/cluster-router';
import type { DrainReply, DrainRequest, FilterIndex, NodeLoad, RunningCluster } from './cluster-view';
import { Forwarder, type DeliverHere, type DeliverReceived } from './forwarder';
import { knownServers, Membership } from './membership';
import { NatsLink } from './nats-connection';
import { nodeToken, ROUTES_BUCKET, RouteTable, RouteWriter } from './routes';
import { RouteConfirmation } from './route-confirmation';
import { SessionOwners } from './session-owners';
import { ClusterUsage, type UsageSource } from './usage';

/** A bucket that could not be opened, or whose watch ended, is tried again after this long. */
const REOPEN_MS = 1000;
/** How long a stop waits for the session registry writes under way. */
const STOP_WRITES_MS = 2000;

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
  /** Delivers a message here to some sessions only (a will to those that came from a node without its copy). */
  readonly deliverHere: DeliverHere;
  /** The sessions (by key) served here whose non-shared subscriptions match `topic`. */
  localSubscribers(tenantId: string, topic: string): Iterable<string>;
  /** The node a session served here was adopted from, or (with `handedOverSince`) handed over by since then. */
  cameFrom(key: string, handedOverSince: number | undefined): string | undefined;
  /** The broker's clock (ms since the epoch). */
  readonly clock: () => number;
  /** This node's tenant usage: written for the other nodes, and its quota checks see theirs added (docs/cluster.md § Quotas across nodes). */
  readonly usage?: UsageSource;
  /** The storage is shared by the nodes (its retained totals are cluster-wide already). */
  readonly sharedStorage?: boolean;
  /** This node is draining (its heartbeat says so). */
  readonly draining?: () => boolean;
  /** Serves the drain requests other nodes relay (`bifro.drain.<nodeId>`). */
  readonly drainRequest?: (request: DrainRequest) => DrainReply;
}

/** Other nodes relay drain requests to a node on this subject. */
const drainSubject = (node: string): string => `bifro.drain.${node}`;
/** How long a relayed drain request waits for its node. */
const DRAIN_RELAY_MS = 3000;

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
    draining: opts.draining,
    leaseLost: () => {
      confirmation.lose('this node lost its lease');
      owners.fence();
    },
    leaseTaken: () => {
      confirmation.confirm();
      owners.leaseTaken();
    },
    left: (node) => {
      usage?.nodeLeft(node);
      void owners
        .nodeLeft(node)
        .catch((err: unknown) => logger.warn({ err: describeError(err), node }, `cannot adopt the sessions of ${node}`));
    },
  });
  const owners: SessionOwners = new SessionOwners({
    nodeId: opts.nodeId,
    replicas: (nc) => Math.min(opts.cluster.replicas, knownServers(nc)),
    liveNodes: () => membership.nodes().map((n) => n.record.nodeId),
    alive: (node) => node === opts.nodeId || membership.isAlive(node),
    holdsLease: () => membership.holdsLease(),
    observing: () => membership.observing,
    silentFor: (node) => membership.silentFor(node),
    nodeCleared: (node) => void purgeRoutes(node),
    // Its routes are confirmed only once its own sessions are back: until then a publish here would miss them.
    sessionsBack: () => confirmation.confirm(),
    logger,
  });
  const usage =
    opts.usage === undefined
      ? undefined
      : new ClusterUsage({
          nodeId: opts.nodeId,
          source: opts.usage,
          sharedRetained: opts.sharedStorage === true,
          replicas: opts.cluster.replicas,
          alive: (node) => membership.isAlive(node),
          logger,
          clock: opts.clock,
        });
  const table = new RouteTable(opts.nodeId, opts.newIndex, logger);
  const writer = new RouteWriter(opts.nodeId, opts.localRoutes, logger, () => owners.sessionsBack);
  const confirmation = new RouteConfirmation(opts.nodeId, writer, logger, opts.clock, () => {
    if (current !== undefined) reopen ??= setTimeout(() => void openRoutes(current!), 0);
  });
  const forwarder = new Forwarder({
    nodeId: opts.nodeId,
    routes: table,
    alive: (node) => membership.isAlive(node),
    routesCurrent: () => confirmation.current,
    deliver: opts.deliver,
    deliverHere: opts.deliverHere,
    localSubscribers: (tenantId, topic) => opts.localSubscribers(tenantId, topic),
    cameFrom: (key, since) => opts.cameFrom(key, since),
    logger,
    clock: opts.clock,
  });
  let stopped = false;
  let reopen: NodeJS.Timeout | undefined;
  let generation = 0;
  let routesKv: KV | undefined;
  let routesWatch: { stop(): void } | undefined;

  /** A departed node's sessions all have new owners: its routes go, so nothing waits on them any more. */
  const purgeRoutes = async (node: string): Promise<void> => {
    const kv = routesKv;
    if (kv === undefined) return;
    let purged = 0;
    try {
      // Listed first: a keys() iteration with awaited calls inside ends after the first key (nats.js 2.29).
      const keys: string[] = [];
      for await (const key of await kv.keys(`${nodeToken(node)}.>`)) keys.push(key);
      for (const key of keys) {
        await kv.delete(key);
        purged++;
      }
      if (purged > 0) logger.info({ node, routes: purged }, `deleted ${purged} routes of departed node ${node}`);
    } catch (err) {
      logger.warn({ err: describeError(err), node }, `cannot delete the routes of departed node ${node}`);
    }
  };

  const openSessions = async (nc: NatsConnection): Promise<void> => {
    if (stopped || nc.isClosed()) return;
    try {
      await owners.attach(nc);
    } catch (err) {
      if (stopped) return;
      logger.warn({ err: describeError(err) }, 'cannot open the session registry buckets; retrying');
      setTimeout(() => void openSessions(nc), REOPEN_MS);
    }
  };

  const openRoutes = async (nc: NatsConnection): Promise<void> => {
    reopen = undefined;
    if (stopped || nc.isClosed()) return;
    const mine = ++generation;
    try {
      const replicas = Math.min(opts.cluster.replicas, knownServers(nc));
      const kv: KV = await nc.jetstream().views.kv(ROUTES_BUCKET, { history: 1, replicas });
      routesKv = kv;
      confirmation.lose('a new watch of the routes');
      routesWatch?.stop();
      const entries = await kv.watch();
      routesWatch = entries;
      table.clear();
      void (async () => {
        try {
          for await (const e of entries) {
            if (stopped || mine !== generation) break;
            table.apply(e);
            writer.observed(e);
            confirmation.observed(e);
          }
        } catch (err) {
          if (stopped || mine !== generation) return;
          logger.warn({ err: describeError(err) }, `the watch of ${ROUTES_BUCKET} ended; watching again`);
          confirmation.lose(`the watch of ${ROUTES_BUCKET} ended`);
          reopen ??= setTimeout(() => void openRoutes(nc), REOPEN_MS);
        }
      })();
      await writer.attach(kv);
      confirmation.attach(kv);
    } catch (err) {
      if (stopped) return;
      logger.warn({ err: describeError(err) }, `cannot open the NATS KV bucket ${ROUTES_BUCKET}; retrying`);
      reopen ??= setTimeout(() => void openRoutes(nc), REOPEN_MS);
    }
  };

  let current: NatsConnection | undefined;
  let drainSub: Subscription | undefined;
  /** Drain requests relayed by other nodes' admin APIs (which checked the admin token). */
  const serveDrain = (nc: NatsConnection): void => {
    const handle = opts.drainRequest;
    if (handle === undefined) return;
    drainSub?.unsubscribe();
    drainSub = nc.subscribe(drainSubject(opts.nodeId), {
      callback: (err, m) => {
        if (err !== null) return;
        let reply: DrainReply;
        try {
          const r = m.json<Partial<DrainRequest>>();
          reply =
            typeof r.cancel === 'boolean' && typeof r.rate === 'number' && Number.isInteger(r.rate) && r.rate >= 1
              ? handle({ cancel: r.cancel, rate: r.rate })
              : { ok: false, message: 'malformed drain request' };
        } catch {
          reply = { ok: false, message: 'malformed drain request' };
        }
        m.respond(JSON.stringify(reply));
      },
    });
  };
  const link = new NatsLink(
    opts.cluster,
    opts.nodeId,
    logger,
    (nc) => {
      current = nc;
      serveDrain(nc);
      membership.attach(nc);
      forwarder.attach(nc);
      void openRoutes(nc);
      void openSessions(nc);
      void usage?.attach(nc);
    },
    (up) => (up ? confirmation.confirm() : confirmation.lose('the NATS connection was lost')),
  );
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
      routesMended: writer.mended,
      routesConfirmed: confirmation.current,
      unconfirmedRefused: forwarder.unconfirmedRefused,
      leaseHeld: membership.holdsLease(),
    }),
    forward: (tenantId, msg, waiter, groups, here) => forwarder.forward(tenantId, msg, waiter, groups, here),
    sessions: owners,
    hasRoute: (node, tenantId, filter) => table.hasRoute(node, tenantId, filter),
    sessionArrived: (key, from, handedOver) => forwarder.sessionArrived(key, from, handedOver),
    routesWritten: () => writer.written(),
    announce: () => membership.announce(),
    async relayDrain(node, request) {
      if (current === undefined || current.isClosed()) throw new Error('not connected to NATS');
      const m = await current.request(drainSubject(node), JSON.stringify(request), { timeout: DRAIN_RELAY_MS });
      return m.json<DrainReply>();
    },
    async stop() {
      // The registry entries of the sessions this stop disconnected are written first.
      await owners.stop(STOP_WRITES_MS);
      stopped = true;
      if (reopen !== undefined) clearTimeout(reopen);
      writer.stop();
      confirmation.stop();
      routesWatch?.stop();
      forwarder.stop();
      drainSub?.unsubscribe();
      usage?.stop();
      await membership.stop(link.connected());
      await link.close();
    },
  };
}
