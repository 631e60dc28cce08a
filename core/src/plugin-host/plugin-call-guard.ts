import { performance } from 'node:perf_hooks';
import type { PluginKind, PluginKindMap } from '@bifro/spi';
import { describeError } from '../base/errors';
import { latencyBuckets, recordLatency } from './call-latency';
import { raceTimeout, TIMED_OUT } from './call-timeout';
import type { PluginCallStats } from './managers';
import type { CallSubject, PluginCallFailureReason, PluginFailureReporter } from './plugin-failure-reporter';

/** Returned by {@link GuardedPlugin.settle} when the call failed (already counted and reported). */
export const CALL_FAILED: unique symbol = Symbol('call failed');

/**
 * One plugin instance of one kind, as the managers hold it: the instance plus its call statistics
 * and the means to count and report failures. Managers call the instance directly (so a
 * synchronous answer costs no promise) and tell the guard how the call went.
 */
export class GuardedPlugin<K extends PluginKind> {
  readonly stats: PluginCallStats = { calls: 0, failures: 0, timeouts: 0, totalMs: 0, latency: latencyBuckets(), lastFailureAt: 0 };

  constructor(
    readonly name: string,
    readonly kind: K,
    readonly instance: PluginKindMap[K],
    private readonly reporter: PluginFailureReporter,
    private readonly timeoutMs: number,
  ) {}

  /** A timestamp to pass back to {@link succeeded} / {@link failed}. */
  start(): number {
    return performance.now();
  }

  /** Counts a call that returned a usable answer. */
  succeeded(start: number): void {
    const ms = performance.now() - start;
    this.stats.calls++;
    this.stats.totalMs += ms;
    recordLatency(this.stats.latency, ms);
  }

  /** Counts and reports a call that threw, timed out or answered something invalid. */
  failed(start: number, method: string, reason: PluginCallFailureReason, error: unknown, subject?: CallSubject): void {
    const ms = performance.now() - start;
    this.stats.calls++;
    this.stats.failures++;
    if (reason === 'timeout') this.stats.timeouts++;
    this.stats.totalMs += ms;
    recordLatency(this.stats.latency, ms);
    this.stats.lastFailureAt = Date.now();
    this.reporter.report({
      plugin: this.name,
      kind: this.kind,
      method,
      reason,
      message: reason === 'timeout' ? `no answer within ${this.timeoutMs} ms` : describeError(error),
      subject,
    });
  }

  /**
   * Waits for an asynchronous answer under the call timeout. A rejection or a timeout is counted
   * and reported here and yields {@link CALL_FAILED}; a value is returned for the caller to check
   * and count with {@link succeeded} or {@link failed}.
   */
  async settle<T>(pending: PromiseLike<T>, start: number, method: string, subject?: CallSubject): Promise<T | typeof CALL_FAILED> {
    try {
      const value = await raceTimeout(pending, this.timeoutMs);
      if (value === TIMED_OUT) {
        this.failed(start, method, 'timeout', undefined, subject);
        return CALL_FAILED;
      }
      return value;
    } catch (err) {
      this.failed(start, method, 'error', err, subject);
      return CALL_FAILED;
    }
  }
}

/** The subject of a call about a connected client. */
export function clientSubject(client: { readonly tenantId: string; readonly clientId: string; readonly userId: string }): CallSubject {
  return { tenantId: client.tenantId, clientId: client.clientId, userId: client.userId };
}
