import type { ClientInfo } from '@bifro/spi';
import type { BalancerManager } from '../plugin-host/managers';
import type { Logger } from '../base/logger';
import { describeError } from '../base/errors';

/** Connected clients asked about in one go by the periodic redirect check before it yields to I/O. */
const REDIRECT_CHECK_SLICE = 1000;
/** A drain moves its clients in slices this far apart (its rate / 10 clients per slice). */
const DRAIN_SLICE_MS = 100;
/** A drain looks again this often for clients that connected while it ran (a CONNECT already past the balancer). */
const DRAIN_RESWEEP_MS = 1000;

const pause = (ms: number): Promise<void> =>
  new Promise((resolve) => {
    setTimeout(resolve, ms).unref();
  });

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
  /** A drain is moving the clients: the periodic sweep stands aside, so they are not all moved in one go. */
  private draining = false;
  private stopped = false;

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
    this.stopped = true;
    if (this.timer !== undefined) clearInterval(this.timer);
  }

  /**
   * A node drain (docs/cluster.md § Drain and removal): asks the balancer (whose drain answers
   * override the plugin's) about every connected client, moving at most `perSecond()` of them a
   * second, and again every second for late arrivals, while `active()`. One drain runs at a time.
   */
  async drain(perSecond: () => number, active: () => boolean): Promise<void> {
    if (this.draining) return;
    const going = (): boolean => !this.stopped && active();
    this.draining = true;
    try {
      while (going()) {
        let moved = 0;
        for (const conn of [...this.connections]) {
          if (!going()) break;
          const client = conn.client;
          if (conn.state !== 'connected' || client === undefined) continue;
          const answer = this.balancer.needRedirect(client);
          const decision = answer instanceof Promise ? await answer : answer;
          if (decision.type !== 'redirect') continue;
          conn.redirect(decision.permanent, decision.serverReference);
          if (++moved >= Math.max(1, Math.ceil((perSecond() * DRAIN_SLICE_MS) / 1000))) {
            moved = 0;
            await pause(DRAIN_SLICE_MS);
          }
        }
        await pause(DRAIN_RESWEEP_MS);
      }
    } catch (err) {
      this.logger.warn({ err: describeError(err) }, 'drain sweep failed');
    } finally {
      this.draining = false;
    }
  }

  /** One sweep over the connected clients; yields to I/O every REDIRECT_CHECK_SLICE clients. */
  private async sweep(): Promise<void> {
    if (this.running || this.draining) return;
    this.running = true;
    try {
      let checked = 0;
      for (const conn of [...this.connections]) {
        const client = conn.client;
        // A drain that began meanwhile moves them at its own pace.
        if (this.draining) break;
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
