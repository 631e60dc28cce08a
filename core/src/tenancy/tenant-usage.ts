import type { Clock } from '../base/clock';
import { RESOURCE_TYPES, type ResourceType, type TenantUsageReader } from '@bifro/spi';

const RESOURCE_INDEX = new Map<ResourceType, number>(RESOURCE_TYPES.map((r, i) => [r, i]));
const IS_RATE = RESOURCE_TYPES.map((r) => r.endsWith('PerSecond'));

/** Index of a resource in {@link TenantState.values}. */
export function resourceIndex(resource: ResourceType): number {
  return RESOURCE_INDEX.get(resource)!;
}

/** Traffic counters per tenant, since the broker started (indices into {@link TenantState.counters}). */
export const COUNTER = {
  messagesIn: 0,
  bytesIn: 1,
  messagesOut: 2,
  bytesOut: 3,
  messagesDropped: 4,
  /** Live sessions, transient and persistent (a gauge). */
  sessions: 5,
  /** Message bytes (payload + topic) of the dropped deliveries counted by messagesDropped. */
  bytesDropped: 6,
  /** Deliveries dropped because a queued-bytes bound was reached (mqtt.maxQueuedBytesPerConnection, MaxTenantQueuedBytes). */
  queueBytesDropped: 7,
} as const;
const COUNTER_COUNT = 8;

/**
 * One tenant's usage. Hot paths (a connection's deliveries) keep a reference to it, so counting is
 * an array write without a map lookup.
 */
export class TenantState {
  /** Gauges and current one-second rate windows, indexed like RESOURCE_TYPES. */
  readonly values = new Float64Array(RESOURCE_TYPES.length);
  /** When each rate's current window started. */
  readonly windowStart = new Float64Array(RESOURCE_TYPES.length);
  /** Per rate, what its closed windows counted: with the current one, what it ever counted (cluster usage derives rates from it). */
  readonly closedWindows = new Float64Array(RESOURCE_TYPES.length);
  /** Traffic counters, indexed by {@link COUNTER}. */
  readonly counters = new Float64Array(COUNTER_COUNT);
  /** Negative throttler answers per resource, indexed like RESOURCE_TYPES; made at the first one. */
  refusals: Float64Array | undefined = undefined;
  /** A value or rate changed since the cluster's usage publisher last looked (set always: a field write is cheaper than a test). */
  changed = false;
  /** In cluster mode, the other live nodes' usage of the tenant summed (the same array, updated in place, while there is some). */
  remote: Float64Array | undefined = undefined;

  /** Count `amount` into the current one-second window of the rate at `index`. */
  countRate(index: number, amount: number, now: number): void {
    if (now - this.windowStart[index]! >= 1000) {
      this.windowStart[index] = now;
      // Folded at the roll, not per count: the hot path stays one add.
      this.closedWindows[index]! += this.values[index]!;
      this.values[index] = 0;
    }
    this.values[index]! += amount;
    this.changed = true;
  }

  /** Everything the rate at `index` ever counted. */
  counted(index: number): number {
    return this.closedWindows[index]! + this.values[index]!;
  }

  get(index: number, now: number): number {
    if (IS_RATE[index] && now - this.windowStart[index]! >= 1000) return 0;
    return this.values[index]!;
  }
}

/** What core knows of one tenant: the source for throttling, the admin API and metrics. */
export interface TenantMetrics {
  readonly connections: number;
  /** Live sessions, transient and persistent (disconnected persistent ones included). */
  readonly sessions: number;
  readonly persistentSessions: number;
  readonly transientSubscriptions: number;
  readonly persistentSubscriptions: number;
  readonly sharedSubscriptions: number;
  /** PUBLISH packets accepted from clients, and their payload bytes. */
  readonly messagesIn: number;
  readonly bytesIn: number;
  /** PUBLISH packets written to subscribers, and their bytes on the wire. */
  readonly messagesOut: number;
  readonly bytesOut: number;
  /** Deliveries dropped: queue full, expired, too large, quota, resends exhausted, fan-out caps. */
  readonly messagesDropped: number;
  /** Message bytes (payload + topic) of the dropped deliveries that were counted per delivery (not the fan-out caps). */
  readonly bytesDropped: number;
  /** Of messagesDropped: deliveries dropped by a queued-bytes bound (`queue-bytes`, `tenant-queue-bytes`). */
  readonly queueBytesDropped: number;
  readonly retainedMessages: number;
  readonly retainedBytes: number;
  /** Message bytes waiting in memory queues of transient sessions. */
  readonly sessionMemoryBytes: number;
  /** Message bytes appended to persistent inboxes by this process and not yet delivered. */
  readonly inboxBytes: number;
  /** Negative throttler answers (quota refusals), all resources together. */
  readonly quotaRefusals: number;
}

/**
 * Live usage per tenant: gauges (connections, subscriptions...), one-second rate windows
 * (connects per second, inbound bytes per second...) and traffic counters, in one
 * {@link TenantState} per tenant, so updates on hot paths are array writes.
 */
export class TenantUsage implements TenantUsageReader {
  private readonly tenants = new Map<string, TenantState>();
  /** In cluster mode, the other live nodes' usage per tenant, summed as their updates arrive (cluster/usage.ts). */
  private remote: ReadonlyMap<string, Float64Array> | undefined = undefined;

  /** `clock`: the broker's clock, rate windows are read against it. */
  constructor(private readonly clock: Clock = Date.now) {}

  /** This node's usage, plus the other nodes' in cluster mode: what quotas are checked against. */
  get(tenantId: string, resource: ResourceType): number {
    const index = RESOURCE_INDEX.get(resource)!;
    const state = this.tenants.get(tenantId);
    if (state !== undefined) {
      const local = state.get(index, this.clock());
      return state.remote === undefined ? local : local + state.remote[index]!;
    }
    return this.remote?.get(tenantId)?.[index] ?? 0;
  }

  /** Whether {@link get} adds the other nodes' usage (cluster mode). */
  get clusterWide(): boolean {
    return this.remote !== undefined;
  }

  /** Whether other live nodes report usage of the tenant (cluster mode). */
  usedElsewhere(tenantId: string): boolean {
    return this.remote?.has(tenantId) === true;
  }

  /** Cluster mode: {@link get} adds these sums (tenant → values indexed like RESOURCE_TYPES), kept up to date by their owner. */
  addRemote(sums: ReadonlyMap<string, Float64Array>): void {
    this.remote = sums;
    for (const [tenantId, state] of this.tenants) state.remote = sums.get(tenantId);
  }

  /** A tenant's entry in the remote sums appeared or went (its values change in place): linked to its state, so a read needs no second lookup. */
  remoteChanged(tenantId: string, sums: Float64Array | undefined): void {
    const state = this.tenants.get(tenantId);
    if (state !== undefined) state.remote = sums;
  }

  /** The tenant's state, created on first use. */
  state(tenantId: string): TenantState {
    let state = this.tenants.get(tenantId);
    if (state === undefined) {
      state = new TenantState();
      state.remote = this.remote?.get(tenantId);
      this.tenants.set(tenantId, state);
    }
    return state;
  }

  /** Add `delta` to a gauge. */
  add(tenantId: string, resource: ResourceType, delta: number): void {
    const state = this.state(tenantId);
    state.values[RESOURCE_INDEX.get(resource)!]! += delta;
    state.changed = true;
  }

  /** Set a gauge (e.g. from totals a store reports). */
  set(tenantId: string, resource: ResourceType, value: number): void {
    const state = this.state(tenantId);
    state.values[RESOURCE_INDEX.get(resource)!] = value;
    state.changed = true;
  }

  /** Count `amount` into the current one-second window of a rate. */
  count(tenantId: string, resource: ResourceType, amount: number, now: number): void {
    this.state(tenantId).countRate(RESOURCE_INDEX.get(resource)!, amount, now);
  }

  /** Add to a traffic counter. */
  bump(tenantId: string, counter: number, amount: number): void {
    this.state(tenantId).counters[counter]! += amount;
  }

  /** A negative answer of the throttler (a quota refusal) for the tenant's resource. */
  refused(tenantId: string, resource: ResourceType): void {
    const state = this.state(tenantId);
    (state.refusals ??= new Float64Array(RESOURCE_TYPES.length))[RESOURCE_INDEX.get(resource)!]!++;
  }

  /** Tenants with any recorded usage. */
  tenantIds(): IterableIterator<string> {
    return this.tenants.keys();
  }

  /** Tenants with any recorded usage and their state (read by scrapes and samplers, not written). */
  states(): IterableIterator<[string, TenantState]> {
    return this.tenants.entries();
  }

  /** The states alone, for samplers that sum every tenant (no entry tuple per tenant). */
  stateValues(): IterableIterator<TenantState> {
    return this.tenants.values();
  }

  /** The tenant's state, undefined when it has no recorded usage (nothing is created). */
  peek(tenantId: string): TenantState | undefined {
    return this.tenants.get(tenantId);
  }

  /** Number of tenants with recorded usage. */
  get tenantCount(): number {
    return this.tenants.size;
  }

  /** A snapshot of the tenant's metrics (all zero for a tenant never seen). */
  metrics(tenantId: string): TenantMetrics {
    const s = this.tenants.get(tenantId) ?? new TenantState();
    const v = (r: ResourceType): number => s.values[RESOURCE_INDEX.get(r)!]!;
    const c = s.counters;
    return {
      connections: v('TotalConnections'),
      sessions: c[COUNTER.sessions]!,
      persistentSessions: v('TotalPersistentSessions'),
      transientSubscriptions: v('TotalTransientSubscriptions'),
      persistentSubscriptions: v('TotalPersistentSubscriptions'),
      sharedSubscriptions: v('TotalSharedSubscriptions'),
      messagesIn: c[COUNTER.messagesIn]!,
      bytesIn: c[COUNTER.bytesIn]!,
      messagesOut: c[COUNTER.messagesOut]!,
      bytesOut: c[COUNTER.bytesOut]!,
      messagesDropped: c[COUNTER.messagesDropped]!,
      bytesDropped: c[COUNTER.bytesDropped]!,
      queueBytesDropped: c[COUNTER.queueBytesDropped]!,
      retainedMessages: v('TotalRetainTopics'),
      retainedBytes: v('TotalRetainedBytes'),
      sessionMemoryBytes: v('TotalSessionMemoryBytes'),
      inboxBytes: v('TotalPersistentSessionSpaceBytes'),
      quotaRefusals: s.refusals === undefined ? 0 : s.refusals.reduce((a, b) => a + b, 0),
    };
  }
}
