/**
 * Publisher loops. Both respect socket backpressure (write() returning false → wait for 'drain')
 * and yield to the event loop between bursts so receiving is never starved.
 */
import type { BenchClient } from './bench-client';
import type { FlowWindow } from './flow-window';

/** Bursts written before yielding to the event loop. */
const BURSTS_PER_TURN = 8;

/** Writes a pre-encoded batch of QoS 0 PUBLISH packets while the shared flow window allows. */
export class Qos0Publisher {
  private running = false;

  constructor(
    private readonly client: BenchClient,
    private readonly batch: Buffer,
    private readonly perBatch: number,
    private readonly window: FlowWindow,
  ) {}

  start(): void {
    this.running = true;
    setImmediate(this.step);
  }

  stop(): void {
    this.running = false;
  }

  private readonly step = (): void => {
    const socket = this.client.socket;
    for (let bursts = 0; this.running && !this.client.closed; bursts++) {
      if (bursts === BURSTS_PER_TURN) {
        setImmediate(this.step);
        return;
      }
      if (!this.window.tryAcquire(this.perBatch)) {
        this.window.wait(this.step);
        return;
      }
      if (!socket.write(this.batch)) {
        socket.once('drain', this.step);
        return;
      }
    }
  };
}

/**
 * Publishes QoS 1 with at most `inflight` PUBLISH packets not yet acknowledged, cycling through
 * pre-encoded packets (one per packet id).
 */
export class Qos1Publisher {
  /** PUBLISH packets written. */
  sent = 0;
  private running = false;
  private waitingForAcks = false;

  constructor(
    private readonly client: BenchClient,
    private readonly packets: readonly Buffer[],
    private readonly inflight: number,
  ) {
    if (packets.length <= inflight) throw new Error(`need more packet ids (${packets.length}) than the inflight window (${inflight})`);
    client.onChunk = () => {
      if (this.waitingForAcks && this.room() > 0) {
        this.waitingForAcks = false;
        this.step();
      }
    };
  }

  /** PUBACK packets received. */
  get acked(): number {
    return this.client.splitter.pubacks;
  }

  start(): void {
    this.running = true;
    setImmediate(this.step);
  }

  stop(): void {
    this.running = false;
  }

  private room(): number {
    return this.inflight - (this.sent - this.client.splitter.pubacks);
  }

  private readonly step = (): void => {
    if (!this.running || this.client.closed) return;
    const room = this.room();
    if (room <= 0) {
      this.waitingForAcks = true;
      return;
    }
    const socket = this.client.socket;
    const cycle = this.packets.length;
    socket.cork();
    for (let i = 0; i < room; i++) {
      socket.write(this.packets[this.sent % cycle]!);
      this.sent++;
    }
    socket.uncork();
    if (socket.writableNeedDrain) socket.once('drain', this.step);
    else this.waitingForAcks = true;
  };
}
