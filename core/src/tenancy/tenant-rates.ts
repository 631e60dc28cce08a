import type { Clock } from '../base/clock';
import { COUNTER, type TenantUsage } from './tenant-usage';

/** How often the traffic counters are sampled. */
export const RATE_SAMPLE_MS = 5000;

/** The traffic series sampled, in the order of a {@link RateState}'s slots. */
export const RATE_SERIES = ['messagesIn', 'messagesOut', 'bytesIn', 'bytesOut'] as const;
export type RateSeries = (typeof RATE_SERIES)[number];
const SERIES_COUNTER = [COUNTER.messagesIn, COUNTER.messagesOut, COUNTER.bytesIn, COUNTER.bytesOut] as const;
const SERIES = RATE_SERIES.length;

/** The load averages kept: over 1, 5 and 15 minutes, like mosquitto's `$SYS/broker/load/.../1min`. */
export const LOAD_WINDOWS = ['1m', '5m', '15m'] as const;
export type LoadWindow = (typeof LOAD_WINDOWS)[number];
const WINDOW_SECONDS = [60, 300, 900] as const;

/** What the sampler needs of the timer wheel (`session/timer-wheel.ts`, a room above this one). */
export interface SampleWheel {
  readonly clock: Clock;
  schedule(entry: SampleEntry, deadline: number): void;
  cancel(entry: SampleEntry): void;
}
export interface SampleEntry {
  wheelSlot: number;
  onWheelTick(now: number): number;
}

/**
 * One sampled series set: per series the counter at the last sample, the rate over the last
 * sample and the three load averages, all per second. One array, so a tenant costs one object.
 */
const PREV = 0;
const RATE = SERIES;
const LOAD = 2 * SERIES;
const SLOTS = 2 * SERIES + SERIES * LOAD_WINDOWS.length;

/** A tenant's (or the broker's) traffic rates, per second. */
export interface TrafficRate {
  /** Over the last sample (about {@link RATE_SAMPLE_MS}). */
  readonly perSecond: number;
  /** Exponentially weighted averages over 1, 5 and 15 minutes. */
  readonly load1m: number;
  readonly load5m: number;
  readonly load15m: number;
}
export type TrafficRates = Readonly<Record<RateSeries, TrafficRate>>;

/**
 * Messages and bytes per second in and out, per tenant and for the broker, with 1/5/15-minute
 * load averages. Every {@link RATE_SAMPLE_MS} (on the broker's timer wheel and clock) it reads the
 * traffic counters {@link TenantUsage} keeps anyway: nothing is added to the message path. A load
 * average moves like mosquitto's: `load = rate + e^(-dt/window) × (load - rate)`.
 */
export class TenantRates implements SampleEntry {
  wheelSlot = -1;
  private readonly tenants = new Map<string, Float64Array>();
  private readonly total = new Float64Array(SLOTS);
  private readonly sums = new Float64Array(SERIES);
  private lastSample = 0;
  private nextSample = 0;
  private running = false;

  constructor(
    private readonly usage: TenantUsage,
    private readonly wheel: SampleWheel,
  ) {}

  /** Start sampling: the counters as they are now are the base of the first rates. */
  start(): void {
    if (this.running) return;
    this.running = true;
    const now = this.wheel.clock();
    this.lastSample = now;
    this.sums.fill(0);
    for (const [tenantId, state] of this.usage.states()) {
      const slots = this.slotsOf(tenantId);
      for (let s = 0; s < SERIES; s++) {
        slots[PREV + s] = state.counters[SERIES_COUNTER[s]]!;
        this.sums[s]! += slots[PREV + s]!;
      }
    }
    for (let s = 0; s < SERIES; s++) this.total[PREV + s] = this.sums[s]!;
    this.nextSample = now + RATE_SAMPLE_MS;
    this.wheel.schedule(this, this.nextSample);
  }

  stop(): void {
    this.running = false;
    this.wheel.cancel(this);
  }

  onWheelTick(now: number): number {
    if (!this.running) return 0;
    if (now < this.nextSample) return this.nextSample;
    this.sample(now);
    this.nextSample = now + RATE_SAMPLE_MS;
    return this.nextSample;
  }

  /** Read every tenant's counters at `now` and update the rates (the wheel calls it; tests may too). */
  sample(now: number): void {
    const dt = (now - this.lastSample) / 1000;
    if (dt <= 0) return;
    this.lastSample = now;
    const decay = WINDOW_SECONDS.map((w) => Math.exp(-dt / w));
    this.sums.fill(0);
    for (const [tenantId, state] of this.usage.states()) {
      const slots = this.slotsOf(tenantId);
      for (let s = 0; s < SERIES; s++) {
        const value = state.counters[SERIES_COUNTER[s]]!;
        this.sums[s]! += value;
        advance(slots, s, value, dt, decay);
      }
    }
    for (let s = 0; s < SERIES; s++) advance(this.total, s, this.sums[s]!, dt, decay);
  }

  /** The tenant's rates (all 0 for a tenant not sampled yet). */
  of(tenantId: string): TrafficRates {
    return figures(this.tenants.get(tenantId));
  }

  /** The broker's rates: every tenant together. */
  broker(): TrafficRates {
    return figures(this.total);
  }

  /** One figure of the tenant: the rate over the last sample (`window` undefined) or a load average. Per second. */
  rate(tenantId: string, series: RateSeries, window?: LoadWindow): number {
    const slots = this.tenants.get(tenantId);
    return slots === undefined ? 0 : read(slots, RATE_SERIES.indexOf(series), window);
  }

  private slotsOf(tenantId: string): Float64Array {
    let slots = this.tenants.get(tenantId);
    if (slots === undefined) {
      // A tenant first seen since the last sample: its counters started at 0 when it was.
      slots = new Float64Array(SLOTS);
      this.tenants.set(tenantId, slots);
    }
    return slots;
  }
}

function advance(slots: Float64Array, s: number, value: number, dt: number, decay: readonly number[]): void {
  const rate = Math.max(0, value - slots[PREV + s]!) / dt;
  slots[PREV + s] = value;
  slots[RATE + s] = rate;
  for (let w = 0; w < decay.length; w++) {
    const i = LOAD + s * LOAD_WINDOWS.length + w;
    slots[i] = rate + decay[w]! * (slots[i]! - rate);
  }
}

function read(slots: Float64Array, s: number, window: LoadWindow | undefined): number {
  if (window === undefined) return slots[RATE + s]!;
  return slots[LOAD + s * LOAD_WINDOWS.length + LOAD_WINDOWS.indexOf(window)]!;
}

function figures(slots: Float64Array | undefined): TrafficRates {
  const one = (s: number): TrafficRate =>
    slots === undefined
      ? { perSecond: 0, load1m: 0, load5m: 0, load15m: 0 }
      : {
          perSecond: read(slots, s, undefined),
          load1m: read(slots, s, '1m'),
          load5m: read(slots, s, '5m'),
          load15m: read(slots, s, '15m'),
        };
  return { messagesIn: one(0), messagesOut: one(1), bytesIn: one(2), bytesOut: one(3) };
}
