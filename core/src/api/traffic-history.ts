import type { Clock } from '../base/clock';
import { COUNTER, resourceIndex, type TenantUsage } from '../tenancy/tenant-usage';
import { LagMonitor } from './event-loop-lag';

/** One point every 2 s: the dashboard's plots move at this pace. */
export const HISTORY_SAMPLE_MS = 2000;
/** 15 minutes of points. */
export const HISTORY_POINTS = 450;
/** Tenants whose own series are kept at once (the dashboard's tenant pages being looked at). */
export const MAX_WATCHED_TENANTS = 64;
/** A tenant's series stops being kept when nobody asked for it for this long. */
export const WATCH_IDLE_MS = 15 * 60_000;

/** The series of a history, in the order of its rings. */
export const HISTORY_SERIES = ['messagesIn', 'messagesOut', 'connections', 'dropped', 'eventLoopLagMs'] as const;
export type HistorySeries = (typeof HISTORY_SERIES)[number];
const IN = 0;
const OUT = 1;
const CONNECTIONS = 2;
const DROPPED = 3;
const LAG = 4;
const SERIES = HISTORY_SERIES.length;
const CONNECTIONS_INDEX = resourceIndex('TotalConnections');

/** The points after a time, as the history routes answer them: one array per series, `t` in ms since the epoch. */
export interface HistoryPoints {
  readonly sampleMs: number;
  readonly t: number[];
  /** The broker's history has every series; a tenant's has no `eventLoopLagMs`. */
  readonly series: Partial<Record<HistorySeries, number[]>>;
}

/**
 * The last {@link HISTORY_POINTS} samples of a few series, in fixed rings (no allocation per
 * sample). Rates are per second over the sample, from the counters TenantUsage keeps anyway.
 */
class Rings {
  private readonly times = new Float64Array(HISTORY_POINTS);
  private readonly values = new Float64Array(HISTORY_POINTS * SERIES);
  private next = 0;
  private size = 0;
  /** The counters at the last sample (messages in, out, dropped), for the rates. */
  readonly last = new Float64Array(3);

  push(t: number, row: Float64Array): void {
    this.times[this.next] = t;
    this.values.set(row, this.next * SERIES);
    this.next = (this.next + 1) % HISTORY_POINTS;
    this.size = Math.min(HISTORY_POINTS, this.size + 1);
  }

  after(since: number, series: readonly number[]): HistoryPoints {
    const t: number[] = [];
    const out: Partial<Record<HistorySeries, number[]>> = {};
    for (const s of series) out[HISTORY_SERIES[s]!] = [];
    for (let k = 0; k < this.size; k++) {
      const i = (this.next - this.size + k + HISTORY_POINTS) % HISTORY_POINTS;
      if (this.times[i]! <= since) continue;
      t.push(this.times[i]!);
      for (const s of series) out[HISTORY_SERIES[s]!]!.push(this.values[i * SERIES + s]!);
    }
    return { sampleMs: HISTORY_SAMPLE_MS, t, series: out };
  }
}

interface Watched {
  readonly rings: Rings;
  lastAsked: number;
}

const BROKER_SERIES = [IN, OUT, CONNECTIONS, DROPPED, LAG];
/** A tenant's page shows its traffic; the event loop is the broker's. */
const TENANT_SERIES = [IN, OUT, CONNECTIONS, DROPPED];

/**
 * The last 15 minutes of the broker's traffic, connections, dropped deliveries and event-loop lag,
 * for the dashboard's live plots (`GET /api/v1/history`). The broker's series are always kept; a
 * tenant's own series from the first time it is asked for, for up to {@link MAX_WATCHED_TENANTS}
 * tenants at once (keeping every tenant's would cost memory per tenant for pages nobody opens).
 * A sample walks the tenants once, like the rates' sampler does every 5 s.
 */
export class TrafficHistory {
  private readonly broker = new Rings();
  private readonly watched = new Map<string, Watched>();
  private readonly row = new Float64Array(SERIES);
  private readonly lag = new LagMonitor();
  private timer: NodeJS.Timeout | undefined;

  constructor(
    private readonly usage: TenantUsage,
    private readonly clock: Clock,
  ) {}

  start(): void {
    if (this.timer !== undefined) return;
    this.lag.start();
    this.readCounters(this.broker, undefined);
    this.timer = setInterval(() => this.sample(), HISTORY_SAMPLE_MS);
    this.timer.unref();
  }

  stop(): void {
    clearInterval(this.timer);
    this.timer = undefined;
    this.lag.stop();
  }

  /** The broker's points after `since` (ms since the epoch; 0 for all 15 minutes). */
  brokerAfter(since: number): HistoryPoints {
    return this.broker.after(since, BROKER_SERIES);
  }

  /** The tenant's points after `since`; its series starts now if nobody asked for it lately. */
  tenantAfter(tenantId: string, since: number): HistoryPoints {
    const now = this.clock();
    let w = this.watched.get(tenantId);
    if (w === undefined) {
      if (this.watched.size >= MAX_WATCHED_TENANTS) this.forgetLeastAsked();
      w = { rings: new Rings(), lastAsked: now };
      this.readCounters(w.rings, tenantId);
      this.watched.set(tenantId, w);
    }
    w.lastAsked = now;
    return w.rings.after(since, TENANT_SERIES);
  }

  /** Take one point of every kept series at `now` (the timer calls it every 2 s; tests may too). */
  sample(now = this.clock()): void {
    const dt = HISTORY_SAMPLE_MS / 1000;
    let inSum = 0;
    let outSum = 0;
    let droppedSum = 0;
    let connections = 0;
    for (const state of this.usage.stateValues()) {
      inSum += state.counters[COUNTER.messagesIn]!;
      outSum += state.counters[COUNTER.messagesOut]!;
      droppedSum += state.counters[COUNTER.messagesDropped]!;
      connections += state.values[CONNECTIONS_INDEX]!;
    }
    const row = this.row;
    this.rates(this.broker, inSum, outSum, droppedSum, dt);
    row[CONNECTIONS] = connections;
    // p99 of the loop's delay over the sample, in ms, the monitor's own resolution taken off (0: no sample).
    row[LAG] = this.lag.take()?.p99Ms ?? 0;
    this.broker.push(now, row);

    for (const [tenantId, w] of this.watched) {
      if (now - w.lastAsked > WATCH_IDLE_MS) {
        this.watched.delete(tenantId);
        continue;
      }
      const state = this.usage.peek(tenantId);
      const c = state?.counters;
      this.rates(w.rings, c?.[COUNTER.messagesIn] ?? 0, c?.[COUNTER.messagesOut] ?? 0, c?.[COUNTER.messagesDropped] ?? 0, dt);
      row[CONNECTIONS] = state?.values[CONNECTIONS_INDEX] ?? 0;
      row[LAG] = 0;
      w.rings.push(now, row);
    }
  }

  /** Writes the per-second rates since the last sample into the row, and remembers the counters. */
  private rates(rings: Rings, inSum: number, outSum: number, droppedSum: number, dt: number): void {
    const last = rings.last;
    this.row[IN] = Math.max(0, inSum - last[0]!) / dt;
    this.row[OUT] = Math.max(0, outSum - last[1]!) / dt;
    this.row[DROPPED] = Math.max(0, droppedSum - last[2]!) / dt;
    last[0] = inSum;
    last[1] = outSum;
    last[2] = droppedSum;
  }

  /** The counters as they are now: the base of a series' first rates. */
  private readCounters(rings: Rings, tenantId: string | undefined): void {
    let inSum = 0;
    let outSum = 0;
    let droppedSum = 0;
    const states = tenantId === undefined ? this.usage.stateValues() : [this.usage.peek(tenantId)];
    for (const state of states) {
      if (state === undefined) continue;
      inSum += state.counters[COUNTER.messagesIn]!;
      outSum += state.counters[COUNTER.messagesOut]!;
      droppedSum += state.counters[COUNTER.messagesDropped]!;
    }
    rings.last.set([inSum, outSum, droppedSum]);
  }

  private forgetLeastAsked(): void {
    let oldest: string | undefined;
    let oldestAt = Infinity;
    for (const [id, w] of this.watched)
      if (w.lastAsked < oldestAt) {
        oldest = id;
        oldestAt = w.lastAsked;
      }
    if (oldest !== undefined) this.watched.delete(oldest);
  }
}
