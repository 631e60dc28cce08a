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
import { RetainService } from '../retain/retain-service';
import type { Session } from '../session/session';
import { SessionPersistence } from '../session/session-persistence';
import type { WorkerRouter } from '../workers/handover';
import type { Topology } from '../broker/topology';
import { StandaloneTopology } from '../topology/standalone';
import { WorkerTopology } from '../topology/workers';
import { ClusterTopology } from '../topology/cluster';
import { DATA_DIR_MODE, isLoopbackHost, secureDataDir } from '../security/secure-defaults';
import { describeError } from '../base/errors';
import type { Clock } from '../base/clock';
import type { ApiContext, BrokerState } from '../api/api-context';
import { startApi, type RunningApi } from '../api/api-server';
import type { ClusterView, NodeLoad } from '../cluster/cluster-view';
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

  // Where this broker stands (D37): built before the engine, which receives it.
  const topology: Topology & { bind(engine: Engine): void } =
    drain !== undefined
      ? new ClusterTopology({
          config,
          logger,
          clock,
          router: clusterRouter!,
          drain,
          storage: host.storage,
          storageName: host.plugins.find((p) => p.kinds.includes('storage'))?.name,
        })
      : options.worker !== undefined
        ? new WorkerTopology(config, clock, options.worker)
        : new StandaloneTopology(config, clock);
  container.register(RUNTIME_TOKENS.Topology, { useValue: topology });
  // The object graph, built once: the engine (with the services it composes) and the server over it.
  container.registerSingleton(RetainService);
  container.registerSingleton(SessionPersistence);
  container.registerSingleton(Engine);
  container.registerSingleton(MqttServer);
  const engine = container.resolve(Engine);
  topology.bind(engine);
  const server = container.resolve(MqttServer);
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
  let started = false;
  try {
    const restored = await topology.restore();
    if (restored > 0) logger.info({ sessions: restored }, `restored ${restored} persistent sessions`);
    // Bans are in force before the first CONNECT is read.
    await engine.bans.load();
    bound = await server.listen();
    engine.redirects.start();
    if (config.api !== undefined || config.sysInterval > 0 || config.cluster !== undefined) rates.start();
    sys.start();
    // After storage and listeners: a cluster node's heartbeat names the listeners as bound.
    const nodes: ClusterView = topology.start({ bound, startedAt, load: () => nodeLoad(usage, rates) });
    started = true;
    if (config.api !== undefined) api = await startApi({ ...apiContext, nodes }, config.api);
  } catch (err) {
    if (started) await topology.stop();
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
        // A cluster node stops forwarding, the others drop it at once (its key deleted), then the NATS connection drains.
        await topology.stop();
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
