/**
 * Publisher loops. Every one respects socket backpressure (write() returning false → wait for
 * 'drain'), yields to the event loop between bursts so receiving is never starved, and may be
 * limited by a flow window (end to end), an inflight window (QoS 1/2) and a rate (`Pacer`).
 */
import { performance } from 'node:perf_hooks';
import type { BenchClient } from './bench-client';
import type { FlowWindow } from './flow-window';
import { nowNs } from './packets';
import { Slot, type SharedState } from './shared-state';

/** Bursts written before yielding to the event loop. */
const BURSTS_PER_TURN = 8;

export interface PublisherOptions {
  /** Shared counters: publishers add what they send (and QoS 1/2 publishers what completes). */
  readonly state?: SharedState | null;
  /** Offset of the payload in each packet: the send time (ns, float64) is written there. -1: no timestamps. */
  readonly stampAt?: number;
}

/** Something a `Pacer` hands credit to: messages it may send now. */
export interface Paced {
  credit: number;
  /** Called after credit was added; continues a publisher that waited for credit. */
  resume(): void;
}

/** Copies `length` bytes of `source` and writes the current time at `stampAt` of every `packetLength` bytes. */
function stamped(source: Buffer, length: number, packetLength: number, stampAt: number): Buffer {
  const out = Buffer.allocUnsafe(length);
  source.copy(out, 0, 0, length);
  const ts = nowNs();
  for (let o = stampAt; o + 8 <= length; o += packetLength) out.writeDoubleBE(ts, o);
  return out;
}

/** Writes a pre-encoded batch of QoS 0 PUBLISH packets while the flow window and the credit allow. */
export class Qos0Publisher implements Paced {
  /** PUBLISH packets written. */
  sent = 0;
  /** Messages this publisher may still send (unlimited unless a Pacer manages it). */
  credit = Number.POSITIVE_INFINITY;
  private running = false;
  private waitingForCredit = false;
  private readonly packetLength: number;
  private readonly state: SharedState | null;
  private readonly stampAt: number;

  constructor(
    private readonly client: BenchClient,
    private readonly batch: Buffer,
    private readonly perBatch: number,
    private readonly window: FlowWindow | null,
    options: PublisherOptions = {},
  ) {
    this.packetLength = batch.length / perBatch;
    this.state = options.state ?? null;
    this.stampAt = options.stampAt ?? -1;
  }

  start(): void {
    this.running = true;
    setImmediate(this.step);
  }

  stop(): void {
    this.running = false;
  }

  resume(): void {
    if (this.waitingForCredit && this.credit >= 1) {
      this.waitingForCredit = false;
      this.step();
    }
  }

  private packets(n: number): Buffer {
    const length = n * this.packetLength;
    if (this.stampAt >= 0) return stamped(this.batch, length, this.packetLength, this.stampAt);
    return n === this.perBatch ? this.batch : this.batch.subarray(0, length);
  }

  private readonly step = (): void => {
    const socket = this.client.socket;
    for (let bursts = 0; this.running && !this.client.closed; bursts++) {
      if (bursts === BURSTS_PER_TURN) {
        setImmediate(this.step);
        return;
      }
      let n = this.perBatch;
      if (this.credit < n) {
        n = Math.floor(this.credit);
        if (n <= 0) {
          this.waitingForCredit = true;
          return;
        }
      }
      if (this.window !== null && !this.window.tryAcquire(n)) {
        this.window.wait(this.step);
        return;
      }
      this.credit -= n;
      this.sent += n;
      this.state?.add(Slot.SENT, n);
      if (!socket.write(this.packets(n))) {
        socket.once('drain', this.step);
        return;
      }
    }
  };
}

export interface AckedPublisherOptions extends PublisherOptions {
  /** 1: completes on PUBACK; 2: PUBREC → PUBREL → completes on PUBCOMP. */
  readonly qos?: 1 | 2;
  /** End-to-end flow window, on top of the inflight window. */
  readonly window?: FlowWindow | null;
}

/**
 * Publishes QoS 1 or 2 with at most `inflight` PUBLISH packets not yet completed, cycling
 * through pre-encoded packets (one per packet id).
 */
export class QosPublisher implements Paced {
  /** PUBLISH packets written. */
  sent = 0;
  credit = Number.POSITIVE_INFINITY;
  private running = false;
  private waitingForAcks = false;
  private waitingForCredit = false;
  private reported = 0;
  private readonly qos: 1 | 2;
  private readonly window: FlowWindow | null;
  private readonly state: SharedState | null;
  private readonly stampAt: number;

  constructor(
    private readonly client: BenchClient,
    private readonly packets: readonly Buffer[],
    private readonly inflight: number,
    options: AckedPublisherOptions = {},
  ) {
    if (packets.length <= inflight) throw new Error(`need more packet ids (${packets.length}) than the inflight window (${inflight})`);
    this.qos = options.qos ?? 1;
    this.window = options.window ?? null;
    this.state = options.state ?? null;
    this.stampAt = options.stampAt ?? -1;
    client.onChunk = () => {
      if (this.state !== null) {
        const done = this.acked;
        if (done !== this.reported) {
          this.state.add(Slot.COMPLETED, done - this.reported);
          this.reported = done;
        }
      }
      if (this.waitingForAcks && this.room() > 0) {
        this.waitingForAcks = false;
        this.step();
      }
    };
  }

  /** Exchanges completed: PUBACK (QoS 1) or PUBCOMP (QoS 2) packets received. */
  get acked(): number {
    return this.qos === 1 ? this.client.splitter.pubacks : this.client.splitter.pubcomps;
  }

  start(): void {
    this.running = true;
    setImmediate(this.step);
  }

  stop(): void {
    this.running = false;
  }

  resume(): void {
    if (this.waitingForCredit && this.credit >= 1) {
      this.waitingForCredit = false;
      this.step();
    }
  }

  private room(): number {
    return this.inflight - (this.sent - this.acked);
  }

  private readonly step = (): void => {
    if (!this.running || this.client.closed) return;
    const free = this.room();
    if (free <= 0) {
      this.waitingForAcks = true;
      return;
    }
    let n = free;
    if (this.credit < n) {
      n = Math.floor(this.credit);
      if (n <= 0) {
        this.waitingForCredit = true;
        return;
      }
    }
    if (this.window !== null) {
      n = this.window.acquireUpTo(n);
      if (n === 0) {
        this.window.wait(this.step);
        return;
      }
    }
    const socket = this.client.socket;
    const cycle = this.packets.length;
    socket.cork();
    for (let i = 0; i < n; i++) {
      const packet = this.packets[this.sent % cycle]!;
      socket.write(this.stampAt < 0 ? packet : stamped(packet, packet.length, packet.length, this.stampAt));
      this.sent++;
    }
    socket.uncork();
    this.credit -= n;
    this.state?.add(Slot.SENT, n);
    if (socket.writableNeedDrain) socket.once('drain', this.step);
    else if (n < free) setImmediate(this.step);
    else this.waitingForAcks = true;
  };
}

/** The QoS 1 publisher of earlier versions: a QosPublisher with qos 1. */
export const Qos1Publisher = QosPublisher;

/**
 * Fixed-rate publishing: every millisecond or so, each publisher gets the credit its share of
 * the rate earned since the last tick. Credit is capped at `capMs` worth; what a publisher could
 * not send in time (window full, socket busy) beyond that is counted as skipped, so a broker that
 * falls behind shows as a lower achieved rate instead of a backlog in the generator.
 */
export class Pacer {
  /** Messages skipped because a publisher fell behind (whole run). */
  skipped = 0;
  private timer: NodeJS.Timeout | null = null;
  private last = 0;
  private skippedExact = 0;
  private readonly cap: number;

  constructor(
    /** Messages per second for each publisher. */
    private readonly perPublisher: number,
    private readonly publishers: readonly Paced[],
    private readonly state: SharedState | null = null,
    capMs = 50,
    private readonly tickMs = 1,
  ) {
    this.cap = Math.max(1, (perPublisher * capMs) / 1000);
  }

  start(): void {
    for (const p of this.publishers) p.credit = 0;
    this.last = performance.now();
    this.timer = setInterval(this.tick, this.tickMs);
  }

  stop(): void {
    if (this.timer !== null) clearInterval(this.timer);
    this.timer = null;
  }

  private readonly tick = (): void => {
    const now = performance.now();
    const earned = (this.perPublisher * (now - this.last)) / 1000;
    this.last = now;
    for (const p of this.publishers) {
      let credit = p.credit + earned;
      if (credit > this.cap) {
        this.skippedExact += credit - this.cap;
        credit = this.cap;
      }
      p.credit = credit;
    }
    const whole = Math.floor(this.skippedExact);
    if (whole > 0) {
      this.skippedExact -= whole;
      this.skipped += whole;
      this.state?.add(Slot.SKIPPED, whole);
    }
    for (const p of this.publishers) p.resume();
  };
}
