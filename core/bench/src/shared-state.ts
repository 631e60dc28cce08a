/**
 * Counters shared by the coordinator (main thread) and the workers generating load: one
 * SharedArrayBuffer of 32-bit slots, written with Atomics. Counters wrap around at 2^32; every
 * reader works with differences (`delta`), which stay exact as long as a counter moves by less
 * than 2^31 between two readings.
 */

/** Slots of the header. */
export const Slot = {
  /** The run's phase (`Phase`). */
  PHASE: 0,
  /** PUBLISH packets written by every publisher. */
  SENT: 1,
  /** PUBACK (QoS 1) or PUBCOMP (QoS 2) packets received by every publisher. */
  COMPLETED: 2,
  /** Connections open (CONNACK received). */
  CONNECTED: 3,
  /** Messages a rate-limited publisher could not send in time (it fell behind). */
  SKIPPED: 4,
  /** Flow window: messages handed out to publishers. */
  WINDOW_SENT: 5,
  /** Flow window: messages written off after a stall. */
  WINDOW_LOST: 6,
} as const;

const HEADER = 8;

export const Phase = { SETUP: 0, LOAD: 1, MEASURE: 2, STOPPED: 3 } as const;
export type PhaseValue = (typeof Phase)[keyof typeof Phase];

/** The increase of a wrapping 32-bit counter from `before` to `after`. */
export function delta(after: number, before: number): number {
  return (after - before) | 0;
}

export class SharedState {
  readonly slots: Int32Array;

  constructor(
    readonly buffer: SharedArrayBuffer,
    readonly subscribers: number,
  ) {
    this.slots = new Int32Array(buffer);
  }

  /** A fresh state with one received counter per subscriber. */
  static create(subscribers: number): SharedState {
    return new SharedState(new SharedArrayBuffer((HEADER + subscribers) * 4), subscribers);
  }

  get phase(): number {
    return Atomics.load(this.slots, Slot.PHASE);
  }

  set phase(p: PhaseValue) {
    Atomics.store(this.slots, Slot.PHASE, p);
  }

  load(slot: number): number {
    return Atomics.load(this.slots, slot);
  }

  add(slot: number, n: number): void {
    Atomics.add(this.slots, slot, n);
  }

  /** Messages received so far by subscriber `i` (wrapping). */
  received(i: number): number {
    return Atomics.load(this.slots, HEADER + i);
  }

  /** Subscriber `i` publishes its own count (it is the only writer of its slot). */
  setReceived(i: number, count: number): void {
    Atomics.store(this.slots, HEADER + i, count);
  }

  /** Sum of every subscriber's count (wrapping). */
  receivedSum(): number {
    let sum = 0;
    for (let i = 0; i < this.subscribers; i++) sum = (sum + Atomics.load(this.slots, HEADER + i)) | 0;
    return sum;
  }

  /** The smallest subscriber count (wrapping; compared relative to subscriber 0). */
  receivedMin(): number {
    if (this.subscribers === 0) return 0;
    const ref = Atomics.load(this.slots, HEADER);
    let min = 0;
    for (let i = 1; i < this.subscribers; i++) {
      const off = delta(Atomics.load(this.slots, HEADER + i), ref);
      if (off < min) min = off;
    }
    return (ref + min) | 0;
  }

  /**
   * Replaces the window's lost count `expected` by `next`; false when another worker changed it
   * first (it wrote the same stall off).
   */
  compareAndSetLost(expected: number, next: number): boolean {
    return Atomics.compareExchange(this.slots, Slot.WINDOW_LOST, expected | 0, next | 0) === (expected | 0);
  }
}

/** Plain readings of every counter at one moment. */
export interface Snapshot {
  readonly sent: number;
  readonly completed: number;
  readonly connected: number;
  readonly skipped: number;
  readonly lost: number;
  readonly received: Int32Array;
}

export function snapshot(s: SharedState): Snapshot {
  const received = new Int32Array(s.subscribers);
  for (let i = 0; i < s.subscribers; i++) received[i] = s.received(i);
  return {
    sent: s.load(Slot.SENT),
    completed: s.load(Slot.COMPLETED),
    connected: s.load(Slot.CONNECTED),
    skipped: s.load(Slot.SKIPPED),
    lost: s.load(Slot.WINDOW_LOST),
    received,
  };
}

/** Counter increases between two snapshots. */
export interface Deltas {
  readonly sent: number;
  readonly completed: number;
  readonly connected: number;
  readonly skipped: number;
  readonly lost: number;
  /** Per subscriber. */
  readonly perSubscriber: readonly number[];
  /** Summed over subscribers. */
  readonly received: number;
  /** Of the subscriber that received least (0 without subscribers). */
  readonly receivedMin: number;
}

export function deltas(after: Snapshot, before: Snapshot): Deltas {
  const perSubscriber: number[] = [];
  for (let i = 0; i < after.received.length; i++) perSubscriber.push(delta(after.received[i]!, before.received[i]!));
  return {
    sent: delta(after.sent, before.sent),
    completed: delta(after.completed, before.completed),
    connected: delta(after.connected, before.connected),
    skipped: delta(after.skipped, before.skipped),
    lost: delta(after.lost, before.lost),
    perSubscriber,
    received: perSubscriber.reduce((a, b) => a + b, 0),
    receivedMin: perSubscriber.length === 0 ? 0 : perSubscriber.reduce((a, b) => (b < a ? b : a)),
  };
}

/** Accumulates counter increases into plain numbers, so totals never wrap. Sample it at least every few seconds. */
export class Totals {
  private last: Snapshot;
  sent = 0;
  completed = 0;
  connected = 0;
  skipped = 0;
  lost = 0;
  received = 0;

  constructor(private readonly state: SharedState) {
    this.last = snapshot(state);
  }

  /** Takes a reading and returns the increases since the previous one. */
  sample(): Deltas {
    const now = snapshot(this.state);
    const d = deltas(now, this.last);
    this.last = now;
    this.sent += d.sent;
    this.completed += d.completed;
    this.connected += d.connected;
    this.skipped += d.skipped;
    this.lost += d.lost;
    this.received += d.received;
    return d;
  }
}
