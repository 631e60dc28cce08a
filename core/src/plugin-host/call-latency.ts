/**
 * Plugin call latency in fixed buckets: one array increment per call, no allocation, and the
 * same counts serve the Prometheus histogram (`bifro_plugin_call_duration_seconds`) and the
 * percentiles of `GET /api/v1/plugins` (docs/metrics.md).
 */

/**
 * Upper bounds of the buckets, milliseconds (a call of exactly a bound falls in its bucket, as
 * Prometheus' `le` says). A bucket past the last bound counts slower calls (`+Inf`).
 */
export const LATENCY_BOUNDS_MS: readonly number[] = [0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 25, 50, 100, 250, 500, 1000, 2500, 5000, 10000];

/** Buckets of a latency histogram: one per bound, and the `+Inf` one. */
export const LATENCY_BUCKETS = LATENCY_BOUNDS_MS.length + 1;

/** Empty bucket counts for {@link recordLatency}. */
export function latencyBuckets(): Float64Array {
  return new Float64Array(LATENCY_BUCKETS);
}

/** Count one call of `ms` milliseconds. Most calls are fast, so the scan usually stops at once. */
export function recordLatency(buckets: Float64Array, ms: number): void {
  const bounds = LATENCY_BOUNDS_MS;
  let i = 0;
  while (i < bounds.length && ms > bounds[i]!) i++;
  buckets[i]!++;
}

/**
 * The `q` quantile (0..1) of the counted calls, milliseconds, interpolated linearly inside its
 * bucket like Prometheus' `histogram_quantile`; calls beyond the last bound report that bound.
 * 0 when nothing was counted.
 */
export function latencyQuantile(buckets: Float64Array, q: number): number {
  let total = 0;
  for (let i = 0; i < buckets.length; i++) total += buckets[i]!;
  if (total === 0) return 0;
  const rank = q * total;
  let seen = 0;
  for (let i = 0; i < buckets.length; i++) {
    const count = buckets[i]!;
    if (count > 0 && seen + count >= rank) {
      if (i >= LATENCY_BOUNDS_MS.length) return LATENCY_BOUNDS_MS[LATENCY_BOUNDS_MS.length - 1]!;
      const lower = i === 0 ? 0 : LATENCY_BOUNDS_MS[i - 1]!;
      const upper = LATENCY_BOUNDS_MS[i]!;
      return lower + (upper - lower) * ((rank - seen) / count);
    }
    seen += count;
  }
  return LATENCY_BOUNDS_MS[LATENCY_BOUNDS_MS.length - 1]!;
}
