import type { PluginLogger } from '@bifro/spi';
import { describeError, PLUGIN_NAME, type AuthPostgresError } from './errors';
import type { Clock } from './ttl-cache';

/** At most one warn line per failure code per this many milliseconds. */
export const FAILURE_LOG_INTERVAL_MS = 5_000;

interface Window {
  last: number;
  suppressed: number;
}

/**
 * The plugin's own warn lines about failed lookups: at most one per code every
 * {@link FAILURE_LOG_INTERVAL_MS} (with the count of lines left out), and one info line when the
 * database answers again after a failure.
 */
export class FailureLog {
  private readonly windows = new Map<string, Window>();
  private failuresSinceSuccess = 0;
  private firstFailureAt = 0;

  constructor(
    private readonly logger: PluginLogger,
    private readonly target: string,
    private readonly now: Clock = Date.now,
    private readonly intervalMs = FAILURE_LOG_INTERVAL_MS,
  ) {}

  /** A lookup failed with `err`. */
  failed(err: AuthPostgresError): void {
    if (err.code === 'BIFRO_AUTH_POSTGRES_UNAVAILABLE') {
      if (this.failuresSinceSuccess === 0) this.firstFailureAt = this.now();
      this.failuresSinceSuccess++;
    }
    this.warn(err.code, err.message, { code: err.code, target: this.target });
  }

  /** An idle pooled connection broke (the server went away): its own rate-limited line. */
  idleConnectionFailed(err: Error): void {
    this.warn(
      'idle',
      `BIFRO_AUTH_POSTGRES_UNAVAILABLE: ${PLUGIN_NAME}: an idle database connection to ${this.target} failed (${describeError(err)})`,
      {
        code: 'BIFRO_AUTH_POSTGRES_UNAVAILABLE',
        target: this.target,
      },
    );
  }

  /** The database answered a lookup. */
  succeeded(): void {
    if (this.failuresSinceSuccess === 0) return;
    const failed = this.failuresSinceSuccess;
    const downMs = this.now() - this.firstFailureAt;
    this.failuresSinceSuccess = 0;
    this.windows.delete('BIFRO_AUTH_POSTGRES_UNAVAILABLE');
    this.logger.info(`${PLUGIN_NAME}: the database ${this.target} answers again (${failed} lookup(s) failed over ${downMs} ms)`, {
      target: this.target,
      failed,
      downMs,
    });
  }

  private warn(key: string, msg: string, fields: Record<string, unknown>): void {
    const now = this.now();
    let window = this.windows.get(key);
    if (window === undefined) {
      window = { last: -Infinity, suppressed: 0 };
      this.windows.set(key, window);
    }
    if (now - window.last < this.intervalMs) {
      window.suppressed++;
      return;
    }
    const suppressed = window.suppressed;
    window.last = now;
    window.suppressed = 0;
    this.logger.warn(suppressed > 0 ? `${msg} (and ${suppressed} more like it since the previous line)` : msg, { ...fields, suppressed });
  }
}
