import type { FastifyInstance } from 'fastify';
import { collectDefaultMetrics, Counter, Gauge, Histogram, Registry } from 'prom-client';
import { RESOURCE_TYPES, type ResourceType } from '@bifro/spi';
import { DEFAULT_METRICS } from '../base/config-types';
import { LATENCY_BOUNDS_MS } from '../plugin-host/call-latency';
import { CORE_VERSION } from '../plugin-host/core-version';
import type { LoadedPluginInfo, PluginCallStats } from '../plugin-host/managers';
import { COUNTER, resourceIndex, type TenantState } from '../tenancy/tenant-usage';
import type { ApiContext } from './api-context';
import { LAG_RESOLUTION_MS, LagMonitor, type LagStats } from './event-loop-lag';
import { requireAdmin } from './api-auth';
import { topK } from './top-k';

/** Every metric name starts so (docs/metrics.md). */
export const METRIC_PREFIX = 'bifro_';
/** The `tenant` label of the tenants summed together, beyond `metrics.tenantLabels`. */
export const OTHER_TENANTS = '_other';

/** One figure of a tenant, read from its usage state at scrape time. */
interface Figure {
  /** Name after `bifro_` (broker-wide) or `bifro_tenant_` (per tenant). */
  readonly name: string;
  readonly type: 'gauge' | 'counter';
  readonly help: string;
  /** Extra label of this row (several rows share a name: subscriptions by kind). */
  readonly kind?: string;
  read(s: TenantState): number;
}

function value(r: ResourceType): (s: TenantState) => number {
  const i = resourceIndex(r);
  return (s) => s.values[i]!;
}
function counter(c: number): (s: TenantState) => number {
  return (s) => s.counters[c]!;
}

const SUBSCRIPTIONS_HELP = 'Subscriptions by kind (transient, persistent, shared).';
const FIGURES: readonly Figure[] = [
  { name: 'connections', type: 'gauge', help: 'MQTT connections past CONNACK.', read: value('TotalConnections') },
  {
    name: 'sessions',
    type: 'gauge',
    help: 'Live sessions, transient and persistent (disconnected persistent ones included).',
    read: counter(COUNTER.sessions),
  },
  {
    name: 'persistent_sessions',
    type: 'gauge',
    help: 'Persistent sessions (session expiry > 0).',
    read: value('TotalPersistentSessions'),
  },
  { name: 'subscriptions', type: 'gauge', help: SUBSCRIPTIONS_HELP, kind: 'transient', read: value('TotalTransientSubscriptions') },
  { name: 'subscriptions', type: 'gauge', help: SUBSCRIPTIONS_HELP, kind: 'persistent', read: value('TotalPersistentSubscriptions') },
  { name: 'subscriptions', type: 'gauge', help: SUBSCRIPTIONS_HELP, kind: 'shared', read: value('TotalSharedSubscriptions') },
  { name: 'messages_received_total', type: 'counter', help: 'PUBLISH packets accepted from clients.', read: counter(COUNTER.messagesIn) },
  {
    name: 'bytes_received_total',
    type: 'counter',
    help: 'Payload bytes of the PUBLISH packets accepted from clients.',
    read: counter(COUNTER.bytesIn),
  },
  { name: 'messages_sent_total', type: 'counter', help: 'PUBLISH packets written to subscribers.', read: counter(COUNTER.messagesOut) },
  {
    name: 'bytes_sent_total',
    type: 'counter',
    help: 'Bytes on the wire of the PUBLISH packets written to subscribers.',
    read: counter(COUNTER.bytesOut),
  },
  {
    name: 'messages_dropped_total',
    type: 'counter',
    help: 'Deliveries dropped: queue full, expired, too large, quota, resends exhausted, fan-out caps.',
    read: counter(COUNTER.messagesDropped),
  },
  {
    name: 'dropped_bytes_total',
    type: 'counter',
    help: 'Message bytes (payload + topic) of the dropped deliveries counted one by one.',
    read: counter(COUNTER.bytesDropped),
  },
  {
    name: 'queue_bytes_dropped_total',
    type: 'counter',
    help: 'Of the dropped deliveries: those dropped by a queued-bytes bound.',
    read: counter(COUNTER.queueBytesDropped),
  },
  { name: 'retained_messages', type: 'gauge', help: 'Retained messages.', read: value('TotalRetainTopics') },
  { name: 'retained_bytes', type: 'gauge', help: 'Bytes of the retained messages.', read: value('TotalRetainedBytes') },
  {
    name: 'session_memory_bytes',
    type: 'gauge',
    help: 'Message bytes queued in memory for transient sessions.',
    read: value('TotalSessionMemoryBytes'),
  },
  {
    name: 'inbox_bytes',
    type: 'gauge',
    help: 'Message bytes appended to persistent inboxes by this process and not yet delivered.',
    read: value('TotalPersistentSessionSpaceBytes'),
  },
];
const FIGURE_COUNT = FIGURES.length;
const REFUSALS_HELP = 'Negative throttler answers (quota refusals) by resource.';

/** One scrape's figures: per labelled tenant, `_other`, and the broker's sums. */
interface Snapshot {
  readonly tenants: number;
  readonly labelled: readonly { readonly tenant: string; readonly figures: Float64Array; readonly refusals: Float64Array }[];
  readonly broker: Float64Array;
  readonly brokerRefusals: Float64Array;
}

/**
 * Reads every tenant's usage once: the tenants labelled by `metrics.tenantLabels` keep their own
 * rows, every other tenant is summed into `_other`, so the scrape has at most `top + include + 1`
 * tenant label values however many tenants there are.
 */
function snapshot(ctx: ApiContext): Snapshot {
  const { top, include } = (ctx.config.metrics ?? DEFAULT_METRICS).tenantLabels;
  const usage = ctx.engine.usage;
  const connections = FIGURES[0]!.read;
  const included = new Set(include);
  const ranked = topK(
    (function* () {
      for (const entry of usage.states()) if (!included.has(entry[0])) yield entry;
    })(),
    top,
    ([aId, a], [bId, b]) => {
      const ca = connections(a);
      const cb = connections(b);
      return ca > cb || (ca === cb && aId < bId);
    },
  );
  const names = new Set<string>([...ranked.map(([id]) => id), ...include]);
  const broker = new Float64Array(FIGURE_COUNT);
  const brokerRefusals = new Float64Array(RESOURCE_TYPES.length);
  const other = { tenant: OTHER_TENANTS, figures: new Float64Array(FIGURE_COUNT), refusals: new Float64Array(RESOURCE_TYPES.length) };
  const own = new Map<string, { tenant: string; figures: Float64Array; refusals: Float64Array }>();
  for (const tenant of [...names].sort())
    own.set(tenant, { tenant, figures: new Float64Array(FIGURE_COUNT), refusals: new Float64Array(RESOURCE_TYPES.length) });
  let others = 0;
  for (const [tenantId, state] of usage.states()) {
    let row = own.get(tenantId);
    if (row === undefined) {
      row = other;
      others++;
    }
    for (let f = 0; f < FIGURE_COUNT; f++) {
      const v = FIGURES[f]!.read(state);
      row.figures[f]! += v;
      broker[f]! += v;
    }
    const refusals = state.refusals;
    if (refusals !== undefined)
      for (let r = 0; r < refusals.length; r++) {
        row.refusals[r]! += refusals[r]!;
        brokerRefusals[r]! += refusals[r]!;
      }
  }
  const labelled = [...own.values()];
  if (others > 0) labelled.push(other);
  return { tenants: usage.tenantCount, labelled, broker, brokerRefusals };
}

/** Process metrics (CPU, memory, handles, event-loop lag, GC) are the process's: collected once, shared by every broker in it. */
let processRegistry: Registry | undefined;

/**
 * prom-client's event-loop figures are replaced by {@link eventLoopMetrics}: its monitor counts the
 * timer's resolution into every delay and answers sentinels before its first sample. Its monitor
 * cannot be left out of the defaults, so it is set to fire once an hour instead of every 10 ms.
 */
const PROM_CLIENT_LAG_PRECISION_MS = 3_600_000;

function processMetrics(): Registry {
  if (processRegistry === undefined) {
    processRegistry = new Registry();
    // One set of collectors per process (a GC observer and the event-loop delay monitors): brokers
    // started and stopped in one process (tests) add none.
    collectDefaultMetrics({ register: processRegistry, prefix: METRIC_PREFIX, eventLoopMonitoringPrecision: PROM_CLIENT_LAG_PRECISION_MS });
    for (const name of EVENT_LOOP_METRICS) processRegistry.removeSingleMetric(`${METRIC_PREFIX}${name}`);
    eventLoopMetrics(processRegistry);
  }
  return processRegistry;
}

/** A gauge with one unlabelled value read at scrape time, or no value at all (`undefined`). */
class OptionalGauge extends Gauge {
  constructor(
    registry: Registry,
    private readonly metricName: string,
    private readonly metricHelp: string,
    private readonly read: () => Promise<number | undefined> | number | undefined,
  ) {
    super({ name: metricName, help: metricHelp, registers: [registry] });
  }

  /** What the registry renders: no sample at all when there is no value (rather than 0 or a sentinel). */
  async getForPromString(): Promise<{
    name: string;
    help: string;
    type: 'gauge';
    values: { labels: Record<string, string>; value: number }[];
    aggregator: 'average';
  }> {
    const value = await this.read();
    return {
      name: this.metricName,
      help: this.metricHelp,
      type: 'gauge',
      values: value === undefined ? [] : [{ labels: {}, value }],
      aggregator: 'average',
    };
  }
}

/** The event-loop figures, under prom-client's names (dashboards know them), after `bifro_`. */
const EVENT_LOOP_METRICS = [
  'nodejs_eventloop_lag_seconds',
  'nodejs_eventloop_lag_min_seconds',
  'nodejs_eventloop_lag_max_seconds',
  'nodejs_eventloop_lag_mean_seconds',
  'nodejs_eventloop_lag_stddev_seconds',
  'nodejs_eventloop_lag_p50_seconds',
  'nodejs_eventloop_lag_p90_seconds',
  'nodejs_eventloop_lag_p99_seconds',
] as const;
const LAG_FIGURES: readonly (readonly [name: string, stat: Exclude<keyof LagStats, 'count'>, what: string])[] = [
  ['min', 'minMs', 'The smallest'],
  ['max', 'maxMs', 'The largest'],
  ['mean', 'meanMs', 'The mean'],
  ['stddev', 'stddevMs', 'The standard deviation of the'],
  ['p50', 'p50Ms', 'The 50th percentile of the'],
  ['p90', 'p90Ms', 'The 90th percentile of the'],
  ['p99', 'p99Ms', 'The 99th percentile of the'],
];

/** How long a callback queued now (setImmediate) waits to run, in seconds. */
function immediateDelay(): Promise<number> {
  const start = process.hrtime.bigint();
  return new Promise((resolve) => setImmediate(() => resolve(Number(process.hrtime.bigint() - start) / 1e9)));
}

/**
 * The event loop's delay since the previous scrape, from a monitor sampling every 10 ms with that
 * resolution taken off (event-loop-lag.ts). Before the monitor's first sample (a scrape right
 * after start) the interval figures have no value: they are left out of the scrape.
 */
function eventLoopMetrics(registry: Registry): void {
  const monitor = new LagMonitor();
  monitor.start();
  let current: LagStats | undefined;
  // Registered first, so collected first: it takes the interval every other figure reads.
  new OptionalGauge(
    registry,
    `${METRIC_PREFIX}nodejs_eventloop_lag_seconds`,
    'Event loop lag at the scrape: how long a callback queued then (setImmediate) waited to run.',
    () => {
      current = monitor.take();
      return immediateDelay();
    },
  );
  for (const [name, stat, what] of LAG_FIGURES)
    new OptionalGauge(
      registry,
      `${METRIC_PREFIX}nodejs_eventloop_lag_${name}_seconds`,
      `${what} event loop delay since the previous scrape (the monitor's ${LAG_RESOLUTION_MS} ms resolution taken off; absent without a sample).`,
      () => (current === undefined ? undefined : current[stat] / 1000),
    );
}

/**
 * Plugin call latency as a Prometheus histogram, straight from the fixed buckets each guard
 * counts into (`plugin-host/call-latency.ts`): nothing is observed per call here.
 */
class PluginLatencyHistogram extends Histogram<'plugin' | 'kind'> {
  constructor(
    registry: Registry,
    private readonly plugins: readonly LoadedPluginInfo[],
  ) {
    super({
      name: `${METRIC_PREFIX}plugin_call_duration_seconds`,
      help: 'Duration of plugin calls (through their guard) by plugin and kind.',
      labelNames: ['plugin', 'kind'],
      buckets: LATENCY_BOUNDS_MS.map((ms) => ms / 1000),
      registers: [registry],
    });
  }

  /** What the registry renders (prom-client calls this one for the text format). */
  async getForPromString(): Promise<{
    name: string;
    help: string;
    type: 'histogram';
    values: { metricName: string; labels: Record<string, string | number>; value: number }[];
    aggregator: 'sum';
  }> {
    const name = `${METRIC_PREFIX}plugin_call_duration_seconds`;
    const values: { metricName: string; labels: Record<string, string | number>; value: number }[] = [];
    for (const p of this.plugins)
      for (const kind of p.kinds) {
        const stats = p.stats[kind];
        if (stats === undefined) continue;
        let cumulative = 0;
        for (let i = 0; i < stats.latency.length; i++) {
          cumulative += stats.latency[i]!;
          const le = i < LATENCY_BOUNDS_MS.length ? LATENCY_BOUNDS_MS[i]! / 1000 : '+Inf';
          values.push({ metricName: `${name}_bucket`, labels: { le, plugin: p.name, kind }, value: cumulative });
        }
        values.push({ metricName: `${name}_sum`, labels: { plugin: p.name, kind }, value: stats.totalMs / 1000 });
        values.push({ metricName: `${name}_count`, labels: { plugin: p.name, kind }, value: stats.calls });
      }
    return {
      name,
      help: 'Duration of plugin calls (through their guard) by plugin and kind.',
      type: 'histogram',
      values,
      aggregator: 'sum',
    };
  }
}

/** Sets one labelled value of a metric being collected. */
type Put = (labels: Record<string, string>, v: number) => void;

/**
 * A gauge or counter of `registry` whose values are all set at scrape time by `fill` (after a
 * reset, so label sets that went away do not linger).
 */
function scraped(
  registry: Registry,
  type: 'gauge' | 'counter',
  name: string,
  help: string,
  labelNames: readonly string[],
  fill: (put: Put) => void,
): void {
  const config = { name: `${METRIC_PREFIX}${name}`, help, labelNames, registers: [registry] };
  if (type === 'gauge')
    new Gauge({
      ...config,
      collect() {
        this.reset();
        fill((labels, v) => this.set(labels, v));
      },
    });
  else
    new Counter({
      ...config,
      collect() {
        this.reset();
        fill((labels, v) => this.inc(labels, v));
      },
    });
}

/**
 * The broker's metrics: one prom-client `Registry` per broker (never the global one: tests run
 * several brokers in one process). Every value is set at scrape time by the metrics' `collect()`
 * from counters the broker keeps anyway (tenant usage, plugin guards, connection gate), so the
 * MQTT path does no work for metrics.
 */
export function brokerRegistry(ctx: ApiContext): { registry: Registry; scrape(): Promise<string> } {
  const registry = new Registry();
  let current: Snapshot | undefined;
  const snap = (): Snapshot => (current ??= snapshot(ctx));
  const metric = (type: 'gauge' | 'counter', name: string, help: string, labelNames: readonly string[], fill: (put: Put) => void): void =>
    scraped(registry, type, name, help, labelNames, fill);

  const families = new Map<string, number[]>();
  FIGURES.forEach((f, i) => families.set(f.name, [...(families.get(f.name) ?? []), i]));
  for (const [name, rows] of families) {
    const first = FIGURES[rows[0]!]!;
    const kind = (i: number): Record<string, string> => (first.kind === undefined ? {} : { kind: FIGURES[i]!.kind! });
    const kindLabel = first.kind === undefined ? [] : ['kind'];
    metric(first.type, name, first.help, kindLabel, (put) => {
      const s = snap();
      for (const i of rows) put(kind(i), s.broker[i]!);
    });
    metric(
      first.type,
      `tenant_${name}`,
      `${first.help} Per tenant (bounded by metrics.tenantLabels; the rest under tenant="${OTHER_TENANTS}").`,
      ['tenant', ...kindLabel],
      (put) => {
        for (const t of snap().labelled) for (const i of rows) put({ tenant: t.tenant, ...kind(i) }, t.figures[i]!);
      },
    );
  }
  metric('counter', 'quota_refusals_total', REFUSALS_HELP, ['resource'], (put) => {
    const refusals = snap().brokerRefusals;
    RESOURCE_TYPES.forEach((resource, r) => put({ resource }, refusals[r]!));
  });
  metric(
    'counter',
    'tenant_quota_refusals_total',
    `${REFUSALS_HELP} Per tenant; only resources refused at least once.`,
    ['tenant', 'resource'],
    (put) => {
      for (const t of snap().labelled)
        RESOURCE_TYPES.forEach((resource, r) => {
          if (t.refusals[r]! > 0) put({ tenant: t.tenant, resource }, t.refusals[r]!);
        });
    },
  );
  metric('gauge', 'tenants', 'Tenants with recorded usage since the broker started.', [], (put) => put({}, snap().tenants));
  metric('gauge', 'open_connections', 'Open MQTT connections, before CONNACK included.', [], (put) => put({}, ctx.engine.connections.size));
  metric('gauge', 'uptime_seconds', "Seconds since the broker started (the broker's clock).", [], (put) =>
    put({}, Math.max(0, (ctx.clock() - ctx.startedAt) / 1000)),
  );
  metric('gauge', 'info', 'Always 1; the labels tell the version and the node id.', ['version', 'node'], (put) =>
    put({ version: CORE_VERSION, node: ctx.config.nodeId }, 1),
  );
  metric('gauge', 'cluster_nodes', 'Live cluster nodes this node knows of, itself included (1 when standalone).', [], (put) =>
    put({}, ctx.nodes.nodes().length),
  );
  metric('gauge', 'cluster_up', '1 while connected to NATS in cluster mode, else 0 (always 0 standalone).', [], (put) =>
    put({}, ctx.nodes.connected() ? 1 : 0),
  );
  metric(
    'counter',
    'cluster_forwarded_messages_total',
    'Messages forwarded to other nodes, one per message per destination node.',
    [],
    (put) => put({}, ctx.nodes.traffic().forwarded),
  );
  metric('counter', 'cluster_received_messages_total', 'Messages other nodes forwarded to this one.', [], (put) =>
    put({}, ctx.nodes.traffic().received),
  );
  metric(
    'counter',
    'cluster_forward_failures_total',
    'Forwarded messages their destination did not confirm (no reply in time, NATS away, refused or malformed).',
    [],
    (put) => put({}, ctx.nodes.traffic().forwardFailures),
  );
  metric(
    'counter',
    'cluster_routes_mended_total',
    "This node's routes written again because they were missing from the bucket: deleted by a node that took this one for departed, or found missing by the periodic reconcile.",
    [],
    (put) => put({}, ctx.nodes.traffic().routesMended),
  );
  metric(
    'gauge',
    'cluster_lease_held',
    '1 while this node holds its lease (NATS accepted a heartbeat of it within 7 s) and serves sessions; 0 while it does not.',
    [],
    (put) => put({}, ctx.nodes.traffic().leaseHeld ? 1 : 0),
  );
  metric(
    'gauge',
    'cluster_routes_confirmed',
    "1 while this node's route table is confirmed current; 0 after a NATS outage, a new watch or a lapsed lease until it is (QoS 1/2 publishes are refused meanwhile).",
    [],
    (put) => put({}, ctx.nodes.traffic().routesConfirmed ? 1 : 0),
  );
  metric(
    'counter',
    'cluster_unconfirmed_refused_total',
    'QoS 1/2 publishes refused because the route table was not confirmed current.',
    [],
    (put) => put({}, ctx.nodes.traffic().unconfirmedRefused),
  );
  metric('gauge', 'cluster_routes', 'Routes of other nodes this node knows of, one per (node, tenant, filter).', [], (put) =>
    put({}, ctx.nodes.traffic().routes),
  );
  metric('gauge', 'cluster_draining', '1 while this node drains (POST /api/v1/nodes/self/drain), else 0.', [], (put) =>
    put({}, ctx.drain?.draining === true ? 1 : 0),
  );
  metric(
    'counter',
    'cluster_drain_redirects_total',
    'Clients a drain sent to another node: CONNECTs refused with 0x9C and connections moved off.',
    [],
    (put) => put({}, ctx.drain?.redirected ?? 0),
  );
  const gate = ctx.engine.gate;
  metric(
    'counter',
    'connection_rate_refused_total',
    'Connections closed at accept by the per-address rate limit (security.connectionRate).',
    [],
    (put) => put({}, gate.rateRefused),
  );
  metric('counter', 'flapping_bans_total', 'Flapping bans begun (security.flapping).', [], (put) => put({}, gate.flappingBans));
  metric('counter', 'banned_connects_refused_total', 'CONNECTs refused because their client id was banned for flapping.', [], (put) =>
    put({}, gate.bannedRefused),
  );
  const bans = ctx.engine.bans;
  metric('gauge', 'bans', 'Bans set through the admin API and held now (ended ones not yet pruned included).', [], (put) =>
    put({}, bans.size),
  );
  metric('counter', 'ban_refusals_total', 'CONNECTs refused by a ban set through the admin API (CONNACK 0x8A, v3 0x05).', [], (put) =>
    put({}, bans.refused),
  );
  const storage = ctx.engine.storageHealth;
  metric('gauge', 'storage_up', '1 while storage calls work (and the storage says it can serve), 0 during a failure episode.', [], (put) =>
    put({}, storage.health().ok ? 1 : 0),
  );
  metric(
    'counter',
    'storage_failed_calls_total',
    'Storage calls that failed, by call (inbox append, session save, retained put...).',
    ['call'],
    (put) => {
      for (const [call, n] of storage.failedCalls) put({ call }, n);
    },
  );
  metric('counter', 'storage_failure_episodes_total', 'Episodes of failing storage calls (each logged once, at error).', [], (put) =>
    put({}, storage.episodes),
  );
  metric(
    'counter',
    'storage_refused_messages_total',
    'QoS 1/2 publishes refused (v5 0x80, v3 disconnected) because a storage write they needed failed.',
    [],
    (put) => put({}, storage.refusedMessages),
  );
  const perPlugin = (name: string, help: string, read: (s: PluginCallStats) => number): void =>
    metric('counter', name, help, ['plugin', 'kind'], (put) => {
      for (const p of ctx.plugins)
        for (const kind of p.kinds) {
          const stats = p.stats[kind];
          if (stats !== undefined) put({ plugin: p.name, kind }, read(stats));
        }
    });
  perPlugin('plugin_calls_total', 'Plugin calls through their guard, by plugin and kind.', (s) => s.calls);
  perPlugin('plugin_call_failures_total', 'Plugin calls that threw, timed out or answered something invalid.', (s) => s.failures);
  perPlugin('plugin_call_timeouts_total', 'Plugin calls without an answer within plugins.callTimeoutMs.', (s) => s.timeouts);
  new PluginLatencyHistogram(registry, ctx.plugins);

  return {
    registry,
    async scrape() {
      current = undefined;
      // Every collect runs synchronously when metrics() starts: one snapshot serves them all.
      const [broker, proc] = await Promise.all([registry.metrics(), processMetrics().metrics()]);
      current = undefined;
      return `${broker}\n${proc}`;
    },
  };
}

/** `GET /metrics`: Prometheus text format (admin token). */
export function metricsRoutes(app: FastifyInstance, ctx: ApiContext): void {
  const metrics = brokerRegistry(ctx);
  app.get(
    '/metrics',
    {
      schema: {
        tags: ['metrics'],
        summary: 'Prometheus metrics',
        description:
          'Broker-wide and per-tenant figures, plugin call latency, process metrics, in the Prometheus text format (docs/metrics.md).',
        response: {
          200: {
            description: 'Prometheus text format 0.0.4.',
            content: { [Registry.PROMETHEUS_CONTENT_TYPE]: { schema: { type: 'string' } } },
          },
          401: { $ref: 'ApiError#' },
          403: { $ref: 'ApiError#' },
        },
      },
    },
    async (request, reply) => {
      requireAdmin(request);
      const text = await metrics.scrape();
      return reply.type(Registry.PROMETHEUS_CONTENT_TYPE).send(text);
    },
  );
}
