/**
 * One raw MQTT connection of the load generator: a TCP socket, pre-encoded packets and the frame
 * splitter. Counting happens in the splitter; only control packets and QoS 1 PUBLISH packets
 * (to acknowledge them) cost a call.
 */
import net from 'node:net';
import { performance } from 'node:perf_hooks';
import { FrameSplitter, PacketType, publishPacketId } from './frame-splitter';
import { encodePubacks, encodeSubscribe, type QoS } from './packets';

export interface Endpoint {
  readonly host: string;
  readonly port: number;
}

type ControlWaiter = (first: number, buf: Buffer, bodyStart: number, bodyEnd: number) => void;

export class BenchClient {
  readonly splitter: FrameSplitter;
  /** Milliseconds from writing CONNECT to reading CONNACK. */
  connackMs = 0;
  /** Acknowledge every QoS 1 PUBLISH received (as a subscriber). */
  autoAck = false;
  /** Called after each chunk read, once its frames are counted. */
  onChunk: (() => void) | null = null;
  /** Called once when the connection ends without `close()` having been called. */
  onLost: ((reason: string) => void) | null = null;
  /** Why the connection ended, when it ended without `close()`. */
  lostReason: string | null = null;

  private closing = false;
  private readonly waiters = new Map<number, ControlWaiter>();
  private readonly acks: number[] = [];

  private constructor(
    readonly socket: net.Socket,
    readonly clientId: string,
  ) {
    this.splitter = new FrameSplitter((first, buf, start, end) => this.frame(first, buf, start, end));
    socket.on('data', (chunk: Buffer) => this.data(chunk));
    socket.on('error', (err: Error) => this.lost(`socket error: ${err.message}`));
    socket.on('close', () => this.lost('connection closed by the broker'));
  }

  /**
   * Opens a TCP connection, writes the pre-encoded CONNECT and resolves once a successful CONNACK
   * arrives; rejects on a refusal, a close, an error or after `timeoutMs`.
   */
  static open(endpoint: Endpoint, clientId: string, connect: Buffer, timeoutMs: number): Promise<BenchClient> {
    return new Promise((resolve, reject) => {
      const socket = net.connect({ host: endpoint.host, port: endpoint.port, noDelay: true });
      const client = new BenchClient(socket, clientId);
      let settled = false;
      let sentAt = 0;
      const fail = (reason: string): void => {
        if (settled) return;
        settled = true;
        clearTimeout(timer);
        client.close();
        reject(new Error(`${clientId}: ${reason}`));
      };
      const timer = setTimeout(() => fail(`no CONNACK within ${timeoutMs} ms`), timeoutMs);
      client.onLost = (reason) => fail(`${reason} before CONNACK`);
      client.waiters.set(PacketType.CONNACK, (_first, buf, start, end) => {
        if (settled) return;
        const code = end - start >= 2 ? buf[start + 1]! : -1;
        if (code !== 0) {
          fail(`CONNACK refused the connection (return code ${code})`);
          return;
        }
        settled = true;
        clearTimeout(timer);
        client.connackMs = performance.now() - sentAt;
        client.onLost = null;
        resolve(client);
      });
      socket.once('connect', () => {
        sentAt = performance.now();
        socket.write(connect);
      });
    });
  }

  /** Subscribes to one filter and resolves on a SUBACK that grants it. */
  subscribe(topic: string, qos: QoS, timeoutMs: number, messageId = 1): Promise<void> {
    return new Promise((resolve, reject) => {
      let settled = false;
      const previousLost = this.onLost;
      const done = (err: Error | null): void => {
        if (settled) return;
        settled = true;
        clearTimeout(timer);
        this.waiters.delete(PacketType.SUBACK);
        this.onLost = previousLost;
        if (err === null) resolve();
        else reject(err);
      };
      const timer = setTimeout(() => done(new Error(`${this.clientId}: no SUBACK within ${timeoutMs} ms`)), timeoutMs);
      this.onLost = (reason) => {
        done(new Error(`${this.clientId}: ${reason} before SUBACK`));
        previousLost?.(reason);
      };
      this.waiters.set(PacketType.SUBACK, (_first, buf, start, end) => {
        const granted = end - start >= 3 ? buf[start + 2]! : 0x80;
        if (granted >= 0x80) done(new Error(`${this.clientId}: SUBACK refused the subscription to ${topic} (0x${granted.toString(16)})`));
        else done(null);
      });
      this.socket.write(encodeSubscribe(messageId, topic, qos));
    });
  }

  /** Ends the connection now (no DISCONNECT: the generator never waits for a clean close). */
  close(): void {
    this.closing = true;
    this.socket.destroy();
  }

  get closed(): boolean {
    return this.closing || this.lostReason !== null;
  }

  private data(chunk: Buffer): void {
    try {
      this.splitter.push(chunk);
    } catch (err) {
      this.lost(`unparsable data from the broker: ${(err as Error).message}`);
      this.socket.destroy();
      return;
    }
    if (this.acks.length > 0) {
      this.socket.write(encodePubacks(this.acks));
      this.acks.length = 0;
    }
    if (this.onChunk !== null) this.onChunk();
  }

  private frame(first: number, buf: Buffer, start: number, end: number): void {
    const type = first >> 4;
    if (type === PacketType.PUBLISH) {
      if (this.autoAck && (first & 0x06) === 0x02) this.acks.push(publishPacketId(buf, start));
      return;
    }
    const waiter = this.waiters.get(type);
    if (waiter !== undefined) waiter(first, buf, start, end);
  }

  private lost(reason: string): void {
    if (this.closing || this.lostReason !== null) return;
    this.lostReason = reason;
    const cb = this.onLost;
    this.onLost = null;
    if (cb !== null) cb(reason);
  }
}
