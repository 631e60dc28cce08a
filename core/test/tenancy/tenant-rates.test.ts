import { TimerWheel } from '../../src/session/timer-wheel';
import { RATE_SAMPLE_MS, TenantRates } from '../../src/tenancy/tenant-rates';
import { COUNTER, TenantUsage } from '../../src/tenancy/tenant-usage';

/** The rates sampler over a manual timer wheel and a clock the test moves. */
function harness(): { usage: TenantUsage; rates: TenantRates; wheel: TimerWheel; advance(ms: number): void } {
  let now = 1_000_000;
  const clock = (): number => now;
  const usage = new TenantUsage(clock);
  const wheel = new TimerWheel(250, 512, { clock, manual: true });
  const rates = new TenantRates(usage, wheel);
  return {
    usage,
    rates,
    wheel,
    advance(ms) {
      now += ms;
      wheel.tick(now);
    },
  };
}

describe('TenantRates', () => {
  it('turns counter deltas into per-second rates per tenant and for the broker', () => {
    const h = harness();
    h.usage.bump('a', COUNTER.messagesIn, 7); // before start: the base, not a rate
    h.rates.start();
    h.usage.bump('a', COUNTER.messagesIn, 50);
    h.usage.bump('a', COUNTER.bytesOut, 5000);
    h.usage.bump('b', COUNTER.messagesOut, 10); // first seen after start: counted from 0
    h.advance(RATE_SAMPLE_MS);
    expect(h.rates.rate('a', 'messagesIn')).toBeCloseTo(10);
    expect(h.rates.rate('a', 'bytesOut')).toBeCloseTo(1000);
    expect(h.rates.rate('b', 'messagesOut')).toBeCloseTo(2);
    expect(h.rates.broker().messagesIn.perSecond).toBeCloseTo(10);
    expect(h.rates.broker().messagesOut.perSecond).toBeCloseTo(2);
    expect(h.rates.of('unknown').messagesIn).toEqual({ perSecond: 0, load1m: 0, load5m: 0, load15m: 0 });
  });

  it("keeps 1/5/15-minute load averages that rise and decay like mosquitto's", () => {
    const h = harness();
    h.rates.start();
    // A steady 100 messages/s for 15 minutes.
    for (let t = 0; t < 900_000; t += RATE_SAMPLE_MS) {
      h.usage.bump('a', COUNTER.messagesIn, 100 * (RATE_SAMPLE_MS / 1000));
      h.advance(RATE_SAMPLE_MS);
    }
    const busy = h.rates.of('a').messagesIn;
    expect(busy.perSecond).toBeCloseTo(100);
    expect(busy.load1m).toBeCloseTo(100, 0);
    // 1 - e^-3 of the way after three time constants; e^-1 after one.
    expect(busy.load5m).toBeCloseTo(100 * (1 - Math.exp(-3)), 0);
    expect(busy.load15m).toBeCloseTo(100 * (1 - Math.exp(-1)), 0);
    // Silence for one minute: the 1-minute load falls to 1/e of where it was.
    for (let t = 0; t < 60_000; t += RATE_SAMPLE_MS) h.advance(RATE_SAMPLE_MS);
    const quiet = h.rates.of('a').messagesIn;
    expect(quiet.perSecond).toBe(0);
    expect(quiet.load1m).toBeCloseTo(busy.load1m * Math.exp(-1), 0);
    expect(quiet.load15m).toBeLessThan(busy.load15m);
    expect(quiet.load15m).toBeGreaterThan(quiet.load1m);
  });

  it('samples once per interval on the wheel and stops with stop()', () => {
    const h = harness();
    h.rates.start();
    h.usage.bump('a', COUNTER.messagesIn, 10);
    h.advance(RATE_SAMPLE_MS - 250);
    expect(h.rates.rate('a', 'messagesIn')).toBe(0);
    h.advance(250);
    expect(h.rates.rate('a', 'messagesIn')).toBeCloseTo(2);
    h.rates.stop();
    h.usage.bump('a', COUNTER.messagesIn, 1000);
    h.advance(RATE_SAMPLE_MS);
    expect(h.rates.rate('a', 'messagesIn')).toBeCloseTo(2);
    h.wheel.close();
  });
});
