/**
 * Splits a byte stream into MQTT control packets (fixed header + remaining length + body) without
 * copying when a chunk holds whole packets. Bytes of a packet that spans chunks are gathered once
 * it is complete. The remaining length is checked against a limit before any body byte is
 * buffered, so an oversize packet never costs memory.
 */
export interface FrameSink {
  /**
   * One whole packet. `frame` and `body` are slices of a chunk read for this connection alone (or
   * of a buffer gathered for it): Bifro's transports (net, TLS, WebSocket) hand out a fresh buffer
   * per read and never reuse it, so a message may keep its payload, or the frame itself as its
   * encoding, without a copy.
   */
  onFrame(header: number, body: Buffer, frame: Buffer): void;
  /** The remaining length is not a valid variable byte integer (more than 4 bytes) [MQTT-1.5.5-1]. */
  onMalformedLength(): void;
  /** The packet is larger than `maxPacketSize` (total bytes); nothing of it was buffered. */
  onOversize(size: number): void;
}

export class FrameReader {
  /** Chunks of a packet that spans them; allocated only while one is partly received. */
  private pending: Buffer[] | undefined;
  private pendingBytes = 0;
  /** Total size of the packet being gathered, once its header is known; -1 before. */
  private expected = -1;
  private stopped = false;
  /**
   * When the packet being gathered got its first byte (the `now` given to {@link push}); 0 while
   * no packet is partly received. The connection puts its packet deadline on it (mqtt.packetTimeoutMs).
   */
  partialSince = 0;

  constructor(
    private readonly sink: FrameSink,
    /** Largest packet accepted, in bytes (fixed header included). */
    public maxPacketSize: number,
  ) {}

  /** Stop delivering frames (the connection is closing). */
  stop(): void {
    this.stopped = true;
    this.pending = undefined;
    this.pendingBytes = 0;
    this.partialSince = 0;
  }

  /** Bytes read at `now` (ms; 0 when the caller does not track packet deadlines). */
  push(chunk: Buffer, now = 0): void {
    if (this.stopped) return;
    const pending = this.pending;
    if (pending !== undefined) {
      pending.push(chunk);
      this.pendingBytes += chunk.length;
      if (this.expected < 0) {
        const joined = Buffer.concat(pending, this.pendingBytes);
        this.pending = undefined;
        this.pendingBytes = 0;
        this.consume(joined, now, true);
        return;
      }
      if (this.pendingBytes < this.expected) return;
      const joined = Buffer.concat(pending, this.pendingBytes);
      this.pending = undefined;
      this.pendingBytes = 0;
      this.expected = -1;
      this.consume(joined, now, true);
      return;
    }
    this.consume(chunk, now, false);
  }

  /** `continued`: `buf` starts with the bytes of a packet begun in an earlier chunk. */
  private consume(buf: Buffer, now: number, continued: boolean): void {
    let pos = 0;
    const len = buf.length;
    while (pos < len && !this.stopped) {
      // Variable byte integer: up to four bytes, no more than needed [MQTT-1.5.5-1].
      let remaining = 0;
      let multiplier = 1;
      let i = pos + 1;
      let complete = false;
      for (let n = 0; n < 4 && i < len; n++, i++) {
        const byte = buf[i]!;
        remaining += (byte & 0x7f) * multiplier;
        multiplier *= 128;
        if ((byte & 0x80) === 0) {
          // The fewest bytes that hold the value [MQTT-1.5.5-1]: a last byte of 0 after others is malformed.
          if (byte === 0 && n > 0) {
            this.stopped = true;
            this.sink.onMalformedLength();
            return;
          }
          complete = true;
          i++;
          break;
        }
        if (n === 3) {
          this.stopped = true;
          this.sink.onMalformedLength();
          return;
        }
      }
      if (!complete) {
        this.keep(buf.subarray(pos), -1, continued && pos === 0 ? this.partialSince : now);
        return;
      }
      const total = i - pos + remaining;
      if (total > this.maxPacketSize) {
        this.stopped = true;
        this.sink.onOversize(total);
        return;
      }
      if (pos + total > len) {
        this.keep(buf.subarray(pos), total, continued && pos === 0 ? this.partialSince : now);
        return;
      }
      const frame = buf.subarray(pos, pos + total);
      this.sink.onFrame(buf[pos]!, buf.subarray(i, pos + total), frame);
      pos += total;
    }
    this.partialSince = 0;
  }

  private keep(rest: Buffer, expected: number, since: number): void {
    // Copy: a few bytes left over must not keep the whole chunk they came in alive.
    this.pending = [Buffer.from(rest)];
    this.pendingBytes = rest.length;
    this.expected = expected;
    this.partialSince = since;
  }
}
