import type { ClientInfo } from '@bifro/spi';
import type { LiveLimits } from '../../src/broker/engine';
import type { CloseCause, ConnectionState } from '../../src/protocol/connection-port';
import {
  canWrite,
  ConnectionMeters,
  meterInbound,
  outboundOpen,
  OUTBOUND_CHECK_BYTES,
  queueOverflowed,
  slowDown,
  throttleTenantInbound,
  type MeteredConnection,
} from '../../src/protocol/flow-control';

/**
 * Flow control of one connection alone (./src/protocol/flow-control.ts): the clock is the fake
 * engine's `wheel.now`, set by each test; pauses and retries run on jest's fake timers.
 */

const CLIENT = { tenantId: 't1', clientId: 'c1' } as ClientInfo;

class FakeConnection implements MeteredConnection {
  state: ConnectionState = 'connected';
  readonly client = CLIENT;
  readonly origin = { listener: 'tcp', remoteAddress: '127.0.0.1', remotePort: 1 };
  readonly events: [string, unknown][] = [];
  drains = 0;
  tenantHasRoom = true;
  minSendPerSec = 10;
  readonly wheel = { now: 10_000 };
  readonly engine = {
    wheel: this.wheel,
    throttler: { hasResource: () => this.tenantHasRoom },
    events: { wants: () => true },
    setting: () => this.minSendPerSec,
    config: { mqtt: { writeHighWaterBytes: 1000, slowConsumerTimeoutMs: 5000 } },
    emit: (type: string, _client: unknown, details: unknown) => {
      this.events.push([type, details]);
    },
  } as unknown as MeteredConnection['engine'];
  readonly session = { drain: () => void this.drains++ };
  readonly socket = {
    paused: false,
    writableLength: 0,
    pause: () => (this.socket.paused = true),
    resume: () => (this.socket.paused = false),
  };
  live: LiveLimits = { stale: false, inBoundBandWidth: 0, outBoundBandWidth: 0 } as unknown as LiveLimits;
  corked = false;
  slowed = false;
  holding = false;
  closeCause: CloseCause | undefined;
  destroyed = false;
  private meters: ConnectionMeters | undefined;
  get m(): ConnectionMeters {
    return (this.meters ??= new ConnectionMeters());
  }
  get hasMeters(): boolean {
    return this.meters !== undefined;
  }
  refreshLiveLimits(): LiveLimits {
    return this.live;
  }
  destroy(): void {
    this.destroyed = true;
    this.state = 'closed';
  }
}

function limits(conn: FakeConnection, l: { inBoundBandWidth?: number; outBoundBandWidth?: number }): void {
  conn.live = {
    stale: false,
    inBoundBandWidth: l.inBoundBandWidth ?? 0,
    outBoundBandWidth: l.outBoundBandWidth ?? 0,
  } as unknown as LiveLimits;
}

beforeEach(() => jest.useFakeTimers());
afterEach(() => jest.useRealTimers());

describe('ConnectionMeters', () => {
  it('counts PUBLISH packets per second against MsgPubPerSec, starting over each second', () => {
    const m = new ConnectionMeters();
    expect([m.countPublish(1000, 2), m.countPublish(1500, 2), m.countPublish(1999, 2)]).toEqual([false, false, true]);
    expect(m.countPublish(2000, 2)).toBe(false);
  });

  it('keeps the packets of the last outbound window for MinSendPerSec, none after a silent second', () => {
    const m = new ConnectionMeters();
    m.countSent(100, 1000);
    m.countSent(50, 1200);
    expect([m.outWindowMessages, m.outWindowBytes, m.outSinceCheck]).toEqual([2, 150, 150]);
    m.countSent(10, 2100);
    expect([m.lastWindowMessages, m.outWindowMessages, m.outWindowStart]).toEqual([2, 1, 2100]);
    m.rollOutWindow(4200);
    expect(m.lastWindowMessages).toBe(0);
  });
});

describe('inbound', () => {
  it('allocates no meters when InBoundBandWidth is 0', () => {
    const conn = new FakeConnection();
    meterInbound(conn, 10_000, conn.wheel.now);
    expect(conn.hasMeters).toBe(false);
    expect(conn.socket.paused).toBe(false);
  });

  it('pauses reading for as long as the bytes of the second are worth at the limit, then resumes', () => {
    const conn = new FakeConnection();
    limits(conn, { inBoundBandWidth: 1000 });
    const now = conn.wheel.now;
    meterInbound(conn, 600, now);
    expect(conn.socket.paused).toBe(false);
    meterInbound(conn, 900, now + 200);
    // 1500 bytes at 1000/s are worth 1500 ms, 200 of them gone.
    expect(conn.socket.paused).toBe(true);
    expect(conn.m.inWindowStart).toBe(now + 200 + 1300);
    jest.advanceTimersByTime(1299);
    expect(conn.socket.paused).toBe(true);
    jest.advanceTimersByTime(1);
    expect([conn.socket.paused, conn.slowed]).toEqual([false, false]);
  });

  it('does not resume a connection held by a plugin, nor pause twice', () => {
    const conn = new FakeConnection();
    expect(slowDown(conn, 100)).toBe(true);
    expect(slowDown(conn, 100)).toBe(false);
    conn.holding = true;
    jest.advanceTimersByTime(100);
    expect([conn.socket.paused, conn.slowed]).toEqual([true, false]);
  });

  it('pauses a connection whose tenant is over TotalInboundBytesPerSecond, reporting resourceExhausted', () => {
    const conn = new FakeConnection();
    throttleTenantInbound(conn);
    expect(conn.events).toEqual([]);
    conn.tenantHasRoom = false;
    throttleTenantInbound(conn);
    throttleTenantInbound(conn);
    expect(conn.events).toEqual([['resourceExhausted', { resource: 'TotalInboundBytesPerSecond' }]]);
    expect(conn.socket.paused).toBe(true);
  });
});

describe('outbound', () => {
  it('closes the window when OutBoundBandWidth is used up and drains the session when it reopens', () => {
    const conn = new FakeConnection();
    limits(conn, { outBoundBandWidth: 1000 });
    conn.m.countSent(1000, conn.wheel.now);
    conn.wheel.now += 400;
    expect(outboundOpen(conn)).toBe(false);
    expect(outboundOpen(conn)).toBe(false);
    jest.advanceTimersByTime(599);
    expect(conn.drains).toBe(0);
    jest.advanceTimersByTime(1);
    expect(conn.drains).toBe(1);
    conn.wheel.now += 600;
    expect(outboundOpen(conn)).toBe(true);
    expect(conn.m.outWindowBytes).toBe(0);
  });

  it('asks the tenant quota at the first write of a tick, then every OUTBOUND_CHECK_BYTES', () => {
    const conn = new FakeConnection();
    const ask = jest.spyOn(conn.engine.throttler, 'hasResource');
    expect(outboundOpen(conn)).toBe(true);
    conn.corked = true;
    conn.m.countSent(OUTBOUND_CHECK_BYTES - 1, conn.wheel.now);
    expect(outboundOpen(conn)).toBe(true);
    expect(ask).toHaveBeenCalledTimes(1);
    conn.m.countSent(1, conn.wheel.now);
    conn.tenantHasRoom = false;
    expect(outboundOpen(conn)).toBe(false);
    expect(ask).toHaveBeenCalledTimes(2);
    expect(conn.events).toEqual([['resourceExhausted', { resource: 'TotalOutboundBytesPerSecond' }]]);
    jest.advanceTimersByTime(100);
    expect(conn.drains).toBe(1);
  });

  it('reports a write high-water stall once, and closes a consumer stalled past slowConsumerTimeoutMs', () => {
    const conn = new FakeConnection();
    expect(canWrite(conn)).toBe(true);
    conn.socket.writableLength = 2000;
    expect(canWrite(conn)).toBe(false);
    expect(canWrite(conn)).toBe(false);
    expect(conn.events).toEqual([['subscriberStalled', { reason: 'writeHighWater', buffered: 2000 }]]);
    conn.wheel.now += 5001;
    expect(canWrite(conn)).toBe(false);
    expect(conn.destroyed).toBe(false);
    jest.runOnlyPendingTimers();
    expect(conn.destroyed).toBe(true);
    expect(conn.closeCause).toBe('reported');
    expect(conn.events[1]).toEqual([
      'serverBusy',
      { remoteAddress: '127.0.0.1', reason: 'slow consumer', buffered: 2000, stalledMs: 5001 },
    ]);
  });

  it('is shut for a connection not connected', () => {
    const conn = new FakeConnection();
    conn.state = 'authenticating';
    expect(canWrite(conn)).toBe(false);
  });
});

describe('MinSendPerSec', () => {
  it('reports a subscriber whose queue overflows while fewer packets than MinSendPerSec left in the last second, once per window', () => {
    const conn = new FakeConnection();
    for (let i = 0; i < 3; i++) conn.m.countSent(10, conn.wheel.now);
    queueOverflowed(conn);
    queueOverflowed(conn);
    expect(conn.events).toEqual([['subscriberStalled', { reason: 'MinSendPerSec', sentPerSecond: 3, minSendPerSec: 10 }]]);
    conn.wheel.now += 1000;
    queueOverflowed(conn);
    expect(conn.events).toHaveLength(2);
  });

  it('does not report a subscriber that sends enough', () => {
    const conn = new FakeConnection();
    conn.minSendPerSec = 2;
    for (let i = 0; i < 3; i++) conn.m.countSent(10, conn.wheel.now);
    queueOverflowed(conn);
    expect(conn.events).toEqual([]);
  });
});
