import type { ClientInfo } from '@bifro/spi';
import type { BalancerManager } from '../plugin-host/managers';
import type { Logger } from '../base/logger';
import { describeError } from '../base/errors';

/** Connected clients asked about in one go by the periodic redirect check before it yields to I/O. */
const REDIRECT_CHECK_SLICE = 1000;

/** A connection as the sweep sees it. */
export interface RedirectTarget {
  readonly state: string;
  readonly client: ClientInfo | undefined;
  redirect(permanent: boolean, serverReference: string | undefined): void;
}

/**
 * Ask the client balancer about every connected client every `mqtt.redirectCheckIntervalMs`
 * (docs/mqtt.md § Enhanced authentication and redirect); a client it moves is disconnected with v5
 * 0x9C / 0x9D and the server reference (a v3 client is just disconnected).
 */
export class RedirectSweep {
  private timer: NodeJS.Timeout | undefined;
  /** Whether a sweep is running. */
  private running = false;

  constructor(
    /** mqtt.redirectCheckIntervalMs; 0 turns the check off. */
    private readonly everyMs: number,
    private readonly connections: ReadonlySet<RedirectTarget>,
    private readonly balancer: BalancerManager,
    private readonly logger: Logger,
  ) {}

  start(): void {
    if (this.everyMs === 0 || this.timer !== undefined) return;
    this.timer = setInterval(() => void this.sweep(), this.everyMs);
    this.timer.unref();
  }

  stop(): void {
    if (this.timer !== undefined) clearInterval(this.timer);
  }

  /** One sweep over the connected clients; yields to I/O every REDIRECT_CHECK_SLICE clients. */
  private async sweep(): Promise<void> {
    if (this.running) return;
    this.running = true;
    try {
      let checked = 0;
      for (const conn of [...this.connections]) {
        const client = conn.client;
        if (conn.state !== 'connected' || client === undefined) continue;
        const answer = this.balancer.needRedirect(client);
        const decision = answer instanceof Promise ? await answer : answer;
        if (decision.type === 'redirect') conn.redirect(decision.permanent, decision.serverReference);
        if (++checked % REDIRECT_CHECK_SLICE === 0) await new Promise<void>((resolve) => setImmediate(resolve));
      }
    } catch (err) {
      this.logger.warn({ err: describeError(err) }, 'redirect check failed');
    } finally {
      this.running = false;
    }
  }
}
