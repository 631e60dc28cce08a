import { FlowWindow, SharedLedger } from '../../bench/src/flow-window';
import { Histogram } from '../../bench/src/histogram';
import type { Plan } from '../../bench/src/plan';
import { shareOf } from '../../bench/src/plan';
import { Pacer, type Paced } from '../../bench/src/publishers';
import { SharedState, Slot, Totals, delta } from '../../bench/src/shared-state';

describe('Histogram', () => {
  it('gives ordered quantiles within 2 % and the exact max', () => {
    const h = new Histogram();
    for (let us = 1; us <= 10000; us++) h.record(us);
    const s = h.summary();
    expect(s.count).toBe(10000);
    expect(Math.abs(s.p50Ms - 5) / 5).toBeLessThan(0.02);
    expect(Math.abs(s.p99Ms - 9.9) / 9.9).toBeLessThan(0.02);
    expect(s.maxMs).toBe(10);
    expect(s.p50Ms).toBeLessThanOrEqual(s.p99Ms);
    expect(s.p99Ms).toBeLessThanOrEqual(s.p999Ms);
    expect(s.p999Ms).toBeLessThanOrEqual(s.maxMs);
  });

  it('merges histograms of several workers; empty says NaN', () => {
    const a = new Histogram();
    const b = new Histogram();
    a.record(100);
    b.record(300);
    b.record(-5);
    a.merge(b.data());
    expect(a.count).toBe(3);
    expect(a.summary().minMs).toBe(0);
    expect(a.summary().maxMs).toBe(0.3);
    expect(new Histogram().summary().p50Ms).toBeNaN();
  });
});

describe('SharedState', () => {
  it('keeps exact differences across the 32-bit wrap', () => {
    const s = SharedState.create(2);
    s.add(Slot.SENT, 2 ** 31 - 10);
    const before = s.load(Slot.SENT);
    s.add(Slot.SENT, 25);
    expect(delta(s.load(Slot.SENT), before)).toBe(25);
    s.setReceived(0, 2 ** 31 + 5);
    s.setReceived(1, 2 ** 31 - 5);
    expect(delta(s.receivedMin(), s.received(1))).toBe(0);
    s.setReceived(1, 10);
    expect(delta(s.receivedMin(), s.received(1))).toBe(0);
    expect(s.receivedSum() >>> 0).toBe(2 ** 31 + 15);
  });

  it('accumulates totals from samples', () => {
    const s = SharedState.create(1);
    const t = new Totals(s);
    s.add(Slot.SENT, 7);
    s.setReceived(0, 5);
    expect(t.sample().received).toBe(5);
    s.add(Slot.SENT, 3);
    t.sample();
    expect([t.sent, t.received]).toEqual([10, 5]);
  });

  it('shares a flow window between ledgers of several threads; one stall is written off once', () => {
    const s = SharedState.create(1);
    const a = new FlowWindow(10, () => s.receivedSum(), 250, new SharedLedger(s));
    const b = new FlowWindow(10, () => s.receivedSum(), 250, new SharedLedger(s));
    expect(a.tryAcquire(6)).toBe(true);
    expect(b.tryAcquire(6)).toBe(false);
    expect(b.acquireUpTo(6)).toBe(4);
    s.setReceived(0, 5);
    expect(a.tryAcquire(5)).toBe(true);
    expect(s.compareAndSetLost(0, 5)).toBe(true);
    expect(s.compareAndSetLost(0, 5)).toBe(false);
    expect(a.lost).toBe(5);
  });
});

describe('shareOf', () => {
  const plan: Plan = {
    version: 4,
    keepalive: 0,
    concurrency: 10,
    subscribers: [{ id: 's', filter: 'a/+', qos: 0, clean: true }],
    publishers: Array.from({ length: 5 }, (_v, i) => ({ id: `p${i}`, topic: `a/${i}` })),
    publish: { qos: 0, payload: 1, batch: 1, inflight: 1 },
    idle: { prefix: 'c', count: 5, clean: true },
    rate: 0,
    window: null,
    latency: false,
  };

  it('spreads every connection over the workers exactly once, publishers after the subscribers', () => {
    const shares = [0, 1].map((w) => shareOf(plan, w, 2));
    expect(shares[0]).toEqual({ subscribers: [0], publishers: [1, 3], idle: [0, 2, 4] });
    expect(shares[1]).toEqual({ subscribers: [], publishers: [0, 2, 4], idle: [1, 3] });
    expect(shareOf(plan, 0, 1)).toEqual({ subscribers: [0], publishers: [0, 1, 2, 3, 4], idle: [0, 1, 2, 3, 4] });
  });
});

describe('Pacer', () => {
  it('hands out credit at the rate, caps it and counts what a stuck publisher could not send', async () => {
    const p: Paced & { resumed: number } = { credit: 0, resumed: 0, resume: () => p.resumed++ };
    const pacer = new Pacer(1000, [p], null, 20);
    pacer.start();
    await new Promise((r) => setTimeout(r, 120));
    pacer.stop();
    // Nobody spent the credit: it stops at 20 ms worth (20 messages), the rest was skipped.
    expect(p.credit).toBeLessThanOrEqual(20);
    expect(p.credit).toBeGreaterThan(0);
    expect(pacer.skipped).toBeGreaterThan(0);
    expect(p.resumed).toBeGreaterThan(0);
  });
});
