import type { Clock } from '../../core/src/base/clock';

/** The broker's timer wheel slot (core/src/session/timer-wheel.ts): a deadline fires at most this late. */
export const WHEEL_SLOT_MS = 250;

/**
 * A clock a test moves forward: real time plus what the test added. A broker started with it
 * (StartOptions.clock) sees keep alive, will delay, session and message expiry pass at once; its
 * timer wheel still ticks in real time, so what became due fires within one slot.
 */
export class TestClock {
  private offset = 0;
  readonly now: Clock = () => Date.now() + this.offset;

  /** Move time forward by `ms`, then wait for the wheel's next tick (plus a margin) so what became due has fired. */
  async advance(ms: number): Promise<void> {
    this.offset += ms;
    await new Promise((resolve) => setTimeout(resolve, WHEEL_SLOT_MS + 50));
  }
}
