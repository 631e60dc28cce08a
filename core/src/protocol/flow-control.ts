/**
 * Flow control of one connection (docs/tenancy.md § Usage and quotas): the publish rate
 * (MsgPubPerSec), the inbound and outbound bandwidth windows (InBoundBandWidth, OutBoundBandWidth),
 * the tenant's bytes per second both ways, and the MinSendPerSec stall report. Plain functions of the
 * connection, called from its hot paths: no closure per connection, and the rate windows are
 * allocated only for a connection that carries traffic.
 */
import type { ClientInfo } from '@bifro/spi';
import type { Engine, LiveLimits } from '../broker/engine';
import type { Session } from '../session/session';
import type { CloseCause, ConnectionState } from './connection-port';
import type { ConnectionOrigin } from '../transport/connection-origin';
import { COUNTER, resourceIndex, type TenantState } from '../tenancy/tenant-usage';

/** Index of the tenant's outbound bytes per second in its usage. */
export const OUTBOUND_RATE = resourceIndex('TotalOutboundBytesPerSecond');

/** How long reading pauses when the tenant's inbound bytes per second are used up. */
export const INBOUND_SLOWDOWN_MS = 100;

/** Bytes a connection writes between two questions about its tenant's outbound quota (bounds the overshoot). */
export const OUTBOUND_CHECK_BYTES = 16 * 1024;

/** How long deliveries wait when the tenant's outbound bytes per second are used up. */
export const OUTBOUND_RETRY_MS = 100;

/** Per-connection rate windows and flow state: only connections that carry traffic need them. */
export class ConnectionMeters {
  /** Publish rate window (MsgPubPerSec). */
  pubWindowStart = 0;
  pubWindowCount = 0;
  /** Inbound byte window (InBoundBandWidth). */
  inWindowStart = 0;
  inWindowBytes = 0;
  /** The outbound one-second window: bytes (OutBoundBandWidth) and PUBLISH packets (MinSendPerSec), and the packets of the last one. */
  outWindowStart = 0;
  outWindowBytes = 0;
  outWindowMessages = 0;
  lastWindowMessages = 0;
  /** A drain is scheduled for when the outbound window reopens. */
  outRetry = false;
  /** Bytes written since the tenant's outbound quota was last asked. */
  outSinceCheck = 0;
  /** subscriberStalled (MinSendPerSec) was reported in the current window. */
  stallReported = false;
  /** Since when the socket has been over its write high-water mark (0: it is not). */
  stalledSince = 0;

  /** Count one inbound PUBLISH in the current second; true when that makes more than `maxPerSecond`. */
  countPublish(now: number, maxPerSecond: number): boolean {
    if (now - this.pubWindowStart >= 1000) {
      this.pubWindowStart = now;
      this.pubWindowCount = 0;
    }
    return ++this.pubWindowCount > maxPerSecond;
  }

  /** Count a PUBLISH of `size` bytes written to the client. */
  countSent(size: number, now: number): void {
    this.outSinceCheck += size;
    if (now - this.outWindowStart >= 1000) this.rollOutWindow(now);
    this.outWindowMessages++;
    this.outWindowBytes += size;
  }

  /** Start a new outbound window; the packets of the one ending count as the last second's (none when it ended a second ago). */
  rollOutWindow(now: number): void {
    this.lastWindowMessages = now - this.outWindowStart >= 2000 ? 0 : this.outWindowMessages;
    this.outWindowStart = now;
    this.outWindowMessages = 0;
    this.outWindowBytes = 0;
    this.stallReported = false;
  }
}

/** The connection as flow control sees it (MqttConnection). */
export interface MeteredConnection {
  readonly state: ConnectionState;
  readonly client: ClientInfo | undefined;
  readonly session: Pick<Session, 'drain'> | undefined;
  readonly engine: Pick<Engine, 'wheel' | 'throttler' | 'emit' | 'events' | 'setting' | 'config'>;
  readonly origin: ConnectionOrigin;
  readonly socket: { pause(): unknown; resume(): unknown; readonly writableLength: number };
  readonly live: LiveLimits;
  refreshLiveLimits(): LiveLimits;
  /** The connection's meters, allocated on first use. */
  readonly m: ConnectionMeters;
  /** Writes of the current tick are corked (not flushed yet). */
  readonly corked: boolean;
  /** Reading is paused by {@link slowDown}. */
  slowed: boolean;
  /** Reading is paused until a plugin answers (MqttConnection.hold). */
  readonly holding: boolean;
  closeCause: CloseCause | undefined;
  destroy(): void;
}

/** A PUBLISH of `size` bytes was written: the tenant's messages and bytes out, its outbound rate, the connection's send meter. */
export function meterOutbound(conn: Pick<MeteredConnection, 'engine' | 'm'> & { readonly tenant: TenantState }, size: number): void {
  const tenant = conn.tenant;
  tenant.counters[COUNTER.messagesOut]++;
  tenant.counters[COUNTER.bytesOut]! += size;
  const now = conn.engine.wheel.now;
  tenant.countRate(OUTBOUND_RATE, size, now);
  conn.m.countSent(size, now);
}

/**
 * Stop reading the socket for a while (the tenant's inbound bandwidth quota is exhausted): the
 * client is slowed by TCP flow control, nothing is dropped (docs/tenancy.md § Usage and quotas).
 * False when reading is paused already or the connection is closed.
 */
export function slowDown(conn: MeteredConnection, ms: number): boolean {
  if (conn.slowed || conn.state === 'closed') return false;
  conn.slowed = true;
  conn.socket.pause();
  setTimeout(() => {
    conn.slowed = false;
    if (conn.state !== 'closed' && !conn.holding) conn.socket.resume();
  }, ms).unref();
  return true;
}

/**
 * InBoundBandWidth: once the connection has read its bytes for the current second, reading
 * pauses for as long as those bytes are worth at the limit (a large chunk buys a longer pause),
 * so the average rate stays at the limit; TCP flow control slows the client, nothing is dropped.
 */
export function meterInbound(conn: MeteredConnection, bytes: number, now: number): void {
  let live = conn.live;
  if (live.stale) live = conn.refreshLiveLimits();
  const limit = live.inBoundBandWidth;
  if (limit === 0) return;
  const m = conn.m;
  if (now - m.inWindowStart >= 1000) {
    m.inWindowStart = now;
    m.inWindowBytes = 0;
  }
  m.inWindowBytes += bytes;
  if (m.inWindowBytes < limit) return;
  const pauseMs = Math.max(1, Math.ceil((m.inWindowBytes / limit) * 1000) - (now - m.inWindowStart));
  if (slowDown(conn, pauseMs)) {
    // The next window starts when reading resumes.
    m.inWindowStart = now + pauseMs;
    m.inWindowBytes = 0;
  }
}

/**
 * The tenant's inbound bytes per second (counted per PUBLISH payload) are asked about once per
 * chunk read, not per PUBLISH: over them, reading pauses (docs/tenancy.md § Usage and quotas).
 */
export function throttleTenantInbound(conn: MeteredConnection): void {
  const engine = conn.engine;
  if (!engine.throttler.hasResource(conn.client!.tenantId, 'TotalInboundBytesPerSecond') && slowDown(conn, INBOUND_SLOWDOWN_MS))
    engine.emit('resourceExhausted', conn.client, { resource: 'TotalInboundBytesPerSecond' });
}

/**
 * Whether the socket takes more now (SessionLink.writable). Over the high-water mark deliveries wait in the session
 * queue (bounded by SessionInboxSize and, with the socket's buffer, by mqtt.maxQueuedBytesPerConnection
 * and MaxTenantQueuedBytes; QoS0DropOldest decides what goes); a subscriber that stays over
 * it for slowConsumerTimeoutMs is disconnected, so one slow reader never holds memory for long.
 */
export function canWrite(conn: MeteredConnection): boolean {
  const m = conn.m;
  if (conn.state !== 'connected') return false;
  if (!outboundOpen(conn)) return false;
  const engine = conn.engine;
  const mqtt = engine.config.mqtt;
  if (conn.socket.writableLength < mqtt.writeHighWaterBytes) {
    m.stalledSince = 0;
    return true;
  }
  const now = engine.wheel.now;
  if (m.stalledSince === 0) {
    m.stalledSince = now;
    engine.emit('subscriberStalled', conn.client, { reason: 'writeHighWater', buffered: conn.socket.writableLength });
  } else if (now - m.stalledSince > mqtt.slowConsumerTimeoutMs) {
    // Not from inside the delivery loop that asked.
    const stalledMs = now - m.stalledSince;
    setImmediate(() => closeSlowConsumer(conn, stalledMs));
  }
  return false;
}

/** A slow consumer: closed at once (what is buffered for it is discarded), reported as `serverBusy`. */
function closeSlowConsumer(conn: MeteredConnection, stalledMs: number): void {
  if (conn.state === 'closed') return;
  conn.closeCause = 'reported';
  conn.engine.emit('serverBusy', conn.client, {
    remoteAddress: conn.origin.remoteAddress,
    reason: 'slow consumer',
    buffered: conn.socket.writableLength,
    stalledMs,
  });
  conn.destroy();
}

/**
 * OutBoundBandWidth (this connection) and TotalOutboundBytesPerSecond (its tenant): when used
 * up, deliveries wait in the session queue (dropped by its policy when it is full) and are
 * drained when the window reopens. The tenant quota is asked at the first write of a tick and
 * then every OUTBOUND_CHECK_BYTES written, not per delivery.
 */
export function outboundOpen(conn: MeteredConnection): boolean {
  const m = conn.m;
  let live = conn.live;
  if (live.stale) live = conn.refreshLiveLimits();
  const limit = live.outBoundBandWidth;
  if (limit > 0 && m.outWindowBytes >= limit) {
    const now = conn.engine.wheel.now;
    if (now - m.outWindowStart < 1000) {
      retryOutboundIn(conn, m.outWindowStart + 1000 - now);
      return false;
    }
    m.rollOutWindow(now);
  }
  if ((!conn.corked || m.outSinceCheck >= OUTBOUND_CHECK_BYTES) && !tenantOutboundAllowed(conn, m)) {
    if (!m.outRetry) conn.engine.emit('resourceExhausted', conn.client, { resource: 'TotalOutboundBytesPerSecond' });
    retryOutboundIn(conn, OUTBOUND_RETRY_MS);
    return false;
  }
  return true;
}

function tenantOutboundAllowed(conn: MeteredConnection, m: ConnectionMeters): boolean {
  m.outSinceCheck = 0;
  return conn.engine.throttler.hasResource(conn.client!.tenantId, 'TotalOutboundBytesPerSecond');
}

/** Drain the session queue in `ms` (once, however often the window is found shut meanwhile). */
function retryOutboundIn(conn: MeteredConnection, ms: number): void {
  const m = conn.m;
  if (m.outRetry) return;
  m.outRetry = true;
  setTimeout(() => {
    m.outRetry = false;
    if (conn.state === 'connected') conn.session?.drain();
  }, ms).unref();
}

/**
 * The session queue overflowed: when fewer PUBLISH packets left in the last second than the
 * tenant's MinSendPerSec, the subscriber is reported stalled (once per second).
 */
export function queueOverflowed(conn: MeteredConnection): void {
  const m = conn.m;
  const engine = conn.engine;
  if (conn.state !== 'connected' || !engine.events.wants('subscriberStalled')) return;
  const now = engine.wheel.now;
  if (now - m.outWindowStart >= 1000) m.rollOutWindow(now);
  if (m.stallReported) return;
  const sent = Math.max(m.lastWindowMessages, m.outWindowMessages);
  const min = engine.setting(conn.client!.tenantId, 'MinSendPerSec');
  if (sent >= min) return;
  m.stallReported = true;
  engine.emit('subscriberStalled', conn.client, { reason: 'MinSendPerSec', sentPerSecond: sent, minSendPerSec: min });
}
