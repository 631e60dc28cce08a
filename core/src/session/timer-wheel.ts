import type { Clock } from '../base/clock';

/**
 * One hashed timer wheel for every connection deadline (connect timeout, keep alive): no timer per
 * connection. Activity only updates a timestamp on the entry; when its slot comes round, the entry
 * checks its real deadline and either fires or is placed again. Resolution is one slot (default
 * 250 ms), so a deadline fires at most one slot late.
 */
export interface WheelEntry {
  /** Slot index the entry sits in, -1 when not scheduled. Owned by the wheel. */
  wheelSlot: number;
  /** Called when its slot comes round; returns the next deadline (ms since epoch) to stay scheduled, or 0 to drop out. */
  onWheelTick(now: number): number;
}

export class TimerWheel {
  private readonly slots: Set<WheelEntry>[];
  private cursor = 0;
  private readonly timer: NodeJS.Timeout | undefined;
  /** The clock deadlines are measured with (Date.now; tests pass their own and drive {@link tick}). */
  readonly clock: Clock;
  /** Coarse clock updated every tick: cheap to read on hot paths. */
  now: number;
  /** The clock at the slot the cursor stands for: what a tick catches up from. */
  private cursorTime: number;

  constructor(
    /** Slot length in milliseconds; also how stale `now` may be. */
    readonly slotMs = 250,
    slotCount = 512,
    /** `clock` replaces Date.now; `manual` leaves the ticking to the caller (tests). */
    options: { readonly clock?: Clock; readonly manual?: boolean } = {},
  ) {
    const clock = options.clock ?? Date.now;
    this.clock = clock;
    this.now = clock();
    this.cursorTime = this.now;
    this.slots = Array.from({ length: slotCount }, () => new Set<WheelEntry>());
    if (options.manual !== true) this.timer = setInterval(() => this.tick(clock()), slotMs).unref();
  }

  /** Place an entry to be looked at when `deadline` (ms since epoch) has passed. */
  schedule(entry: WheelEntry, deadline: number): void {
    this.place(entry, deadline, this.clock());
  }

  /**
   * Make sure the entry is looked at by `deadline`: it is placed there unless it already sits in
   * that slot or an earlier one (an entry has one slot; its callback computes the next deadline).
   */
  scheduleBy(entry: WheelEntry, deadline: number): void {
    const from = this.clock();
    if (entry.wheelSlot >= 0) {
      const n = this.slots.length;
      if ((entry.wheelSlot - this.cursor + n) % n <= this.steps(deadline, from)) return;
    }
    this.place(entry, deadline, from);
  }

  /** Slots from the cursor to the one `deadline` falls in (at least 1, at most one turn). */
  private steps(deadline: number, from: number): number {
    return Math.max(1, Math.min(this.slots.length - 1, Math.ceil((deadline - from) / this.slotMs)));
  }

  private place(entry: WheelEntry, deadline: number, from: number): void {
    this.cancel(entry);
    const slot = (this.cursor + this.steps(deadline, from)) % this.slots.length;
    this.slots[slot]!.add(entry);
    entry.wheelSlot = slot;
  }

  cancel(entry: WheelEntry): void {
    if (entry.wheelSlot >= 0) {
      this.slots[entry.wheelSlot]!.delete(entry);
      entry.wheelSlot = -1;
    }
  }

  /**
   * Advance the cursor to `now`: one slot, or every slot the clock passed since the last tick (at
   * most one turn) when it moved further, as when the event loop stalled or a test moved the
   * broker's clock forward. Public for tests that drive time by hand.
   */
  tick(now: number): void {
    this.now = now;
    const n = this.slots.length;
    const passed = Math.floor((now - this.cursorTime) / this.slotMs);
    const steps = Math.max(1, Math.min(n, passed));
    this.cursorTime = passed > n ? now : this.cursorTime + steps * this.slotMs;
    let due: WheelEntry[] | undefined;
    for (let i = 0; i < steps; i++) {
      this.cursor = (this.cursor + 1) % n;
      const slot = this.slots[this.cursor]!;
      if (slot.size === 0) continue;
      due ??= [];
      for (const entry of slot) {
        entry.wheelSlot = -1;
        due.push(entry);
      }
      slot.clear();
    }
    if (due === undefined) return;
    for (const entry of due) {
      // Placed again meanwhile by another entry's callback: it waits for its new slot.
      if (entry.wheelSlot >= 0) continue;
      const next = entry.onWheelTick(now);
      if (next > 0) this.place(entry, next, now);
    }
  }

  close(): void {
    clearInterval(this.timer);
    for (const slot of this.slots) slot.clear();
  }
}
