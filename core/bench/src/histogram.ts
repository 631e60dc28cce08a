/**
 * A latency histogram in whole microseconds with a fixed memory footprint: exact below 128 µs,
 * then 64 buckets per doubling (at most 1.6 % error) up to about 35 minutes. Histograms of
 * several workers merge by adding their counts.
 */

const LINEAR = 128;
const SUB = 64;
/** Largest value recorded (µs); larger ones count as this. */
const MAX_US = 0x7fffffff;
const BUCKETS = LINEAR + (31 - 7) * SUB;

function bucketOf(us: number): number {
  if (us < LINEAR) return us;
  const exp = 31 - Math.clz32(us);
  const shift = exp - 6;
  return LINEAR + (exp - 7) * SUB + ((us >>> shift) - SUB);
}

/** Middle of a bucket's range (µs). */
function bucketMiddle(index: number): number {
  if (index < LINEAR) return index;
  const k = index - LINEAR;
  const shift = Math.floor(k / SUB) + 1;
  const low = (SUB + (k % SUB)) * 2 ** shift;
  return low + (2 ** shift - 1) / 2;
}

/** What a histogram says, in milliseconds. */
export interface LatencySummary {
  readonly count: number;
  readonly minMs: number;
  readonly meanMs: number;
  readonly p50Ms: number;
  readonly p90Ms: number;
  readonly p99Ms: number;
  readonly p999Ms: number;
  readonly maxMs: number;
}

/** The plain-data form sent between threads. */
export interface HistogramData {
  readonly counts: Float64Array;
  readonly count: number;
  readonly sumUs: number;
  readonly minUs: number;
  readonly maxUs: number;
}

export class Histogram {
  private counts = new Float64Array(BUCKETS);
  count = 0;
  private sumUs = 0;
  private minUs = Number.POSITIVE_INFINITY;
  private maxUs = 0;

  /** Records one value in microseconds (negative values count as 0). */
  record(us: number): void {
    const v = us <= 0 ? 0 : us >= MAX_US ? MAX_US : us;
    this.counts[bucketOf(Math.floor(v))]!++;
    this.count++;
    this.sumUs += v;
    if (v < this.minUs) this.minUs = v;
    if (v > this.maxUs) this.maxUs = v;
  }

  merge(other: HistogramData): void {
    for (let i = 0; i < BUCKETS; i++) this.counts[i]! += other.counts[i] ?? 0;
    this.count += other.count;
    this.sumUs += other.sumUs;
    if (other.minUs < this.minUs) this.minUs = other.minUs;
    if (other.maxUs > this.maxUs) this.maxUs = other.maxUs;
  }

  data(): HistogramData {
    return { counts: this.counts, count: this.count, sumUs: this.sumUs, minUs: this.minUs, maxUs: this.maxUs };
  }

  /** The q-quantile (0..1) in µs, within the recorded min and max; NaN when empty. */
  quantile(q: number): number {
    if (this.count === 0) return Number.NaN;
    const rank = Math.max(1, Math.ceil(q * this.count));
    let seen = 0;
    for (let i = 0; i < BUCKETS; i++) {
      seen += this.counts[i]!;
      if (seen >= rank) return Math.min(this.maxUs, Math.max(this.minUs, bucketMiddle(i)));
    }
    return this.maxUs;
  }

  summary(): LatencySummary {
    const ms = (us: number): number => us / 1000;
    const empty = this.count === 0;
    return {
      count: this.count,
      minMs: empty ? Number.NaN : ms(this.minUs),
      meanMs: empty ? Number.NaN : ms(this.sumUs / this.count),
      p50Ms: ms(this.quantile(0.5)),
      p90Ms: ms(this.quantile(0.9)),
      p99Ms: ms(this.quantile(0.99)),
      p999Ms: ms(this.quantile(0.999)),
      maxMs: empty ? Number.NaN : ms(this.maxUs),
    };
  }
}
