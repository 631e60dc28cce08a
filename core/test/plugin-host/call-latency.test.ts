import { LATENCY_BOUNDS_MS, LATENCY_BUCKETS, latencyBuckets, latencyQuantile, recordLatency } from '../../src/plugin-host/call-latency';

describe('plugin call latency buckets', () => {
  it('counts a call in the first bucket whose bound it does not exceed, slower ones in +Inf', () => {
    const b = latencyBuckets();
    expect(b).toHaveLength(LATENCY_BUCKETS);
    recordLatency(b, 0);
    recordLatency(b, 0.05);
    recordLatency(b, 0.051);
    recordLatency(b, 7);
    recordLatency(b, 60_000);
    expect(b[0]).toBe(2);
    expect(b[1]).toBe(1);
    expect(b[LATENCY_BOUNDS_MS.indexOf(10)]).toBe(1);
    expect(b[LATENCY_BUCKETS - 1]).toBe(1);
  });

  it('interpolates quantiles inside the bucket, like histogram_quantile', () => {
    const b = latencyBuckets();
    expect(latencyQuantile(b, 0.5)).toBe(0);
    // 100 calls between 5 and 10 ms: the median half-way into that bucket.
    for (let i = 0; i < 100; i++) recordLatency(b, 7);
    expect(latencyQuantile(b, 0.5)).toBeCloseTo(7.5);
    expect(latencyQuantile(b, 0.99)).toBeCloseTo(9.95);
    // One very slow call: p99 still in the 5-10 bucket, the maximum at the last bound.
    recordLatency(b, 60_000);
    expect(latencyQuantile(b, 0.99)).toBeLessThanOrEqual(10);
    expect(latencyQuantile(b, 1)).toBe(LATENCY_BOUNDS_MS[LATENCY_BOUNDS_MS.length - 1]);
  });
});
