import { sessionListKey, type EventDetailValue, type EventType } from '@bifro/spi';
import type { Clock } from '../base/clock';
import type { SecurityConfig } from '../base/config-types';
import type { Logger } from '../base/logger';

/**
 * Connection floods and flapping (docs/security.md § Connection floods and flapping):
 *
 * - {@link AddressRateLimiter}: a token bucket per remote address, asked once per accepted TCP
 *   connection (after the PROXY header when the listener expects one, before TLS and MQTT). Over
 *   the limit the socket is closed before any CONNECT work.
 * - {@link FlapDetector}: counts the ends of connected sessions per tenant and client id; too many
 *   within a window bans the client id for a while (CONNACK 0x8A Banned, v3 0x05).
 *
 * Both keep bounded tables (swept of idle entries, oldest evicted when full) and take a clock so
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

export interface RateLimits {
  /** Tokens added per second; 0 = no limit. */
  readonly perAddressPerSecond: number;
  /** Bucket size: connections accepted at once from an address that was quiet. */
  readonly burst: number;
  /** Most addresses tracked at once. */
  readonly maxTrackedAddresses: number;
}

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

export interface FlapLimits {
  /** Connection ends within the window that ban the client id; 0 = no flapping detection. */
  readonly maxDisconnects: number;
  readonly windowSeconds: number;
  readonly banSeconds: number;
  /** Most client ids tracked at once. */
  readonly maxTrackedClients: number;
}

interface FlapEntry {
  windowStart: number;
  count: number;
  /** 0: not banned. */
  bannedUntil: number;
}

/** Counts connection ends per key (tenant + client id) in a fixed window; too many bans the key. */
export class FlapDetector {
  private readonly entries = new Map<string, FlapEntry>();
  private readonly windowMs: number;
  private readonly banMs: number;
  private lastSweep: number;

  constructor(
    readonly limits: FlapLimits,
    private readonly clock: Clock = Date.now,
  ) {
    this.windowMs = limits.windowSeconds * 1000;
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

  /** A connected client's connection ended. Returns true when this end starts a ban. */
  disconnected(key: string): boolean {
    if (!this.enabled) return false;
    const now = this.clock();
    if (now - this.lastSweep >= SWEEP_INTERVAL_MS) this.sweep(now);
    let entry = this.entries.get(key);
    if (entry === undefined) {
      this.makeRoom(now);
      entry = { windowStart: now, count: 0, bannedUntil: 0 };
      this.entries.set(key, entry);
    }
    if (entry.bannedUntil > now) return false;
    if (now - entry.windowStart >= this.windowMs) {
      entry.windowStart = now;
      entry.count = 0;
    }
    if (++entry.count < this.limits.maxDisconnects) return false;
    entry.bannedUntil = now + this.banMs;
    entry.count = 0;
    entry.windowStart = now;
    return true;
  }

  private idle(entry: FlapEntry, now: number): boolean {
    return entry.bannedUntil <= now && now - entry.windowStart >= this.windowMs;
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

/** The broker's connection gate: the address rate limiter and the flap detector, with their logs and events. */
export class ConnectionGate {
  readonly rate: AddressRateLimiter;
  readonly flapping: FlapDetector;
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
    clock: Clock = Date.now,
  ) {
    this.rate = new AddressRateLimiter(config.connectionRate, clock);
    this.flapping = new FlapDetector(config.flapping, clock);
  }

  /** A new connection from `remoteAddress` on `listener`: whether to serve it (false: close it now). */
  admit(remoteAddress: string, listener: string): boolean {
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

  /** A connected client's connection ended (not at shutdown). */
  disconnected(client: GateClient): void {
    if (!this.flapping.enabled || !this.flapping.disconnected(sessionListKey(client.tenantId, client.clientId))) return;
    this.flappingBans++;
    const { maxDisconnects, windowSeconds, banSeconds } = this.flapping.limits;
    this.logger.warn(
      { tenantId: client.tenantId, clientId: client.clientId, remote: client.remoteAddress, maxDisconnects, windowSeconds, banSeconds },
      `client "${client.clientId}" of tenant "${client.tenantId}" is flapping (${maxDisconnects} disconnects within ${windowSeconds} s): banned for ${banSeconds} s (security.flapping)`,
    );
    this.emit('flappingDetected', client, { remoteAddress: client.remoteAddress, disconnects: maxDisconnects, windowSeconds, banSeconds });
  }
}
