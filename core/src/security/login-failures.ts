import type { Clock } from '../base/clock';
import type { SecurityConfig } from '../base/config-types';

/**
 * Back-off of password guessing (docs/security.md § Password guessing): failed logins are counted
 * per login name (the CONNECT user name, or the SCRAM `n=` user) and per remote address, across
 * connections. Past a threshold within the window:
 *
 * - an **address** gets at most one attempt per back-off interval; attempts in between are refused
 *   at once (bad credentials, no plugin call). One address guessing is stopped here, and its refused
 *   attempts do not count against the logins it guesses.
 * - a **login** gets at most one attempt per back-off interval too, but an attempt in between
 *   *waits* for the next free interval (up to `maxBackoffMs`) instead of being refused: a guess of
 *   somebody's password delays that user's own logins, it cannot lock them out.
 *
 * The interval starts at `backoffMs` and doubles with every further failure, up to `maxBackoffMs`.
 * A success resets the login's count, not the address's (else one valid account would let an
 * address reset its count between guesses). Both tables are bounded (idle entries swept, the
 * least recently failed evicted when full) and read a clock so tests do not sleep.
 */

/** `security.loginFailures` (its keys are described in core/src/base/config-types.ts). */
export type LoginFailureLimits = SecurityConfig['loginFailures'];

/** What to do with an attempt: go on now, go on after `delayMs`, or refuse it. */
export type LoginAdmission =
  { readonly type: 'go'; readonly delayMs: number } | { readonly type: 'refuse'; readonly key: 'login' | 'address' };

const GO_NOW: LoginAdmission = { type: 'go', delayMs: 0 };
/** Idle entries are swept at most this often (and when a table is full, at most once per second). */
const SWEEP_INTERVAL_MS = 60_000;
const FULL_SWEEP_INTERVAL_MS = 1_000;

interface FailureEntry {
  /** Failures since the count was last forgotten. */
  count: number;
  lastFailure: number;
  /** The earliest time of the next attempt while backing off (0: none). */
  nextSlot: number;
}

/** Failure counts of one kind of key (logins or addresses), in a bounded table. */
class FailureTable {
  private readonly entries = new Map<string, FailureEntry>();
  private lastSweep: number;

  constructor(
    private readonly threshold: number,
    private readonly limits: LoginFailureLimits,
    private readonly windowMs: number,
    now: number,
  ) {
    this.lastSweep = now;
  }

  get size(): number {
    return this.entries.size;
  }

  get enabled(): boolean {
    return this.threshold > 0;
  }

  /** The back-off interval after `count` failures; 0 below the threshold. */
  interval(count: number): number {
    if (count < this.threshold) return 0;
    const doublings = Math.min(count - this.threshold, 30);
    return Math.min(this.limits.maxBackoffMs, this.limits.backoffMs * 2 ** doublings);
  }

  /** The entry of `key` when it is backing off now; undefined otherwise (a stale count is forgotten). */
  backingOff(key: string, now: number): FailureEntry | undefined {
    const entry = this.entries.get(key);
    if (entry === undefined) return undefined;
    if (now - entry.lastFailure >= this.windowMs && entry.nextSlot <= now) {
      this.entries.delete(key);
      return undefined;
    }
    return entry.count >= this.threshold ? entry : undefined;
  }

  failed(key: string, now: number): void {
    if (now - this.lastSweep >= SWEEP_INTERVAL_MS) this.sweep(now);
    let entry = this.entries.get(key);
    if (entry !== undefined && now - entry.lastFailure >= this.windowMs && entry.nextSlot <= now) entry = undefined;
    if (entry === undefined) {
      this.entries.delete(key);
      this.makeRoom(now);
      entry = { count: 0, lastFailure: now, nextSlot: 0 };
    } else {
      // Most recently failed last: eviction takes the entry quiet the longest.
      this.entries.delete(key);
    }
    this.entries.set(key, entry);
    entry.count++;
    entry.lastFailure = now;
    const interval = this.interval(entry.count);
    if (interval > 0) entry.nextSlot = Math.max(entry.nextSlot, now + interval);
  }

  forget(key: string): void {
    this.entries.delete(key);
  }

  private sweep(now: number): void {
    this.lastSweep = now;
    for (const [key, entry] of this.entries)
      if (now - entry.lastFailure >= this.windowMs && entry.nextSlot <= now) this.entries.delete(key);
  }

  private makeRoom(now: number): void {
    if (this.entries.size < this.limits.maxTrackedKeys) return;
    if (now - this.lastSweep >= FULL_SWEEP_INTERVAL_MS) this.sweep(now);
    while (this.entries.size >= this.limits.maxTrackedKeys) this.entries.delete(this.entries.keys().next().value!);
  }
}

/** The failure counts of one broker process: asked before an attempt, told its outcome. */
export class LoginFailures {
  private readonly logins: FailureTable;
  private readonly addresses: FailureTable;
  /** Attempts refused without asking the auth plugins, since start. */
  refused = 0;
  /** Attempts held for a login's back-off, since start. */
  delayed = 0;

  constructor(
    readonly limits: LoginFailureLimits,
    private readonly clock: Clock = Date.now,
  ) {
    const now = clock();
    const windowMs = limits.windowSeconds * 1000;
    this.logins = new FailureTable(limits.perLogin, limits, windowMs, now);
    this.addresses = new FailureTable(limits.perAddress, limits, windowMs, now);
  }

  get enabled(): boolean {
    return this.logins.enabled || this.addresses.enabled;
  }

  /** Logins and addresses tracked now. */
  get size(): { readonly logins: number; readonly addresses: number } {
    return { logins: this.logins.size, addresses: this.addresses.size };
  }

  /** An attempt of `login` (undefined: none named) from `address`: go now, wait, or refuse. */
  admit(address: string, login: string | undefined): LoginAdmission {
    if (!this.enabled) return GO_NOW;
    const now = this.clock();
    const byAddress = this.addresses.enabled ? this.addresses.backingOff(address, now) : undefined;
    if (byAddress !== undefined) {
      if (now < byAddress.nextSlot) {
        this.refused++;
        return { type: 'refuse', key: 'address' };
      }
      // One attempt per interval: the next waits for the interval after this one.
      byAddress.nextSlot = now + this.addresses.interval(byAddress.count);
    }
    const byLogin = login === undefined || !this.logins.enabled ? undefined : this.logins.backingOff(login, now);
    if (byLogin === undefined) return GO_NOW;
    const slot = Math.max(now, byLogin.nextSlot);
    const delayMs = slot - now;
    if (delayMs > this.limits.maxBackoffMs) {
      this.refused++;
      return { type: 'refuse', key: 'login' };
    }
    byLogin.nextSlot = slot + this.logins.interval(byLogin.count);
    if (delayMs === 0) return GO_NOW;
    this.delayed++;
    return { type: 'go', delayMs };
  }

  /** The attempt failed (bad credentials, or nobody knew the login). */
  failed(address: string, login: string | undefined): void {
    if (!this.enabled) return;
    const now = this.clock();
    if (this.addresses.enabled) this.addresses.failed(address, now);
    if (login !== undefined && this.logins.enabled) this.logins.failed(login, now);
  }

  /** The attempt succeeded: the login's count is forgotten. */
  succeeded(login: string | undefined): void {
    if (login !== undefined) this.logins.forget(login);
  }
}

/**
 * The login a SCRAM client-first message names (`n,,n=<user>,r=...`, RFC 5802 § 5.1: `=2C` and
 * `=3D` stand for `,` and `=`); undefined when the data is not one.
 */
export function scramLogin(data: Uint8Array | undefined): string | undefined {
  if (data === undefined || data.length === 0 || data.length > 4096) return undefined;
  const text = Buffer.from(data).toString('utf8');
  const first = text.indexOf(',');
  const second = first < 0 ? -1 : text.indexOf(',', first + 1);
  if (second < 0 || !text.startsWith('n=', second + 1)) return undefined;
  const end = text.indexOf(',', second + 3);
  const name = text.slice(second + 3, end < 0 ? text.length : end);
  return name === '' ? undefined : name.replace(/=2C/g, ',').replace(/=3D/g, '=');
}
