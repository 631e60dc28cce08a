import { COUNTER, TenantUsage } from '../../src/tenancy/tenant-usage';
import { HISTORY_POINTS, HISTORY_SAMPLE_MS, MAX_WATCHED_TENANTS, TrafficHistory, WATCH_IDLE_MS } from '../../src/api/traffic-history';

// The dashboard's history: per-second rates from the tenants' counters, fixed rings of 15
// minutes, `since` answering only newer points, and a bounded set of watched tenants.

function setup(): { usage: TenantUsage; history: TrafficHistory; at: { now: number } } {
  const at = { now: 1_000_000 };
  const usage = new TenantUsage(() => at.now);
  const history = new TrafficHistory(usage, () => at.now);
  return { usage, history, at };
}

const step = (h: TrafficHistory, at: { now: number }): void => {
  at.now += HISTORY_SAMPLE_MS;
  h.sample(at.now);
};

it('answers the broker rates per second over each sample, summed over tenants, with connections', () => {
  const { usage, history, at } = setup();
  history.start();
  try {
    usage.bump('a', COUNTER.messagesIn, 10);
    usage.bump('b', COUNTER.messagesIn, 30);
    usage.bump('b', COUNTER.messagesOut, 8);
    usage.bump('a', COUNTER.messagesDropped, 4);
    usage.add('a', 'TotalConnections', 2);
    usage.add('b', 'TotalConnections', 1);
    step(history, at);
    const p = history.brokerAfter(0);
    expect(p.t).toEqual([at.now]);
    expect(p.series.messagesIn).toEqual([20]);
    expect(p.series.messagesOut).toEqual([4]);
    expect(p.series.dropped).toEqual([2]);
    expect(p.series.connections).toEqual([3]);
    expect(p.series.eventLoopLagMs).toHaveLength(1);
    // No traffic in the next sample: the rate falls to 0, the gauge stays.
    step(history, at);
    const next = history.brokerAfter(p.t[0]!);
    expect(next.t).toEqual([at.now]);
    expect(next.series.messagesIn).toEqual([0]);
    expect(next.series.connections).toEqual([3]);
  } finally {
    history.stop();
  }
});

it('keeps 15 minutes of points and drops the oldest first', () => {
  const { usage, history, at } = setup();
  for (let i = 0; i < HISTORY_POINTS + 5; i++) {
    usage.bump('a', COUNTER.messagesIn, 2 * i);
    step(history, at);
  }
  const p = history.brokerAfter(0);
  expect(p.t).toHaveLength(HISTORY_POINTS);
  expect(p.t[0]).toBe(at.now - (HISTORY_POINTS - 1) * HISTORY_SAMPLE_MS);
  expect(p.t[p.t.length - 1]).toBe(at.now);
  // The last sample counted 2 × (POINTS + 4) messages over 2 s.
  expect(p.series.messagesIn![p.t.length - 1]).toBe(HISTORY_POINTS + 4);
  expect(history.brokerAfter(at.now).t).toEqual([]);
});

it("keeps a tenant's series from its first request, without the broker's event loop, and never another tenant's traffic", () => {
  const { usage, history, at } = setup();
  usage.bump('a', COUNTER.messagesIn, 100);
  expect(history.tenantAfter('a', 0).t).toEqual([]);
  usage.bump('a', COUNTER.messagesIn, 6);
  usage.bump('b', COUNTER.messagesIn, 1000);
  step(history, at);
  const p = history.tenantAfter('a', 0);
  expect(p.series.messagesIn).toEqual([3]);
  expect(p.series.eventLoopLagMs).toBeUndefined();
  // A tenant nobody has seen yet: zeros, not an error.
  history.tenantAfter('nobody', 0);
  step(history, at);
  expect(history.tenantAfter('nobody', 0).series.messagesIn).toEqual([0]);
});

it('watches at most MAX_WATCHED_TENANTS tenants, forgetting the least recently asked, and drops idle ones', () => {
  const { history, at } = setup();
  for (let i = 0; i <= MAX_WATCHED_TENANTS; i++) {
    history.tenantAfter(`t${i}`, 0);
    at.now += 1;
  }
  step(history, at);
  // t0 was asked first and pushed out by the last one: it starts again, empty.
  expect(history.tenantAfter('t0', 0).t).toEqual([]);
  expect(history.tenantAfter(`t${MAX_WATCHED_TENANTS}`, 0).t).toHaveLength(1);
  // Idle for longer than WATCH_IDLE_MS: forgotten at the next sample.
  at.now += WATCH_IDLE_MS + 1;
  history.sample(at.now);
  expect(history.tenantAfter(`t${MAX_WATCHED_TENANTS}`, 0).t).toEqual([]);
});
