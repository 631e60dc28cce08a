/**
 * A minimal MQTT frame splitter for the load generator: it reads only the fixed header and the
 * remaining length of each packet, so receiving stays far cheaper than the broker's own parsing.
 *
 * PUBLISH, PUBACK and PUBCOMP packets are counted without a call; any other packet, a PUBLISH
 * with QoS > 0 (whose packet id a subscriber must acknowledge), and every PUBLISH when
 * `inspectPublishes` is set (latency subscribers read the payload), is handed to `onFrame` with
 * the buffer and the body's bounds. The buffer is only valid during the call.
 */

/** MQTT control packet types (upper nibble of the first byte). */
export const PacketType = {
  CONNACK: 2,
  PUBLISH: 3,
  PUBACK: 4,
  PUBREC: 5,
  PUBREL: 6,
  PUBCOMP: 7,
  SUBACK: 9,
  PINGRESP: 13,
  DISCONNECT: 14,
} as const;

/** Called for each frame that is not simply counted. `first` is the fixed header's first byte. */
export type FrameHandler = (first: number, buf: Buffer, bodyStart: number, bodyEnd: number) => void;

/** Largest frame accepted (bytes of remaining length); a larger one is treated as garbage. */
export const DEFAULT_MAX_FRAME = 16 * 1024 * 1024;

export class FrameSplitter {
  /** PUBLISH packets seen (any QoS). */
  publishes = 0;
  /** PUBACK packets seen. */
  pubacks = 0;
  /** PUBCOMP packets seen. */
  pubcomps = 0;
  /** Hand every PUBLISH to `onFrame`, not only QoS 1/2 ones. */
  inspectPublishes = false;
  /** Bytes of an incomplete frame carried over to the next chunk. */
  private pending: Buffer | null = null;

  constructor(
    private readonly onFrame: FrameHandler,
    private readonly maxFrame: number = DEFAULT_MAX_FRAME,
  ) {}

  /** Bytes held back while waiting for the rest of a frame. */
  get pendingBytes(): number {
    return this.pending === null ? 0 : this.pending.length;
  }

  /** Feeds one chunk as read from the socket; throws on a malformed remaining length. */
  push(chunk: Buffer): void {
    let buf = chunk;
    if (this.pending !== null) {
      buf = Buffer.concat([this.pending, chunk]);
      this.pending = null;
    }
    const end = buf.length;
    let pos = 0;
    while (end - pos >= 2) {
      let length = 0;
      let multiplier = 1;
      let i = pos + 1;
      let complete = false;
      for (let n = 0; i < end; n++) {
        if (n === 4) throw new Error('malformed remaining length (more than 4 bytes)');
        const byte = buf[i++]!;
        length += (byte & 0x7f) * multiplier;
        if (byte < 0x80) {
          complete = true;
          break;
        }
        multiplier *= 0x80;
      }
      if (!complete) break;
      if (length > this.maxFrame) throw new Error(`frame of ${length} bytes exceeds the limit of ${this.maxFrame}`);
      const bodyEnd = i + length;
      if (bodyEnd > end) break;
      const first = buf[pos]!;
      const type = first >> 4;
      if (type === PacketType.PUBLISH) {
        this.publishes++;
        if ((first & 0x06) !== 0 || this.inspectPublishes) this.onFrame(first, buf, i, bodyEnd);
      } else if (type === PacketType.PUBACK) {
        this.pubacks++;
      } else if (type === PacketType.PUBCOMP) {
        this.pubcomps++;
      } else {
        this.onFrame(first, buf, i, bodyEnd);
      }
      pos = bodyEnd;
    }
    if (pos < end) this.pending = buf.subarray(pos);
  }
}

/** The packet id of a QoS 1/2 PUBLISH (every version: topic length, topic, then the id). */
export function publishPacketId(buf: Buffer, bodyStart: number): number {
  const topicLength = buf.readUInt16BE(bodyStart);
  return buf.readUInt16BE(bodyStart + 2 + topicLength);
}

/** Reads a variable byte integer at `pos`: [value, bytes used], or null when malformed or cut. */
export function readVarInt(buf: Buffer, pos: number, end: number): [number, number] | null {
  let value = 0;
  let multiplier = 1;
  for (let n = 0; n < 4 && pos + n < end; n++) {
    const byte = buf[pos + n]!;
    value += (byte & 0x7f) * multiplier;
    if (byte < 0x80) return [value, n + 1];
    multiplier *= 0x80;
  }
  return null;
}

/** Where the payload of a PUBLISH starts (after topic, packet id and, in MQTT 5, the properties), or -1. */
export function publishPayloadStart(first: number, buf: Buffer, bodyStart: number, bodyEnd: number, version: number): number {
  if (bodyEnd - bodyStart < 2) return -1;
  let pos = bodyStart + 2 + buf.readUInt16BE(bodyStart);
  if ((first & 0x06) !== 0) pos += 2;
  if (version === 5) {
    const props = readVarInt(buf, pos, bodyEnd);
    if (props === null) return -1;
    pos += props[1] + props[0];
  }
  return pos <= bodyEnd ? pos : -1;
}
