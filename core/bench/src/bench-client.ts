/**
 * One raw MQTT connection of the load generator: a TCP socket, pre-encoded packets and the frame
 * splitter. Counting happens in the splitter; only control packets, QoS 1/2 PUBLISH packets (to
 * acknowledge them) and, for latency subscribers, every PUBLISH cost a call.
 */
import net from 'node:net';
import { performance } from 'node:perf_hooks';
import { FrameSplitter, PacketType, publishPacketId, readVarInt, type FrameHandler } from './frame-splitter';
import { AckByte, encodeAcks, encodeSubscribe, type MqttVersion, type QoS } from './packets';

export interface Endpoint {
  readonly host: string;
  readonly port: number;
  /** Source address to connect from (a loopback alias such as 127.0.0.2: its own ephemeral ports). */
  readonly localAddress?: string;
}

type ControlWaiter = (first: number, buf: Buffer, bodyStart: number, bodyEnd: number) => void;

/** What an MQTT 5 CONNACK said about limits (defaults otherwise). */
export interface ServerLimits {
  /** Unacknowledged QoS 1/2 PUBLISH packets the broker accepts from this client. */
  receiveMaximum: number;
  maximumQoS: number;
  sharedSubscriptions: boolean;
  wildcardSubscriptions: boolean;
}

export class BenchClient {
  readonly splitter: FrameSplitter;
  /** Milliseconds from writing CONNECT to reading CONNACK. */
  connackMs = 0;
  /** CONNACK's session present flag. */
  sessionPresent = false;
  readonly limits: ServerLimits = { receiveMaximum: 65535, maximumQoS: 2, sharedSubscriptions: true, wildcardSubscriptions: true };
  /** Acknowledge every QoS 1/2 PUBLISH received (as a subscriber). */
  autoAck = false;
  /** Called for every PUBLISH received once `splitter.inspectPublishes` is set. */
  onPublish: FrameHandler | null = null;
  /** Called after each chunk read, once its frames are counted. */
  onChunk: (() => void) | null = null;
  /** Called once when the connection ends without `close()` having been called. */
  onLost: ((reason: string) => void) | null = null;
  /** Why the connection ended, when it ended without `close()`. */
  lostReason: string | null = null;

  private closing = false;
  private readonly waiters = new Map<number, ControlWaiter>();
  /** Acknowledgements to write after the current chunk: first byte, packet id, ... */
  private readonly acks: number[] = [];

  private constructor(
    readonly socket: net.Socket,
    readonly clientId: string,
    readonly version: MqttVersion,
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
  static open(
    endpoint: Endpoint,
    clientId: string,
    connect: Buffer,
    timeoutMs: number,
    version: MqttVersion = 4,
    /** Set handlers before CONNECT is sent: a broker may send PUBLISH packets in CONNACK's chunk. */
    setup?: (client: BenchClient) => void,
  ): Promise<BenchClient> {
    return new Promise((resolve, reject) => {
      const socket = net.connect({
        host: endpoint.host,
        port: endpoint.port,
        noDelay: true,
        ...(endpoint.localAddress === undefined ? {} : { localAddress: endpoint.localAddress }),
      });
      const client = new BenchClient(socket, clientId, version);
      setup?.(client);
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
          fail(
            `CONNACK refused the connection (${version === 5 ? 'reason' : 'return'} code ${code === -1 ? 'missing' : `0x${code.toString(16)}`})`,
          );
          return;
        }
        client.sessionPresent = (buf[start]! & 1) === 1;
        if (version === 5) client.readConnackProperties(buf, start + 2, end);
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
        let pos = start + 2;
        if (this.version === 5) {
          const props = readVarInt(buf, pos, end);
          pos = props === null ? end : pos + props[1] + props[0];
        }
        const granted = pos < end ? buf[pos]! : 0x80;
        if (granted >= 0x80) done(new Error(`${this.clientId}: SUBACK refused the subscription to ${topic} (0x${granted.toString(16)})`));
        else done(null);
      });
      this.socket.write(encodeSubscribe(messageId, topic, qos, this.version));
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
      this.socket.write(encodeAcks(this.acks));
      this.acks.length = 0;
    }
    if (this.onChunk !== null) this.onChunk();
  }

  private frame(first: number, buf: Buffer, start: number, end: number): void {
    const type = first >> 4;
    if (type === PacketType.PUBLISH) {
      if (this.onPublish !== null) this.onPublish(first, buf, start, end);
      if (this.autoAck) {
        const qos = (first >> 1) & 0x03;
        if (qos === 1) this.acks.push(AckByte.PUBACK, publishPacketId(buf, start));
        else if (qos === 2) this.acks.push(AckByte.PUBREC, publishPacketId(buf, start));
      }
      return;
    }
    if (type === PacketType.PUBREC) {
      // MQTT 5: a reason code ≥ 0x80 ends the exchange without PUBREL/PUBCOMP.
      if (this.version === 5 && end - start >= 3 && buf[start + 2]! >= 0x80) {
        this.lost(`the broker refused a QoS 2 PUBLISH (PUBREC reason 0x${buf[start + 2]!.toString(16)})`);
        this.socket.destroy();
        return;
      }
      this.acks.push(AckByte.PUBREL, buf.readUInt16BE(start));
      return;
    }
    if (type === PacketType.PUBREL) {
      this.acks.push(AckByte.PUBCOMP, buf.readUInt16BE(start));
      return;
    }
    const waiter = this.waiters.get(type);
    if (waiter !== undefined) waiter(first, buf, start, end);
  }

  /** Reads the limits an MQTT 5 CONNACK announces (properties start at `pos`). */
  private readConnackProperties(buf: Buffer, pos: number, end: number): void {
    const length = readVarInt(buf, pos, end);
    if (length === null) return;
    let p = pos + length[1];
    const stop = Math.min(end, p + length[0]);
    while (p < stop) {
      const id = buf[p++]!;
      const size = PROPERTY_SIZE[id];
      if (size === undefined) return;
      if (size === 1) {
        const v = buf[p]!;
        if (id === 0x24) this.limits.maximumQoS = v;
        else if (id === 0x2a) this.limits.sharedSubscriptions = v === 1;
        else if (id === 0x28) this.limits.wildcardSubscriptions = v === 1;
        p += 1;
      } else if (size === 2) {
        if (id === 0x21) this.limits.receiveMaximum = buf.readUInt16BE(p);
        p += 2;
      } else if (size === 4) {
        p += 4;
      } else if (size === STRING) {
        p += 2 + buf.readUInt16BE(p);
      } else if (size === PAIR) {
        p += 2 + buf.readUInt16BE(p);
        p += 2 + buf.readUInt16BE(p);
      } else {
        const v = readVarInt(buf, p, stop);
        if (v === null) return;
        p += v[1];
      }
    }
  }

  private lost(reason: string): void {
    if (this.closing || this.lostReason !== null) return;
    this.lostReason = reason;
    const cb = this.onLost;
    this.onLost = null;
    if (cb !== null) cb(reason);
  }
}

const STRING = -1;
const PAIR = -2;
const VARINT = -3;

/** Sizes of the MQTT 5 properties a CONNACK may carry (bytes; or string, string pair, variable int). */
const PROPERTY_SIZE: Readonly<Record<number, number>> = {
  0x11: 4, // session expiry interval
  0x12: STRING, // assigned client identifier
  0x13: 2, // server keep alive
  0x15: STRING, // authentication method
  0x16: STRING, // authentication data (binary: same layout)
  0x1a: STRING, // response information
  0x1c: STRING, // server reference
  0x1f: STRING, // reason string
  0x21: 2, // receive maximum
  0x22: 2, // topic alias maximum
  0x24: 1, // maximum QoS
  0x25: 1, // retain available
  0x26: PAIR, // user property
  0x27: 4, // maximum packet size
  0x28: 1, // wildcard subscription available
  0x29: 1, // subscription identifiers available
  0x2a: 1, // shared subscription available
  0x0b: VARINT, // subscription identifier
};
