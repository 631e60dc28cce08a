import 'reflect-metadata';
import { promises as fs } from 'node:fs';
import { container as rootContainer } from 'tsyringe';
import type { BrokerConfig } from '../base/config-types';
import type { Logger } from '../base/logger';
import { RUNTIME_TOKENS } from '../base/tokens';
import { loadPlugins, registerPluginHost } from '../plugin-host';
import type { LoadedPluginInfo } from '../plugin-host/managers';
import { COUNTER, resourceIndex, TenantUsage, type TenantMetrics } from '../tenancy/tenant-usage';
import { TenantRates } from '../tenancy/tenant-rates';
import { SysTopics } from '../broker/sys-topics';
import { TimerWheel } from '../session/timer-wheel';
import { MqttServer } from '../protocol/mqtt-server';
import type { ListenerAddress } from '../transport/listener-address';
import { Engine } from '../broker/engine';
import { LocalRouter } from '../routing/local-router';
import { ClusterRouter } from '../routing/cluster-router';
import { ClusterSessions } from '../broker/cluster-sessions';
import { TopicTrie } from '../routing/topic-trie';
import { PROTOCOL_TOPIC_LIMITS, validateTopicName } from '../routing/topic';
import { CountedWaiter } from '../session/counted-waiter';
import { Message } from '../session/message';
import type { PublishProperties } from '../codec/publish-codec';
import { RetainService } from '../retain/retain-service';
import type { Session } from '../session/session';
import { SessionPersistence } from '../session/session-persistence';
import { serveAsWorker, type WorkerRouter } from '../workers/handover';
import { DATA_DIR_MODE, isLoopbackHost, isReservedTopic, secureDataDir } from '../security/secure-defaults';
import { describeError } from '../base/errors';
import type { Clock } from '../base/clock';
import type { ApiContext, BrokerState } from '../api/api-context';
import { startApi, type RunningApi } from '../api/api-server';
import { standaloneView, type NodeLoad, type ReceivedMessage, type RunningCluster } from '../cluster/cluster-view';
import { CORE_VERSION } from '../plugin-host/core-version';
import { PLUGIN_TOKENS } from '../plugin-host/tokens';
import { NodeDrain } from '../broker/node-drain';

export type { ListenerAddress } from '../transport/listener-address';

/** A started broker. */
export interface RunningBroker {
  readonly listeners: readonly ListenerAddress[];
  readonly plugins: readonly LoadedPluginInfo[];
  /** Tenants with recorded usage. */
  tenants(): string[];
  /** Core's metrics of one tenant (connections, sessions, subscriptions, traffic, drops, retained). */
  tenantMetrics(tenantId: string): TenantMetrics;
  /** MQTT connections open now, CONNACK or not (diagnostics and tests). */
  openConnections(): number;
  /** The admin API, when `api` is configured: its address, and its fastify instance (tests inject requests). */
  readonly api: RunningApi | undefined;
  /** Close listeners and connections, then plugins. Safe to call twice. */
  stop(reason?: string): Promise<void>;
}

/** How the broker is started beyond its configuration. */
export interface StartOptions {
  /**
   * Set when this process is one of several workers (`workers` > 1, docs/multicore.md): its
   * index, the worker count and the way to hand connections to the worker owning their tenant.
   */
  readonly worker?: WorkerRouter;
  /**
   * The broker's clock (`Date.now` by default): every deadline (keep alive, will delay, session
   * expiry, connect and packet timeouts), message expiry and rate window reads it. Tests pass a
   * clock they move forward instead of sleeping; the timer wheel still ticks in real time.
   */
  readonly clock?: Clock;
}

/**
 * The composition root. Boot order: plugins (settings, events, storage, throttler, auth, acl, balancer)
 * → DI container → MQTT server → listeners → cluster membership (with `cluster`) → admin API.
 * Shutdown runs the other way round. Everything is resolved from the container once, here;
 * nothing on the packet path asks the container again.
 */
export async function startBroker(config: BrokerConfig, logger: Logger, options: StartOptions = {}): Promise<RunningBroker> {
  const container = rootContainer.createChildContainer();
  const clock = options.clock ?? Date.now;
  const usage = new TenantUsage(clock);
  const wheel = new TimerWheel(undefined, undefined, { clock });
  container.register(RUNTIME_TOKENS.Config, { useValue: config });
  container.register(RUNTIME_TOKENS.Logger, { useValue: logger });
  container.register(RUNTIME_TOKENS.TenantUsage, { useValue: usage });
  container.register(RUNTIME_TOKENS.TimerWheel, { useValue: wheel });
  container.register(RUNTIME_TOKENS.Clock, { useValue: clock });
  // The routing seam: in-process routing; in cluster mode it also counts the routes announced to the other nodes.
  const clusterRouter = config.cluster !== undefined ? new ClusterRouter<Session>(new LocalRouter<Session>()) : undefined;
  container.register(RUNTIME_TOKENS.Router, { useValue: clusterRouter ?? new LocalRouter<Session>() });

  // Created private, before a plugin creates it with the process's umask (made private below otherwise).
  await fs.mkdir(config.dataDir, { recursive: true, mode: DATA_DIR_MODE }).catch(() => undefined);
  let host;
  try {
    host = await loadPlugins(config, logger, usage);
  } catch (err) {
    wheel.close();
    throw err;
  }
  // The data directory is private (0700, files 0600): what the plugins just created in it included.
  await secureDataDir(config.dataDir, logger).catch((err: unknown) =>
    logger.warn({ dataDir: config.dataDir, err: describeError(err) }, `cannot secure the data directory ${config.dataDir}`),
  );
  registerPluginHost(container, host);
  // Cluster mode: a draining node's answers override the balancer plugin's (docs/cluster.md § Drain and removal).
  const drain = config.cluster !== undefined ? new NodeDrain(host.balancer, clock, logger) : undefined;
  if (drain !== undefined) container.register(PLUGIN_TOKENS.Balancer, { useValue: drain });
  for (const p of host.plugins) {
    logger.info(
      { plugin: p.name, version: p.version, kinds: p.kinds, source: p.source },
      `plugin loaded: ${p.name}@${p.version} (${p.kinds.join(', ')})`,
    );
  }

  // The object graph, built once: the engine (with the services it composes) and the server over it.
  container.registerSingleton(RetainService);
  container.registerSingleton(SessionPersistence);
  container.registerSingleton(Engine);
  container.registerSingleton(MqttServer);
  const engine = container.resolve(Engine);
  const server = container.resolve(MqttServer);
  if (options.worker !== undefined) serveAsWorker(server, engine, options.worker);
  const state: BrokerState = { ready: false, stopping: false };
  const startedAt = clock();
  // Sampled on the timer wheel only when something reads the rates (the admin API, $SYS).
  const rates = new TenantRates(usage, wheel);
  const sys = new SysTopics(engine, rates, wheel, config.sysInterval, startedAt);
  const apiContext: Omit<ApiContext, 'nodes'> = {
    config,
    logger,
    engine,
    drain,
    storage: host.storage,
    plugins: host.plugins,
    clock,
    startedAt,
    state,
    rates,
  };
  let bound;
  let api: RunningApi | undefined;
  let cluster: RunningCluster | undefined;
  try {
    // Storage a whole cluster shares holds every node's sessions: a node takes back only its own, from the registry.
    const sharedStorage = config.cluster !== undefined && host.storage.shared === true;
    if (config.cluster !== undefined && !sharedStorage)
      logger.warn(
        { plugin: host.plugins.find((p) => p.kinds.includes('storage'))?.name },
        'cluster mode with storage the nodes do not share (plugins.storage): a persistent session stays on its node, and moves without its inbox; remove plugins.storage to use @bifro/plugin-storage-nats',
      );
    const restored = sharedStorage ? 0 : await engine.sessions.restore();
    if (restored > 0) logger.info({ sessions: restored }, `restored ${restored} persistent sessions`);
    // Bans are in force before the first CONNECT is read.
    await engine.bans.load();
    bound = await server.listen();
    engine.redirects.start();
    if (config.api !== undefined || config.sysInterval > 0 || config.cluster !== undefined) rates.start();
    sys.start();
    // After storage and listeners: the heartbeat names the listeners as bound.
    const listenerAddresses = bound.map((l) => `${l.host}:${l.port}`);
    const load = (): NodeLoad => nodeLoad(usage, rates);
    if (clusterRouter !== undefined) {
      cluster = startClusterMode(config, logger, bound, startedAt, load, clusterRouter, engine, clock, drain);
      engine.remote = cluster;
      const running = cluster;
      drain?.attach({
        nodes: () => running.nodes(),
        listenerNames: bound.map((l) => l.name),
        announce: () => running.announce(),
        sweep: (perSecond, active) => engine.redirects.drain(perSecond, active),
        nodeId: running.nodeId,
        connections: () => engine.connections.size,
        relay: (node, request) => running.relayDrain(node, request),
      });
      engine.clusterSessions = new ClusterSessions(
        cluster.nodeId,
        cluster.sessions,
        engine.sessions,
        host.storage,
        sharedStorage,
        logger,
        clock,
        (node, tenantId, filter) => running.hasRoute(node, tenantId, filter),
      );
    }
    // Standalone, the nodes endpoint and the cluster metrics see this broker alone.
    const nodes =
      cluster ??
      standaloneView(
        config.nodeId,
        () => ({ nodeId: config.nodeId, startedAt, version: CORE_VERSION, listeners: listenerAddresses, ...load() }),
        clock,
      );
    if (config.api !== undefined) api = await startApi({ ...apiContext, nodes }, config.api);
  } catch (err) {
    await cluster?.stop();
    await server.close();
    await host.close();
    wheel.close();
    throw err;
  }
  state.ready = true;
  if (api !== undefined) {
    const exposed = !isLoopbackHost(api.host);
    logger[exposed && config.api?.tls === undefined ? 'warn' : 'info'](
      { api: api.url, tokens: config.api!.tokens.length },
      exposed && config.api?.tls === undefined
        ? `admin API listening on ${api.url} beyond loopback WITHOUT TLS: bearer tokens cross the network in clear; configure api.tls`
        : `admin API listening on ${api.url}`,
    );
  }
  const listeners = bound.map(({ name, type, host: h, port }) => ({ name, type, host: h, port }));
  for (const l of listeners)
    logger.info({ listener: l.name, type: l.type, host: l.host, port: l.port }, `listening: ${l.type}://${l.host}:${l.port} (${l.name})`);
  if (config.plugins.auth.length === 0) {
    const exposed = listeners.filter((l) => !isLoopbackHost(l.host));
    // Only possible with the opt-in (BIFRO_CONFIG_ANONYMOUS_EXPOSED otherwise): said loudly at every start.
    if (exposed.length > 0)
      logger.warn(
        { listeners: exposed.map((l) => l.name), setting: 'security.allowAnonymousOnPublicInterfaces' },
        `THE DEV-ONLY ALLOW-ALL AUTH IS EXPOSED BEYOND LOOPBACK on ${exposed.map((l) => `${l.host}:${l.port}`).join(', ')} ` +
          '(security.allowAnonymousOnPublicInterfaces: true): anyone who can reach these ports is accepted without credentials. Configure plugins.auth.',
      );
  }

  let stopping: Promise<void> | undefined;
  return {
    listeners,
    plugins: host.plugins,
    tenants: () => [...usage.tenantIds()],
    tenantMetrics: (tenantId) => usage.metrics(tenantId),
    openConnections: () => engine.connections.size,
    api,
    stop(reason = 'stop requested') {
      stopping ??= (async () => {
        logger.info({ reason }, 'broker stopping');
        // Drain: /ready turns 503, listeners stop accepting, v5 clients get DISCONNECT 0x8B, then storage is flushed and closed.
        state.stopping = true;
        sys.stop();
        rates.stop();
        await server.close();
        await api?.close();
        // The others drop this node at once (its key deleted), then the NATS connection drains.
        engine.remote = undefined;
        await cluster?.stop();
        // Deletes of ended bans met at CONNECT reach storage before it closes.
        await engine.bans.settled();
        await host.close();
        wheel.close();
        logger.info('broker stopped');
      })();
      return stopping;
    },
  };
}

/**
 * Cluster mode, loaded only when configured: a standalone broker never requires NATS.
 * The node id: `cluster.nodeId`, else `<nodeId>-<port of the first listener as bound>`, unique
 * among brokers sharing a host and the same across restarts on fixed ports (docs/cluster.md).
 */
function startClusterMode(
  config: BrokerConfig,
  logger: Logger,
  bound: readonly ListenerAddress[],
  startedAt: number,
  load: () => NodeLoad,
  router: ClusterRouter<Session>,
  engine: Engine,
  clock: Clock,
  drain: NodeDrain | undefined,
): RunningCluster {
  const clusterConfig = config.cluster!;
  const nodeId = clusterConfig.nodeId ?? `${config.nodeId}-${bound[0]?.port ?? 0}`;
  // eslint-disable-next-line @typescript-eslint/no-require-imports
  const { startCluster } = require('../cluster') as typeof import('../cluster');
  return startCluster({
    cluster: clusterConfig,
    nodeId,
    version: CORE_VERSION,
    startedAt,
    listeners: bound.map((l) => `${l.host}:${l.port}`),
    load,
    logger,
    localRoutes: router,
    newIndex: () => new TopicTrie<string>(),
    deliver: (messages, done) => deliverFromNode(engine, messages, done),
    clock,
    draining: () => drain?.draining === true,
    drainRequest: drain === undefined ? undefined : (request) => drain.handle(request),
    // Quotas cluster-wide: the retained totals of a shared store are counted by the store.
    usage: engine.usage,
    sharedStorage: engine.persistence.storage.shared === true,
  });
}

/** Settles once every storage write of a forwarded batch is done: the sending node's reply. */
class BatchWaiter extends CountedWaiter {
  constructor(private readonly done: (failed: boolean) => void) {
    super();
  }

  protected settled(failed: boolean): void {
    this.done(failed);
  }
}

/**
 * Messages another node forwarded: matched and delivered here like a local publish, but never
 * forwarded again nor retained (each node's retained store is its own in this part). The batch's
 * QoS 1/2 messages hold one waiter, as a PUBACK would, so the reply waits for this node's storage.
 */
function deliverFromNode(engine: Engine, messages: readonly ReceivedMessage[], done: (failed: boolean) => void): void {
  // Without its lease this node serves no session (a lapse just seen fences them first): refused, the sender retries.
  if (engine.clusterSessions?.holdsLease() === false) {
    done(true);
    return;
  }
  const waiter = new BatchWaiter(done);
  const now = engine.now();
  for (const r of messages) {
    // The sending node checked it; a frame is still not trusted with what the router relies on ($SYS is per node).
    if (!validateTopicName(r.topic, PROTOCOL_TOPIC_LIMITS).ok || isReservedTopic(r.topic)) {
      engine.logger.warn({ tenantId: r.tenantId, topic: r.topic }, 'dropped a forwarded message with an invalid topic');
      continue;
    }
    const msg = new Message(
      r.topic,
      r.payload,
      r.qos,
      r.retain,
      receivedProperties(r),
      now,
      r.expiryMs === undefined ? 0 : now + r.expiryMs,
      r.publisherClientId,
    );
    try {
      engine.publish(r.tenantId, msg, r.qos === 0 ? undefined : waiter, r.groups);
    } catch (err) {
      engine.logger.error({ tenantId: r.tenantId, topic: r.topic, err: describeError(err) }, 'forwarded message not distributed');
      if (r.qos !== 0) {
        waiter.hold();
        waiter.fail(err);
      }
    }
  }
  waiter.release();
}

/**
 * The v5 properties a forwarded message carries, or undefined when it has none: like a local
 * PUBLISH without properties, its encoding per variant is then shared by every subscriber.
 */
function receivedProperties(r: ReceivedMessage): PublishProperties | undefined {
  if (
    r.payloadFormatIndicator === undefined &&
    r.expiryMs === undefined &&
    r.contentType === undefined &&
    r.responseTopic === undefined &&
    r.correlationData === undefined &&
    r.userProperties === undefined
  )
    return undefined;
  return {
    payloadFormatIndicator: r.payloadFormatIndicator,
    // The interval left [MQTT-3.3.2-6]; the deliveries recompute it from expiresAt.
    messageExpiryInterval: r.expiryMs === undefined ? undefined : Math.ceil(r.expiryMs / 1000),
    contentType: r.contentType,
    responseTopic: r.responseTopic,
    correlationData: r.correlationData,
    userProperties: r.userProperties,
  };
}

const CONNECTIONS = resourceIndex('TotalConnections');

/** This node's figures for its heartbeat: broker-wide sums of the tenants' usage, and the last rate sample. */
function nodeLoad(usage: TenantUsage, rates: TenantRates): NodeLoad {
  let connections = 0;
  let sessions = 0;
  for (const [, state] of usage.states()) {
    connections += state.values[CONNECTIONS]!;
    sessions += state.counters[COUNTER.sessions]!;
  }
  const r = rates.broker();
  return { connections, sessions, msgInPerSec: r.messagesIn.perSecond, msgOutPerSec: r.messagesOut.perSecond };
}
