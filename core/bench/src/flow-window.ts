/**
 * Closed-loop flow control for QoS 0 load: publishers may run at most `size` messages ahead of
 * what the subscribers have received, so the generator measures the broker instead of filling
 * socket buffers and broker queues. QoS 0 may be dropped by design; when nothing arrives for
 * `stallMs` while publishers wait, the messages still outstanding are written off as lost and
 * publishing resumes.
 */
export class FlowWindow {
  /** Messages handed out to publishers. */
  sent = 0;
  /** Messages written off as lost after a stall. */
  lost = 0;
  /** Times a stall was detected. */
  stalls = 0;

  private waiters: (() => void)[] = [];
  private lastProgress = 0;
  private lastCompleted = 0;
  private timer: NodeJS.Timeout | null = null;

  /** `completed()` says how many messages the receivers have fully taken so far. */
  constructor(
    readonly size: number,
    private readonly completed: () => number,
    private readonly stallMs = 250,
  ) {}

  /** Starts stall detection; `stop()` ends it and wakes every waiter. */
  start(): void {
    this.lastProgress = Date.now();
    this.timer = setInterval(() => this.checkStall(), Math.max(10, Math.floor(this.stallMs / 4)));
  }

  stop(): void {
    if (this.timer !== null) clearInterval(this.timer);
    this.timer = null;
    this.wakeAll();
  }

  /** Takes room for `n` messages, or returns false when the window is full. */
  tryAcquire(n: number): boolean {
    if (this.sent + n - this.lost - this.completed() > this.size) return false;
    this.sent += n;
    return true;
  }

  /** Calls `cb` once when room may be available again (or on stop). */
  wait(cb: () => void): void {
    this.waiters.push(cb);
  }

  /** Receivers call this after each chunk; cheap when nobody waits. */
  poke(): void {
    if (this.waiters.length === 0) return;
    const done = this.completed();
    if (done !== this.lastCompleted) {
      this.lastCompleted = done;
      this.lastProgress = Date.now();
    }
    if (this.sent - this.lost - done <= this.size / 2) this.wakeAll();
  }

  private checkStall(): void {
    const done = this.completed();
    if (done !== this.lastCompleted) {
      this.lastCompleted = done;
      this.lastProgress = Date.now();
      return;
    }
    if (this.waiters.length === 0 || Date.now() - this.lastProgress < this.stallMs) return;
    this.stalls++;
    this.lost = this.sent - done;
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
