import { monitorEventLoopDelay, type IntervalHistogram, type RecordableHistogram } from 'node:perf_hooks';

/**
 * How often the monitor's timer fires, in ms. Each sample it records is the time between two
 * firings: this resolution plus the delay the loop added, so the resolution is taken off again.
 */
export const LAG_RESOLUTION_MS = 10;
const RESOLUTION_NS = LAG_RESOLUTION_MS * 1e6;

/** The event loop's delay over one interval, in ms (the resolution taken off, never below 0). */
export interface LagStats {
  /** Samples in the interval: one per firing of the monitor's timer. */
  readonly count: number;
  readonly minMs: number;
  readonly maxMs: number;
  readonly meanMs: number;
  readonly stddevMs: number;
  readonly p50Ms: number;
  readonly p90Ms: number;
  readonly p99Ms: number;
}

/** What a lag monitor reads: perf_hooks' interval histogram, or a recordable one tests fill. */
type DelayHistogram = Pick<RecordableHistogram, 'count' | 'min' | 'max' | 'mean' | 'stddev' | 'percentile' | 'reset'>;

/**
 * The event loop's delay, interval by interval: each {@link take} summarises the delays since the
 * previous one and starts a new interval. The raw histogram is not read directly because its
 * figures are not delays: every sample includes the timer's own {@link LAG_RESOLUTION_MS} (an idle
 * loop read 11.6 ms at p99 for a real 1.6 ms), and before its first sample it holds sentinels
 * (min 9223372036854775807 ns, mean and stddev NaN). An interval without a sample answers
 * `undefined`: no figure rather than a made-up one.
 */
export class LagMonitor {
  private readonly histogram: DelayHistogram;
  /** The perf_hooks monitor, whose timer start and stop turn on and off. */
  private readonly monitor: IntervalHistogram | undefined;

  /** `recorded` is for tests: a histogram they record delays into, instead of a running monitor. */
  constructor(recorded?: RecordableHistogram) {
    this.monitor = recorded === undefined ? monitorEventLoopDelay({ resolution: LAG_RESOLUTION_MS }) : undefined;
    this.histogram = recorded ?? this.monitor!;
  }

  /** Starts the monitor's timer (one firing every {@link LAG_RESOLUTION_MS}); a new interval begins. */
  start(): void {
    this.monitor?.enable();
    this.histogram.reset();
  }

  /** Stops the timer: nothing keeps running. */
  stop(): void {
    this.monitor?.disable();
  }

  /** The delays since the previous take (or start), then a new interval; `undefined` without a sample. */
  take(): LagStats | undefined {
    const h = this.histogram;
    const count = h.count;
    if (count === 0) {
      h.reset();
      return undefined;
    }
    const ms = (ns: number): number => Math.max(0, ns - RESOLUTION_NS) / 1e6;
    const stats: LagStats = {
      count,
      minMs: ms(h.min),
      maxMs: ms(h.max),
      meanMs: ms(h.mean),
      // A spread: the constant resolution does not change it.
      stddevMs: Number.isFinite(h.stddev) ? h.stddev / 1e6 : 0,
      p50Ms: ms(h.percentile(50)),
      p90Ms: ms(h.percentile(90)),
      p99Ms: ms(h.percentile(99)),
    };
    h.reset();
    return stats;
  }
}
