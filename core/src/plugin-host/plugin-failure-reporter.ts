import type { EventManager } from './managers';
import type { Logger } from '../base/logger';

/** Why a plugin call counted as failed. */
export type PluginCallFailureReason = 'error' | 'timeout' | 'invalidResult';

/** Who a failed call was about, when known. */
export interface CallSubject {
  readonly tenantId?: string;
  readonly clientId?: string;
  readonly userId?: string;
}

/** One failed plugin call. */
export interface PluginCallFailure {
  readonly plugin: string;
  readonly kind: string;
  readonly method: string;
  readonly reason: PluginCallFailureReason;
  readonly message: string;
  readonly subject: CallSubject | undefined;
}

/** At most one log line per plugin and kind per this many milliseconds. */
const LOG_INTERVAL_MS = 1000;

interface LogWindow {
  last: number;
  suppressed: number;
}

/**
 * Logs failed plugin calls at warn (at most one line per plugin and kind per second, with the
 * count of lines left out) and reports them as `pluginCallFailed` events when a collector wants
 * them. Failures of event collectors are logged only, so a broken collector cannot loop.
 */
export class PluginFailureReporter {
  private readonly windows = new Map<string, LogWindow>();
  private events: EventManager | undefined;

  constructor(private readonly logger: Logger) {}

  /** Connects the event manager once it exists (it is built from guarded collectors that use this reporter). */
  attachEvents(events: EventManager): void {
    this.events = events;
  }

  report(failure: PluginCallFailure): void {
    this.log(failure);
    const events = this.events;
    if (failure.kind === 'events' || events === undefined || !events.wants('pluginCallFailed')) return;
    events.report({
      type: 'pluginCallFailed',
      group: 'plugin',
      time: Date.now(),
      tenantId: failure.subject?.tenantId,
      clientId: failure.subject?.clientId,
      userId: failure.subject?.userId,
      detail: { plugin: failure.plugin, kind: failure.kind, method: failure.method, reason: failure.reason, message: failure.message },
    });
  }

  private log(failure: PluginCallFailure): void {
    const key = `${failure.plugin}\u0000${failure.kind}`;
    const now = Date.now();
    let window = this.windows.get(key);
    if (window === undefined) {
      window = { last: 0, suppressed: 0 };
      this.windows.set(key, window);
    }
    if (now - window.last < LOG_INTERVAL_MS) {
      window.suppressed++;
      return;
    }
    const suppressed = window.suppressed;
    window.last = now;
    window.suppressed = 0;
    this.logger.warn(
      {
        plugin: failure.plugin,
        kind: failure.kind,
        method: failure.method,
        reason: failure.reason,
        err: failure.message,
        tenantId: failure.subject?.tenantId,
        clientId: failure.subject?.clientId,
        suppressed,
      },
      `plugin call failed: ${failure.plugin} ${failure.kind}.${failure.method} (${failure.reason}): ${failure.message}`,
    );
  }
}
