import { createHistogram } from 'node:perf_hooks';
import { LAG_RESOLUTION_MS, LagMonitor } from '../../src/api/event-loop-lag';

// The event loop's delay as the dashboard and /metrics read it: each sample of perf_hooks'
// monitor is the time between two firings of its timer, so the timer's resolution is taken off;
// an interval without a sample has no figure (perf_hooks answers sentinels then).

const ms = (n: number): number => Math.round(n * 1e6);

it('takes the resolution off every figure of an interval, then starts a new one', () => {
  const recorded = createHistogram();
  const lag = new LagMonitor(recorded);
  lag.start();
  // 98 firings 1 ms late, one 3 ms late, one 40 ms late (a blocked loop).
  for (let i = 0; i < 98; i++) recorded.record(ms(LAG_RESOLUTION_MS + 1));
  recorded.record(ms(LAG_RESOLUTION_MS + 3));
  recorded.record(ms(LAG_RESOLUTION_MS + 40));
  const s = lag.take()!;
  expect(s.count).toBe(100);
  // The histogram keeps 3 significant digits: figures within 0.1 % (plus the resolution's share).
  expect(s.minMs).toBeCloseTo(1, 1);
  expect(s.p50Ms).toBeCloseTo(1, 1);
  expect(s.p90Ms).toBeCloseTo(1, 1);
  expect(s.p99Ms).toBeCloseTo(3, 1);
  expect(s.maxMs).toBeCloseTo(40, 0);
  expect(s.meanMs).toBeCloseTo((98 + 3 + 40) / 100, 1);
  expect(s.stddevMs).toBeGreaterThan(3);
  // The next interval starts empty.
  expect(lag.take()).toBeUndefined();
  recorded.record(ms(LAG_RESOLUTION_MS + 2));
  expect(lag.take()!.p99Ms).toBeCloseTo(2, 1);
});

it('has no figure for an interval without a sample, instead of the histogram sentinels', () => {
  const recorded = createHistogram();
  // What perf_hooks answers before a sample: the figures the old reading passed on as they were.
  expect(recorded.min).toBe(9223372036854776000);
  expect(recorded.mean).toBeNaN();
  const lag = new LagMonitor(recorded);
  lag.start();
  expect(lag.take()).toBeUndefined();
});

it('never answers a negative delay for a firing slightly early', () => {
  const recorded = createHistogram();
  const lag = new LagMonitor(recorded);
  lag.start();
  recorded.record(ms(LAG_RESOLUTION_MS - 0.4));
  recorded.record(ms(LAG_RESOLUTION_MS + 0.5));
  const s = lag.take()!;
  expect(s.minMs).toBe(0);
  expect(s.p99Ms).toBeCloseTo(0.5, 1);
  expect(s.meanMs).toBeCloseTo(0.05, 1);
});

it('measures a real loop: an idle loop is well under the resolution, a blocked one shows the block', async () => {
  const lag = new LagMonitor();
  lag.start();
  try {
    await new Promise((resolve) => setTimeout(resolve, 200));
    const idle = lag.take()!;
    expect(idle.count).toBeGreaterThan(0);
    // The old reading could not go below the resolution: every sample includes it.
    expect(idle.minMs).toBeLessThan(LAG_RESOLUTION_MS / 2);
    // A callback holding the loop for 60 ms (not the one that took: perf_hooks starts its next
    // interval at the next firing).
    await new Promise((resolve) =>
      setTimeout(() => {
        const until = Date.now() + 60;
        while (Date.now() < until);
        setTimeout(resolve, 30);
      }, 25),
    );
    expect(lag.take()!.maxMs).toBeGreaterThanOrEqual(40);
  } finally {
    lag.stop();
  }
});
