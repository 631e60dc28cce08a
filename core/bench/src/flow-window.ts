/**
 * Closed-loop flow control for publishers: they may run at most `size` messages ahead of what the
 * subscribers have received, so the generator measures the broker instead of filling socket
 * buffers and broker queues. QoS 0 may be dropped by design; when nothing arrives for `stallMs`
 * while publishers wait, the messages still outstanding are written off as lost and publishing
 * resumes.
 *
 * The counts live in a ledger: a local one within a thread, or the shared counters when the
 * publishers and subscribers of one scenario run in several worker threads. Then publishers
 * also poll every `pollMs`, since receivers in another thread cannot wake them.
 */
import { SharedState, Slot } from './shared-state';

export interface WindowLedger {
  /** Messages handed out to publishers (may wrap at 2^32 when shared). */
  readonly sent: number;
  addSent(n: number): void;
  /** Messages written off as lost. */
  readonly lost: number;
  /** Sets `lost` from `expected` to `next`; false when it was not `expected` any more. */
  writeOff(expected: number, next: number): boolean;
}

export class LocalLedger implements WindowLedger {
  sent = 0;
  lost = 0;

  addSent(n: number): void {
    this.sent += n;
  }

  writeOff(expected: number, next: number): boolean {
    if (this.lost !== expected) return false;
    this.lost = next;
    return true;
  }
}

/** The window's counts in the shared state, for publishers spread over worker threads. */
export class SharedLedger implements WindowLedger {
  constructor(private readonly state: SharedState) {}

  get sent(): number {
    return this.state.load(Slot.WINDOW_SENT);
  }

  addSent(n: number): void {
    this.state.add(Slot.WINDOW_SENT, n);
  }

  get lost(): number {
    return this.state.load(Slot.WINDOW_LOST);
  }

  writeOff(expected: number, next: number): boolean {
    return this.state.compareAndSetLost(expected, next);
  }
}

export class FlowWindow {
  /** Times this window detected a stall and wrote messages off. */
  stalls = 0;

  private waiters: (() => void)[] = [];
  private lastProgress = 0;
  private lastCompleted = 0;
  private timer: NodeJS.Timeout | null = null;
  private pollTimer: NodeJS.Timeout | null = null;

  /** `completed()` says how many messages the receivers have fully taken so far. */
  constructor(
    readonly size: number,
    private readonly completed: () => number,
    private readonly stallMs = 250,
    private readonly ledger: WindowLedger = new LocalLedger(),
    private readonly pollMs = 0,
  ) {}

  /** Messages handed out to publishers. */
  get sent(): number {
    return this.ledger.sent;
  }

  /** Messages written off as lost after a stall. */
  get lost(): number {
    return this.ledger.lost;
  }

  /** Messages handed out and neither received nor written off. */
  outstanding(): number {
    return (this.ledger.sent - this.ledger.lost - this.completed()) | 0;
  }

  /** Starts stall detection; `stop()` ends it and wakes every waiter. */
  start(): void {
    this.lastProgress = Date.now();
    this.lastCompleted = this.completed();
    this.timer = setInterval(() => this.checkStall(), Math.max(10, Math.floor(this.stallMs / 4)));
  }

  stop(): void {
    if (this.timer !== null) clearInterval(this.timer);
    if (this.pollTimer !== null) clearTimeout(this.pollTimer);
    this.timer = null;
    this.pollTimer = null;
    this.wakeAll();
  }

  /** Takes room for `n` messages, or returns false when the window is full. */
  tryAcquire(n: number): boolean {
    if (this.outstanding() + n > this.size) return false;
    this.ledger.addSent(n);
    return true;
  }

  /** Takes room for as many of `n` messages as fit; returns how many (0 when full). */
  acquireUpTo(n: number): number {
    const k = Math.min(n, this.size - this.outstanding());
    if (k <= 0) return 0;
    this.ledger.addSent(k);
    return k;
  }

  /** Calls `cb` once when room may be available again (or on stop). */
  wait(cb: () => void): void {
    this.waiters.push(cb);
    if (this.pollMs > 0 && this.pollTimer === null) this.pollTimer = setTimeout(this.poll, this.pollMs);
  }

  /** Receivers call this after each chunk; cheap when nobody waits. */
  poke(): void {
    if (this.waiters.length === 0) return;
    const done = this.completed();
    if (done !== this.lastCompleted) {
      this.lastCompleted = done;
      this.lastProgress = Date.now();
    }
    if (this.outstanding() <= this.size / 2) this.wakeAll();
  }

  private readonly poll = (): void => {
    this.pollTimer = null;
    this.poke();
    if (this.waiters.length > 0) this.pollTimer = setTimeout(this.poll, this.pollMs);
  };

  private checkStall(): void {
    const done = this.completed();
    if (done !== this.lastCompleted) {
      this.lastCompleted = done;
      this.lastProgress = Date.now();
      return;
    }
    if (this.waiters.length === 0 || Date.now() - this.lastProgress < this.stallMs) return;
    const lost = this.ledger.lost;
    const outstanding = (this.ledger.sent - lost - done) | 0;
    if (outstanding > 0 && this.ledger.writeOff(lost, lost + outstanding)) this.stalls++;
    this.lastProgress = Date.now();
    this.wakeAll();
  }

  private wakeAll(): void {
    const waiters = this.waiters;
    if (waiters.length === 0) return;
    this.waiters = [];
    for (const w of waiters) w();
  }
}
