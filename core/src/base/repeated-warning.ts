import type { Clock } from './clock';
import type { Logger } from './logger';

/** How often an episode still going on is logged again, with its count. */
const REMIND_MS = 60_000;
/** An episode ends once nothing was reported for this long. */
const QUIET_MS = 5000;

interface Episode {
  readonly since: number;
  count: number;
  lastAt: number;
  remindedAt: number;
  lastFields: Record<string, unknown>;
}

/**
 * One warn line per episode of a failure that repeats (forwarding to a node that is away, a
 * bucket that cannot be written), not one per occurrence: the first occurrence is logged with its
 * fields, an episode still going on is logged again every minute with its count, and when nothing
 * was reported for 5 s one info line says it ended, how long it lasted and how often it happened.
 * Episodes are kept apart by key (for example the node a batch went to).
 */
export class RepeatedWarning {
  private readonly episodes = new Map<string, Episode>();
  private timer: NodeJS.Timeout | undefined;

  constructor(
    private readonly logger: Logger,
    /** What failed, for the reminder and end lines ("forwarding to node b"). */
    private readonly what: (key: string) => string,
    private readonly clock: Clock = Date.now,
    private readonly quietMs = QUIET_MS,
    private readonly remindMs = REMIND_MS,
  ) {}

  /** An occurrence: logged at warn when it opens an episode for `key`, counted otherwise. */
  report(key: string, fields: Record<string, unknown>, message: string): void {
    const now = this.clock();
    const e = this.episodes.get(key);
    if (e !== undefined) {
      e.count++;
      e.lastAt = now;
      e.lastFields = fields;
      return;
    }
    this.episodes.set(key, { since: now, count: 1, lastAt: now, remindedAt: now, lastFields: fields });
    this.logger.warn(fields, message);
    if (this.timer === undefined) {
      this.timer = setInterval(() => this.sweep(), Math.min(1000, this.quietMs));
      this.timer.unref();
    }
  }

  /** Occurrences of the episode open for `key` (0 when none is). */
  count(key: string): number {
    return this.episodes.get(key)?.count ?? 0;
  }

  private sweep(): void {
    const now = this.clock();
    for (const [key, e] of this.episodes) {
      if (now - e.lastAt >= this.quietMs) {
        this.episodes.delete(key);
        if (e.count > 1)
          this.logger.info(
            { occurrences: e.count, afterMs: now - e.since },
            `${this.what(key)}: no failure for ${this.quietMs / 1000} s, ${e.count} in all`,
          );
      } else if (now - e.remindedAt >= this.remindMs) {
        e.remindedAt = now;
        this.logger.warn(
          { ...e.lastFields, occurrences: e.count, sinceMs: now - e.since },
          `${this.what(key)}: still failing, ${e.count} times so far`,
        );
      }
    }
    if (this.episodes.size === 0) this.stop();
  }

  /** Stops the timer (the broker stops). */
  stop(): void {
    if (this.timer !== undefined) clearInterval(this.timer);
    this.timer = undefined;
  }
}
