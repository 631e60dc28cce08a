import type { Storage, StorageHealth } from '@bifro/spi';
import type { Clock } from '../base/clock';
import type { EmitEvent, EventClient } from '../base/broker-events';
import { describeError } from '../base/errors';
import type { Logger } from '../base/logger';

/** How often an open episode asks the storage whether it healed. */
const CHECK_MS = 1000;
/** An episode ends only once no call failed for this long (so a storage failing every other call does not flap). */
const QUIET_MS = 1000;
/** How often a long episode is logged again, with its counts so far. */
const REMIND_MS = 60_000;

/** An episode of failing storage calls: from the first failure until the storage works again. */
interface Episode {
  readonly since: number;
  readonly firstCall: string;
  readonly firstError: string;
  calls: number;
  refused: number;
  lastFailureAt: number;
  /** A call succeeded after the last failure (how a storage without health() shows it works again). */
  succeededSince: boolean;
  remindedAt: number;
}

/**
 * The broker's view of its storage's health. A failed storage call opens an episode: logged at
 * error once (the call, the error, the session), reported as a `storageFailed` event, counted in
 * the metrics, and `/ready` answers 503 with the reason while it lasts. Publishes refused because
 * of it are counted. The episode ends when the storage works again: its `health()` says so (SPI
 * 1.6.0), or, for a storage without it, a call succeeded; in both cases only after a second
 * without failures. Then one warn line and a `storageRecovered` event say how long it lasted, how
 * many calls failed and how many messages were refused.
 */
export class StorageHealthMonitor {
  /** Failed calls since the start, by call (`inbox append`, `session save`...). */
  readonly failedCalls = new Map<string, number>();
  /** Publishes refused (v5 0x80, v3 disconnected) while an episode was open, since the start. */
  refusedMessages = 0;
  /** Episodes since the start. */
  episodes = 0;
  private episode: Episode | undefined;
  private timer: NodeJS.Timeout | undefined;

  constructor(
    private readonly storage: Storage,
    private readonly logger: Logger,
    private readonly emit: EmitEvent,
    private readonly clock: Clock,
  ) {}

  /** Whether an episode is open. */
  get failing(): boolean {
    return this.episode !== undefined;
  }

  /** The storage's state for `/ready`: its own word when it has one, else whether calls are failing. */
  health(): StorageHealth {
    const own = this.storage.health?.();
    if (own !== undefined && !own.ok) return own;
    const e = this.episode;
    if (e === undefined || (own !== undefined && this.clock() - e.lastFailureAt >= QUIET_MS)) return { ok: true };
    return {
      ok: false,
      reason: `storage calls fail since ${new Date(e.since).toISOString()} (${e.calls} failed, first: ${e.firstCall}: ${e.firstError})`,
    };
  }

  /** A storage call failed. */
  failed(call: string, err: unknown, client: EventClient | undefined): void {
    this.failedCalls.set(call, (this.failedCalls.get(call) ?? 0) + 1);
    const now = this.clock();
    const e = this.episode;
    if (e !== undefined) {
      e.calls++;
      e.lastFailureAt = now;
      e.succeededSince = false;
      if (now - e.remindedAt >= REMIND_MS) {
        e.remindedAt = now;
        this.logger.error(
          { failedCalls: e.calls, refusedMessages: e.refused, sinceMs: now - e.since, lastError: describeError(err) },
          'storage calls still failing',
        );
      }
      return;
    }
    const error = describeError(err);
    this.episodes++;
    this.episode = {
      since: now,
      firstCall: call,
      firstError: error,
      calls: 1,
      refused: 0,
      lastFailureAt: now,
      succeededSince: false,
      remindedAt: now,
    };
    this.logger.error(
      { call, tenantId: client?.tenantId, clientId: client?.clientId, err: error },
      'storage call failed: QoS 1/2 messages that need storage are refused (v5 0x80, v3 disconnected) until it works again',
    );
    this.emit('storageFailed', client, { call, error });
    this.timer = setInterval(() => this.check(), CHECK_MS);
    this.timer.unref();
  }

  /** A storage call succeeded (cheap: a field test while no episode is open). */
  succeeded(): void {
    const e = this.episode;
    if (e !== undefined) e.succeededSince = true;
  }

  /** A publish was refused because a write it needed failed. */
  refused(): void {
    this.refusedMessages++;
    if (this.episode !== undefined) this.episode.refused++;
  }

  private check(): void {
    const e = this.episode;
    if (e === undefined) return;
    const now = this.clock();
    if (now - e.lastFailureAt < QUIET_MS) return;
    const own = this.storage.health?.();
    if (own === undefined ? !e.succeededSince : !own.ok) return;
    this.episode = undefined;
    clearInterval(this.timer);
    this.timer = undefined;
    const detail = { afterMs: now - e.since, failedCalls: e.calls, refusedMessages: e.refused };
    this.logger.warn({ ...detail, firstError: e.firstError }, 'storage works again');
    this.emit('storageRecovered', undefined, detail);
  }

  close(): void {
    if (this.timer !== undefined) clearInterval(this.timer);
    this.timer = undefined;
  }
}
