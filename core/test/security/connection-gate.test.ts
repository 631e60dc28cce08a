import pino from 'pino';
import type { EventType } from '@bifro/spi';
import { ADMIT, AddressRateLimiter, ConnectionGate, FlapDetector, RATE_EPISODE_GAP_MS } from '../../src/security/connection-gate';
import { DEFAULT_SECURITY } from '../../src/runtime/config';
import type { SecurityConfig } from '../../src/base/config-types';
import { isLoopbackHost, isReservedTopic } from '../../src/security/secure-defaults';

/** A clock the test moves by hand. */
function manualClock(start = 1_000_000): { now: () => number; advance: (ms: number) => void } {
  let t = start;
  return { now: () => t, advance: (ms) => void (t += ms) };
}

describe('AddressRateLimiter', () => {
  it('admits a burst, then refills at the configured rate', () => {
    const clock = manualClock();
    const rate = new AddressRateLimiter({ perAddressPerSecond: 10, burst: 5, maxTrackedAddresses: 1000 }, clock.now);
    const decisions = Array.from({ length: 7 }, () => rate.admit('10.0.0.1'));
    expect(decisions).toEqual([0, 0, 0, 0, 0, ADMIT.refusedFirst, ADMIT.refused]);
    clock.advance(100); // one token
    expect(rate.admit('10.0.0.1')).toBe(ADMIT.ok);
    expect(rate.admit('10.0.0.1')).toBe(ADMIT.refused);
    // Another address has its own bucket.
    expect(rate.admit('10.0.0.2')).toBe(ADMIT.ok);
  });

  it('reports one episode per flood, and a new one after a quiet gap', () => {
    const clock = manualClock();
    const rate = new AddressRateLimiter({ perAddressPerSecond: 1, burst: 1, maxTrackedAddresses: 1000 }, clock.now);
    rate.admit('a');
    const firsts: number[] = [];
    for (let i = 0; i < 5000; i++) {
      clock.advance(2); // 500 attempts per second for 10 s
      if (rate.admit('a') === ADMIT.refusedFirst) firsts.push(i);
    }
    expect(firsts).toEqual([0]);
    clock.advance(RATE_EPISODE_GAP_MS + 1);
    rate.admit('a'); // refilled: admitted
    expect(rate.admit('a')).toBe(ADMIT.refusedFirst);
  });

  it('0 per second turns the limit off', () => {
    const rate = new AddressRateLimiter({ perAddressPerSecond: 0, burst: 1, maxTrackedAddresses: 1000 });
    for (let i = 0; i < 1000; i++) expect(rate.admit('a')).toBe(ADMIT.ok);
    expect(rate.size).toBe(0);
  });

  it('keeps its table bounded: idle buckets swept, the oldest evicted when full', () => {
    const clock = manualClock();
    const rate = new AddressRateLimiter({ perAddressPerSecond: 100, burst: 10, maxTrackedAddresses: 1000 }, clock.now);
    for (let i = 0; i < 50_000; i++) rate.admit(`10.${i >> 16}.${(i >> 8) & 255}.${i & 255}`);
    expect(rate.size).toBeLessThanOrEqual(1000);
    clock.advance(61_000);
    rate.admit('192.0.2.1'); // triggers the periodic sweep: every other bucket is full again
    expect(rate.size).toBe(1);
  });
});

describe('FlapDetector', () => {
  // A bucket of 3 ends, refilled at one end per 10 s.
  const limits = { maxDisconnects: 3, windowSeconds: 30, banSeconds: 60, maxTrackedClients: 1000 };

  it('absorbs a burst of maxDisconnects; the end that finds the bucket empty bans, for banSeconds', () => {
    const clock = manualClock();
    const flap = new FlapDetector(limits, clock.now);
    for (let i = 0; i < 3; i++) expect(flap.disconnected('t/c')).toBe(false);
    expect(flap.bannedFor('t/c')).toBe(0);
    clock.advance(1000); // a tenth of a token back
    expect(flap.disconnected('t/c')).toBe(true);
    expect(flap.bannedFor('t/c')).toBe(60_000);
    expect(flap.bannedFor('t/other')).toBe(0);
    // Disconnects during the ban do not extend it or report again.
    expect(flap.disconnected('t/c')).toBe(false);
    clock.advance(59_999);
    expect(flap.bannedFor('t/c')).toBe(1);
    clock.advance(1);
    expect(flap.bannedFor('t/c')).toBe(0);
  });

  it('never bans ends at the refill rate, nor bursts that stop (a test suite reusing a client id)', () => {
    const clock = manualClock();
    const flap = new FlapDetector(limits, clock.now);
    for (let i = 0; i < 100; i++) {
      expect(flap.disconnected('t/c')).toBe(false);
      clock.advance(10_000); // one per 10 s: the refill rate
    }
    for (let burst = 0; burst < 20; burst++) {
      for (let i = 0; i < 3; i++) expect(flap.disconnected('t/b')).toBe(false);
      clock.advance(30_000); // the bucket is full again
    }
  });

  it('bans a loop only slightly faster than the refill once it has drained the bucket', () => {
    const clock = manualClock();
    const flap = new FlapDetector(limits, clock.now);
    let ends = 0;
    while (!flap.disconnected('t/c')) {
      ends++;
      clock.advance(9_000); // 0.1 token short per end
      expect(ends).toBeLessThan(100);
    }
    expect(ends).toBeGreaterThanOrEqual(20);
    expect(flap.bannedFor('t/c')).toBe(60_000);
  });

  it('starts again with a full bucket after the ban', () => {
    const clock = manualClock();
    const flap = new FlapDetector(limits, clock.now);
    for (let i = 0; i < 3; i++) flap.disconnected('t/c');
    expect(flap.disconnected('t/c')).toBe(true);
    clock.advance(60_000);
    expect(flap.bannedFor('t/c')).toBe(0);
    for (let i = 0; i < 3; i++) expect(flap.disconnected('t/c')).toBe(false);
    expect(flap.disconnected('t/c')).toBe(true);
  });

  it('0 disconnects turns it off; the table stays bounded', () => {
    const off = new FlapDetector({ ...limits, maxDisconnects: 0 });
    for (let i = 0; i < 100; i++) expect(off.disconnected('t/c')).toBe(false);
    const flap = new FlapDetector(limits, manualClock().now);
    for (let i = 0; i < 20_000; i++) flap.disconnected(`t/c${i}`);
    expect(flap.size).toBeLessThanOrEqual(1000);
  });
});

describe('ConnectionGate', () => {
  function gate(security: Partial<SecurityConfig>) {
    const clock = manualClock();
    const events: { type: EventType; clientId?: string; detail: Record<string, unknown> }[] = [];
    const lines: Record<string, unknown>[] = [];
    const logger = pino({ level: 'debug' }, { write: (l: string) => lines.push(JSON.parse(l) as Record<string, unknown>) });
    const g = new ConnectionGate(
      { ...DEFAULT_SECURITY, ...security },
      logger,
      (type, client, detail) => events.push({ type, clientId: client?.clientId, detail }),
      clock.now,
    );
    const warns = (): string[] => lines.filter((l) => l.level === 40).map((l) => String(l.msg));
    return { g, clock, events, warns };
  }

  it('logs and reports a connection flood once, counting every refusal', () => {
    const { g, events, warns } = gate({ connectionRate: { perAddressPerSecond: 10, burst: 10, maxTrackedAddresses: 1000 } });
    let admitted = 0;
    for (let i = 0; i < 1000; i++) if (g.admit('198.51.100.7', 'tcp')) admitted++;
    expect(admitted).toBe(10);
    expect(g.rateRefused).toBe(990);
    expect(events.map((e) => e.type)).toEqual(['connectionRateExceeded']);
    expect(events[0]!.detail).toEqual({ remoteAddress: '198.51.100.7', listener: 'tcp', perAddressPerSecond: 10, burst: 10 });
    expect(warns()).toHaveLength(1);
    expect(warns()[0]).toContain('198.51.100.7');
  });

  it('bans a flapping client id of one tenant, warns once per ban, reports each refused attempt', () => {
    const { g, clock, events, warns } = gate({
      flapping: { maxDisconnects: 3, windowSeconds: 60, banSeconds: 300, maxTrackedClients: 1000 },
    });
    const c = { tenantId: 'ta', clientId: 'dev-1', remoteAddress: '203.0.113.9' };
    // The client's own DISCONNECT never counts.
    for (let i = 0; i < 100; i++) g.disconnected(c, true);
    for (let i = 0; i < 4; i++) {
      expect(g.bannedSeconds(c)).toBe(0);
      g.disconnected(c);
    }
    expect(g.bannedSeconds(c)).toBe(300);
    expect(g.bannedSeconds({ ...c, tenantId: 'tb' })).toBe(0); // same id, another tenant
    clock.advance(100_000);
    expect(g.bannedSeconds(c)).toBe(200);
    expect(events.map((e) => e.type)).toEqual(['flappingDetected', 'banned', 'banned']);
    expect(events[0]!.detail).toMatchObject({ disconnects: 3, windowSeconds: 60, banSeconds: 300 });
    expect(warns()).toHaveLength(1);
    clock.advance(200_000);
    expect(g.bannedSeconds(c)).toBe(0);
  });
});

describe('secure defaults helpers', () => {
  it.each([
    ['127.0.0.1', true],
    ['127.1.2.3', true],
    ['localhost', true],
    ['::1', true],
    ['[::1]', true],
    ['::ffff:127.0.0.1', true],
    ['0.0.0.0', false],
    ['::', false],
    ['192.168.1.10', false],
    ['broker.example.com', false],
  ])('isLoopbackHost(%s) = %s', (host, loopback) => expect(isLoopbackHost(host)).toBe(loopback));

  it('reserves every $ topic', () => {
    expect(isReservedTopic('$SYS/broker/uptime')).toBe(true);
    expect(isReservedTopic('$share/g/t')).toBe(true);
    expect(isReservedTopic('a/$SYS')).toBe(false);
  });
});
