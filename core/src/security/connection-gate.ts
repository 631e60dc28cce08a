import { getHeapStatistics } from 'node:v8';
import { performance } from 'node:perf_hooks';
import { sessionListKey, type EventDetailValue, type EventType } from '@bifro/spi';
import type { Clock } from '../base/clock';
import type { SecurityConfig } from '../base/config-types';
import type { Logger } from '../base/logger';

/**
 * Connection floods and flapping (docs/security.md § Connection floods and flapping):
 *
 * - {@link OverloadProbe}: event loop lag and heap use, sampled on a timer; while either is above
 *   its limit every new connection is closed at accept, whatever its address. This is the default
 *   shedding: a fleet behind one NAT address is served as long as the broker has capacity.
 * - {@link AddressRateLimiter}: a token bucket per remote address (off by default), asked once
 *   per accepted TCP connection (after the PROXY header when the listener expects one, before TLS
 *   and MQTT). Over the limit the socket is closed before any CONNECT work.
 * - {@link FlapDetector}: a token bucket per tenant and client id, taken by the ends of connected
 *   sessions the client did not ask for; an end that finds it empty bans the client id for a
 *   while (CONNACK 0x8A Banned, v3 0x05).
 *
 * The tables are bounded (swept of idle entries, oldest evicted when full) and take a clock so
 * tests do not sleep.
 */

/** Refusals of one address less than this apart belong to one episode: logged and reported once. */
export const RATE_EPISODE_GAP_MS = 10_000;
/** Idle entries are swept at most this often (and when a table is full, at most once per second). */
const SWEEP_INTERVAL_MS = 60_000;
const FULL_SWEEP_INTERVAL_MS = 1_000;

/** What {@link AddressRateLimiter.admit} decided. */
export const ADMIT = {
  /** Under the limit. */
  ok: 0,
  /** Over the limit, and the first refusal of an episode (log and report it). */
  refusedFirst: 1,
  /** Over the limit, in an episode already reported. */
  refused: 2,
} as const;
export type AdmitDecision = (typeof ADMIT)[keyof typeof ADMIT];

interface Bucket {
  tokens: number;
  /** When `tokens` was last brought up to date. */
  last: number;
  /** Last refusal (0: none yet). */
  refusedAt: number;
  /** Refusals in the current episode. */
  refusals: number;
}

/** `security.connectionRate` (its keys are described in core/src/base/config-types.ts). */
export type RateLimits = SecurityConfig['connectionRate'];

/** A token bucket per remote address, in a bounded table. */
export class AddressRateLimiter {
  private readonly buckets = new Map<string, Bucket>();
  private readonly perMs: number;
  /** How long an empty bucket takes to fill: a bucket idle that long is as good as absent. */
  private readonly refillMs: number;
  private lastSweep: number;

  constructor(
    readonly limits: RateLimits,
    private readonly clock: Clock = Date.now,
  ) {
    this.perMs = limits.perAddressPerSecond / 1000;
    this.refillMs = limits.perAddressPerSecond > 0 ? Math.ceil(limits.burst / this.perMs) : 0;
    this.lastSweep = clock();
  }

  get enabled(): boolean {
    return this.limits.perAddressPerSecond > 0;
  }

  /** Addresses tracked now. */
  get size(): number {
    return this.buckets.size;
  }

  /** Refusals in the current episode of an address (0 when none or untracked). */
  refusals(address: string): number {
    return this.buckets.get(address)?.refusals ?? 0;
  }

  /** One connection from `address`: take a token, or refuse. */
  admit(address: string): AdmitDecision {
    if (!this.enabled) return ADMIT.ok;
    const now = this.clock();
    let bucket = this.buckets.get(address);
    if (bucket === undefined) {
      this.makeRoom(now);
      bucket = { tokens: this.limits.burst, last: now, refusedAt: 0, refusals: 0 };
      this.buckets.set(address, bucket);
    } else if (now > bucket.last) {
      bucket.tokens = Math.min(this.limits.burst, bucket.tokens + (now - bucket.last) * this.perMs);
      bucket.last = now;
    }
    if (now - this.lastSweep >= SWEEP_INTERVAL_MS) this.sweep(now);
    if (bucket.tokens >= 1) {
      bucket.tokens -= 1;
      return ADMIT.ok;
    }
    const first = bucket.refusedAt === 0 || now - bucket.refusedAt >= RATE_EPISODE_GAP_MS;
    if (first) bucket.refusals = 0;
    bucket.refusedAt = now;
    bucket.refusals++;
    return first ? ADMIT.refusedFirst : ADMIT.refused;
  }

  private idle(bucket: Bucket, now: number): boolean {
    return now - bucket.last >= this.refillMs && (bucket.refusedAt === 0 || now - bucket.refusedAt >= RATE_EPISODE_GAP_MS);
  }

  private sweep(now: number): void {
    this.lastSweep = now;
    for (const [address, bucket] of this.buckets) if (this.idle(bucket, now)) this.buckets.delete(address);
  }

  /** Before adding an address to a full table: sweep idle ones (at most once a second), else evict the oldest. */
  private makeRoom(now: number): void {
    if (this.buckets.size < this.limits.maxTrackedAddresses) return;
    if (now - this.lastSweep >= FULL_SWEEP_INTERVAL_MS) this.sweep(now);
    while (this.buckets.size >= this.limits.maxTrackedAddresses) this.buckets.delete(this.buckets.keys().next().value!);
  }
}

/** `security.flapping` (its keys are described in core/src/base/config-types.ts). */
export type FlapLimits = SecurityConfig['flapping'];

interface FlapEntry {
  tokens: number;
  /** When `tokens` was last brought up to date. */
  last: number;
  /** 0: not banned. */
  bannedUntil: number;
}

/**
 * A token bucket per key (tenant + client id): each end takes a token, the bucket refills at
 * `maxDisconnects` per `windowSeconds`, and an end that finds no token bans the key. A burst of
 * ends that stops (a test suite reusing a client id across its tests) is absorbed; only a loop
 * that keeps ending connections faster than the refill, for long enough to drain the bucket, is
 * banned. A fixed window would ban the burst and let a loop just under its count run for ever.
 */
export class FlapDetector {
  private readonly entries = new Map<string, FlapEntry>();
  private readonly perMs: number;
  private readonly windowMs: number;
  private readonly banMs: number;
  private lastSweep: number;

  constructor(
    readonly limits: FlapLimits,
    private readonly clock: Clock = Date.now,
  ) {
    this.windowMs = limits.windowSeconds * 1000;
    this.perMs = limits.maxDisconnects / this.windowMs;
    this.banMs = limits.banSeconds * 1000;
    this.lastSweep = clock();
  }

  get enabled(): boolean {
    return this.limits.maxDisconnects > 0;
  }

  get size(): number {
    return this.entries.size;
  }

  /** Milliseconds left on the key's ban; 0 when it is not banned. */
  bannedFor(key: string): number {
    if (!this.enabled) return 0;
    const entry = this.entries.get(key);
    if (entry === undefined || entry.bannedUntil === 0) return 0;
    const left = entry.bannedUntil - this.clock();
    if (left > 0) return left;
    entry.bannedUntil = 0;
    return 0;
  }

  /** A connected client's connection ended without its asking. Returns true when this end starts a ban. */
  disconnected(key: string): boolean {
    if (!this.enabled) return false;
    const now = this.clock();
    if (now - this.lastSweep >= SWEEP_INTERVAL_MS) this.sweep(now);
    let entry = this.entries.get(key);
    if (entry === undefined) {
      this.makeRoom(now);
      entry = { tokens: this.limits.maxDisconnects, last: now, bannedUntil: 0 };
      this.entries.set(key, entry);
    }
    if (entry.bannedUntil > now) return false;
    if (now > entry.last) {
      entry.tokens = Math.min(this.limits.maxDisconnects, entry.tokens + (now - entry.last) * this.perMs);
      entry.last = now;
    }
    if (entry.tokens >= 1) {
      entry.tokens -= 1;
      return false;
    }
    // After the ban the client id starts again with a full bucket.
    entry.bannedUntil = now + this.banMs;
    entry.tokens = this.limits.maxDisconnects;
    entry.last = entry.bannedUntil;
    return true;
  }

  /** Not banned, and the bucket is full again: as good as absent. */
  private idle(entry: FlapEntry, now: number): boolean {
    return entry.bannedUntil <= now && now - entry.last >= this.windowMs;
  }

  private sweep(now: number): void {
    this.lastSweep = now;
    for (const [key, entry] of this.entries) if (this.idle(entry, now)) this.entries.delete(key);
  }

  private makeRoom(now: number): void {
    if (this.entries.size < this.limits.maxTrackedClients) return;
    if (now - this.lastSweep >= FULL_SWEEP_INTERVAL_MS) this.sweep(now);
    while (this.entries.size >= this.limits.maxTrackedClients) this.entries.delete(this.entries.keys().next().value!);
  }
}

/** `security.overload` (its keys are described in core/src/base/config-types.ts). */
export type OverloadLimits = SecurityConfig['overload'];

/** How often the probe samples: the lag it sees is how late this timer fired. */
export const PROBE_INTERVAL_MS = 100;

/** Why the broker is overloaded, as logged and reported. */
export interface OverloadState {
  readonly eventLoopLagMs: number;
  readonly heapUsedPercent: number;
}

/**
 * Samples the broker's own load every {@link PROBE_INTERVAL_MS}: the event loop lag (how late its
 * timer fired) and the heap in use. The timer runs in the timers phase, before the accepts of the
 * same loop turn are polled, so connections that queued up while the loop was stuck are seen with
 * the lag that held them. The verdict lasts until the next sample: shedding stops as soon as the
 * loop keeps time again. The timer is unref'd and stopped by {@link close}.
 */
export class OverloadProbe {
  private timer: NodeJS.Timeout | undefined;
  private expected = 0;
  private state: OverloadState | undefined;

  constructor(readonly limits: OverloadLimits) {
    if (!this.enabled) return;
    this.expected = performance.now() + PROBE_INTERVAL_MS;
    this.timer = setInterval(() => this.sample(), PROBE_INTERVAL_MS);
    this.timer.unref();
  }

  get enabled(): boolean {
    return this.limits.maxEventLoopLagMs > 0 || this.limits.maxHeapUsedPercent > 0;
  }

  /** The load that makes the broker shed new connections now, or undefined when it has capacity. */
  get overloaded(): OverloadState | undefined {
    return this.state;
  }

  close(): void {
    if (this.timer !== undefined) clearInterval(this.timer);
    this.timer = undefined;
    this.state = undefined;
  }

  private sample(): void {
    const now = performance.now();
    const eventLoopLagMs = Math.max(0, Math.round(now - this.expected));
    this.expected = now + PROBE_INTERVAL_MS;
    let heapUsedPercent = 0;
    if (this.limits.maxHeapUsedPercent > 0) {
      const heap = getHeapStatistics();
      heapUsedPercent = Math.round((heap.used_heap_size * 100) / heap.heap_size_limit);
    }
    const lagging = this.limits.maxEventLoopLagMs > 0 && eventLoopLagMs > this.limits.maxEventLoopLagMs;
    const full = this.limits.maxHeapUsedPercent > 0 && heapUsedPercent >= this.limits.maxHeapUsedPercent;
    this.state = lagging || full ? { eventLoopLagMs, heapUsedPercent } : undefined;
  }
}

/** Who an event is about, as Engine.emit takes it. */
type EventClient = { readonly tenantId: string; readonly clientId?: string; readonly userId?: string } | undefined;
export type GateEmit = (type: EventType, client: EventClient, detail: Readonly<Record<string, EventDetailValue>>) => void;

/** The client a flapping ban is about. */
export interface GateClient {
  readonly tenantId: string;
  readonly clientId: string;
  readonly userId?: string;
  readonly remoteAddress: string;
}

/** The broker's connection gate: the overload probe, the address rate limiter and the flap detector, with their logs and events. */
export class ConnectionGate {
  readonly overload: OverloadProbe;
  readonly rate: AddressRateLimiter;
  readonly flapping: FlapDetector;
  /** Connections closed at accept because the broker was overloaded, since start. */
  overloadRefused = 0;
  /** Connections closed at accept by the rate limit, since start. */
  rateRefused = 0;
  /** CONNECTs refused because their client id is banned, since start. */
  bannedRefused = 0;
  /** Flapping bans begun, since start. */
  flappingBans = 0;

  constructor(
    config: SecurityConfig,
    private readonly logger: Logger,
    private readonly emit: GateEmit,
    private readonly clock: Clock = Date.now,
  ) {
    this.overload = new OverloadProbe(config.overload);
    this.rate = new AddressRateLimiter(config.connectionRate, clock);
    this.flapping = new FlapDetector(config.flapping, clock);
  }

  /** Last connection shed for overload (0: none yet): refusals less than RATE_EPISODE_GAP_MS apart are one episode. */
  private overloadRefusedAt = 0;

  /** Stops the overload probe's timer (broker stop). */
  close(): void {
    this.overload.close();
  }

  /** A new connection from `remoteAddress` on `listener`: whether to serve it (false: close it now). */
  admit(remoteAddress: string, listener: string): boolean {
    const overloaded = this.overload.overloaded;
    if (overloaded !== undefined) {
      this.shedForOverload(overloaded, remoteAddress, listener);
      return false;
    }
    const decision = this.rate.admit(remoteAddress);
    if (decision === ADMIT.ok) return true;
    this.rateRefused++;
    if (decision === ADMIT.refusedFirst) {
      const { perAddressPerSecond, burst } = this.rate.limits;
      this.logger.warn(
        { remote: remoteAddress, listener, perAddressPerSecond, burst },
        `connection rate from ${remoteAddress} above ${perAddressPerSecond}/s (burst ${burst}): its new connections are closed at accept (logged once per episode; security.connectionRate)`,
      );
      this.emit('connectionRateExceeded', undefined, { remoteAddress, listener, perAddressPerSecond, burst });
    }
    return false;
  }

  /** Closes a connection at accept while the broker is overloaded; the first of an episode is logged at warn and reported. */
  private shedForOverload(state: OverloadState, remoteAddress: string, listener: string): void {
    this.overloadRefused++;
    const now = this.clock();
    const first = this.overloadRefusedAt === 0 || now - this.overloadRefusedAt >= RATE_EPISODE_GAP_MS;
    this.overloadRefusedAt = now;
    if (!first) return;
    const { maxEventLoopLagMs, maxHeapUsedPercent } = this.overload.limits;
    this.logger.warn(
      { remote: remoteAddress, listener, ...state, maxEventLoopLagMs, maxHeapUsedPercent },
      `broker overloaded (event loop lag ${state.eventLoopLagMs} ms, limit ${maxEventLoopLagMs}; heap ${state.heapUsedPercent} % used, limit ${maxHeapUsedPercent}): new connections are closed at accept (logged once per episode; security.overload)`,
    );
    this.emit('connectionRateExceeded', undefined, { remoteAddress, listener, reason: 'overload', ...state });
  }

  /**
   * At CONNECT, once the tenant is known: seconds left on the client id's ban (0: not banned).
   * A banned client is reported (`banned`) and logged at debug; its ban was logged at warn when it began.
   */
  bannedSeconds(client: GateClient): number {
    if (!this.flapping.enabled) return 0;
    const left = this.flapping.bannedFor(sessionListKey(client.tenantId, client.clientId));
    if (left === 0) return 0;
    this.bannedRefused++;
    const seconds = Math.ceil(left / 1000);
    this.logger.debug(
      { tenantId: client.tenantId, clientId: client.clientId, remote: client.remoteAddress, seconds },
      'banned client refused',
    );
    this.emit('banned', client, { remoteAddress: client.remoteAddress, reason: 'flapping', remainingSeconds: seconds });
    return seconds;
  }

  /**
   * A connected client's connection ended (not at shutdown). `byClient`: it ended with the
   * client's own DISCONNECT, which is not a loop the broker needs to contain (a client that
   * connects, works and disconnects, as test suites do, is never counted). Every other end counts:
   * the network or the client's socket dropped, the broker closed it (protocol error, keep alive,
   * takeover by the same client id, kick).
   */
  disconnected(client: GateClient, byClient = false): void {
    if (byClient || !this.flapping.enabled || !this.flapping.disconnected(sessionListKey(client.tenantId, client.clientId))) return;
    this.flappingBans++;
    const { maxDisconnects, windowSeconds, banSeconds } = this.flapping.limits;
    this.logger.warn(
      { tenantId: client.tenantId, clientId: client.clientId, remote: client.remoteAddress, maxDisconnects, windowSeconds, banSeconds },
      `client "${client.clientId}" of tenant "${client.tenantId}" is flapping (connections ended without its DISCONNECT more than ${maxDisconnects} times, faster than ${maxDisconnects} per ${windowSeconds} s): banned for ${banSeconds} s (security.flapping)`,
    );
    this.emit('flappingDetected', client, { remoteAddress: client.remoteAddress, disconnects: maxDisconnects, windowSeconds, banSeconds });
  }
}
