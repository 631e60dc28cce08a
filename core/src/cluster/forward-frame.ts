/**
 * The frame of messages one node forwards to another on `bifro.fwd.<nodeId>` (docs/cluster.md §
 * Frame format). Big-endian; strings are a u16 byte length and UTF-8, binaries a u16 length,
 * the payload a u32 length:
 *
 *   u8 version (2) · u32 count · count × message
 *   message: u16 n · n × (u8 share kind · str group · str topic filter) the shared groups to serve
 *            · u8 flags · u8 flags2 · str tenant · str topic · str publisher client id
 *            [u32 expiry ms left] [str content type] [str response topic] [bin correlation data]
 *            [u32 n · n × (str key · str value) user properties] [str copy id]
 *            · u32 payload length · payload
 *
 * flags: bits 0-1 QoS, 2 RETAIN, 3 expiry, 4 payload format present, 5 payload format is UTF-8,
 * 6 content type, 7 response topic; flags2: bit 0 correlation data, bit 1 user properties, bit 2
 * copy id (a message its sender may send again, a will: the receiver takes one copy per id).
 * Share kind: 0 `$share`, 1 `$oshare`. The groups differ per destination, the rest does not: a
 * message is encoded once with no groups, and a destination with groups gets its own group list
 * in front of the same bytes past the count.
 * The decoder treats the frame as hostile: every length is checked against what is left.
 */
import type { ForwardMessage, GroupRef, ReceivedMessage } from './cluster-view';

export const FRAME_VERSION = 2;
/** Frame header: version and count. */
export const FRAME_HEADER_BYTES = 5;
/** The smallest message: no groups, two flag bytes, three empty strings, an empty payload. */
const MIN_MESSAGE_BYTES = 2 + 2 + 3 * 2 + 4;
/** The group count of a message that names none: the first two bytes of every encoded message. */
export const NO_GROUPS_BYTES = 2;
const NO_GROUPS: readonly GroupRef[] = Object.freeze([]);
/** Expiry ms left, carried in a u32 (MQTT's expiry interval is at most 2^32-1 seconds: capped). */
const MAX_EXPIRY_MS = 0xffffffff;

const UTF8 = new TextDecoder('utf-8', { fatal: true, ignoreBOM: true });

/** A frame that cannot be decoded: logged and dropped by the receiver. */
export class FrameError extends Error {}

function strBytes(s: string): number {
  return 2 + Buffer.byteLength(s, 'utf8');
}

/**
 * One message of a frame, encoded once per publish and shared by every destination's batch, with
 * no groups to serve (see {@link encodeGroups}). `now` is this node's clock: the expiry travels as
 * the time left, so clocks need not agree.
 */
export function encodeMessage(tenantId: string, msg: ForwardMessage, now: number, copyId?: string): Buffer {
  const p = msg.properties;
  const expiryMs = msg.expiresAt === 0 ? undefined : Math.min(MAX_EXPIRY_MS, Math.max(0, msg.expiresAt - now));
  let flags = msg.qos | (msg.retain ? 4 : 0);
  let flags2 = 0;
  let size = NO_GROUPS_BYTES + 2 + strBytes(tenantId) + strBytes(msg.topic) + strBytes(msg.publisherClientId) + 4 + msg.payload.length;
  if (expiryMs !== undefined) {
    flags |= 8;
    size += 4;
  }
  if (p?.payloadFormatIndicator !== undefined) flags |= 16 | (p.payloadFormatIndicator ? 32 : 0);
  if (p?.contentType !== undefined) {
    flags |= 64;
    size += strBytes(p.contentType);
  }
  if (p?.responseTopic !== undefined) {
    flags |= 128;
    size += strBytes(p.responseTopic);
  }
  if (p?.correlationData !== undefined) {
    flags2 |= 1;
    size += 2 + p.correlationData.length;
  }
  const user = p?.userProperties;
  if (user !== undefined && user.length > 0) {
    flags2 |= 2;
    size += 4;
    for (const [k, v] of user) size += strBytes(k) + strBytes(v);
  }
  if (copyId !== undefined) {
    flags2 |= 4;
    size += strBytes(copyId);
  }
  const buf = Buffer.allocUnsafe(size);
  let o = buf.writeUInt16BE(0, 0);
  o = buf.writeUInt8(flags, o);
  o = buf.writeUInt8(flags2, o);
  const str = (s: string): void => {
    const n = buf.write(s, o + 2, 'utf8');
    buf.writeUInt16BE(n, o);
    o += 2 + n;
  };
  str(tenantId);
  str(msg.topic);
  str(msg.publisherClientId);
  if (expiryMs !== undefined) o = buf.writeUInt32BE(expiryMs, o);
  if (p?.contentType !== undefined) str(p.contentType);
  if (p?.responseTopic !== undefined) str(p.responseTopic);
  if (p?.correlationData !== undefined) {
    o = buf.writeUInt16BE(p.correlationData.length, o);
    o += p.correlationData.copy(buf, o);
  }
  if ((flags2 & 2) !== 0) {
    o = buf.writeUInt32BE(user!.length, o);
    for (const [k, v] of user!) {
      str(k);
      str(v);
    }
  }
  if (copyId !== undefined) str(copyId);
  o = buf.writeUInt32BE(msg.payload.length, o);
  msg.payload.copy(buf, o);
  return buf;
}

/**
 * The group list one destination is to serve for a message: sent in place of the first
 * {@link NO_GROUPS_BYTES} bytes of the message as {@link encodeMessage} encoded it.
 */
export function encodeGroups(groups: readonly GroupRef[]): Buffer {
  let size = 2;
  for (const g of groups) size += 1 + strBytes(g.group) + strBytes(g.topicFilter);
  const buf = Buffer.allocUnsafe(size);
  let o = buf.writeUInt16BE(groups.length, 0);
  const str = (s: string): void => {
    const n = buf.write(s, o + 2, 'utf8');
    buf.writeUInt16BE(n, o);
    o += 2 + n;
  };
  for (const g of groups) {
    o = buf.writeUInt8(g.shareKind === 'share' ? 0 : 1, o);
    str(g.group);
    str(g.topicFilter);
  }
  return buf;
}

/** A frame of `count` encoded messages. */
export function frame(count: number, messages: readonly Buffer[], bytes: number): Buffer {
  const head = Buffer.allocUnsafe(FRAME_HEADER_BYTES);
  head.writeUInt8(FRAME_VERSION, 0);
  head.writeUInt32BE(count, 1);
  return Buffer.concat([head, ...messages], FRAME_HEADER_BYTES + bytes);
}

/** Bounds-checked reads over a received frame. */
class Reader {
  private o = 0;
  constructor(private readonly buf: Uint8Array) {}

  get left(): number {
    return this.buf.length - this.o;
  }

  private need(n: number): void {
    if (n > this.left) throw new FrameError(`truncated at byte ${this.o} (${n} more needed, ${this.left} left)`);
  }

  u8(): number {
    this.need(1);
    return this.buf[this.o++]!;
  }

  u16(): number {
    this.need(2);
    const v = (this.buf[this.o]! << 8) | this.buf[this.o + 1]!;
    this.o += 2;
    return v;
  }

  u32(): number {
    this.need(4);
    const b = this.buf;
    const v = b[this.o]! * 0x1000000 + ((b[this.o + 1]! << 16) | (b[this.o + 2]! << 8) | b[this.o + 3]!);
    this.o += 4;
    return v;
  }

  bytes(n: number): Buffer {
    this.need(n);
    // A copy: the message outlives the NATS buffer it came in.
    const out = Buffer.from(this.buf.subarray(this.o, this.o + n));
    this.o += n;
    return out;
  }

  str(): string {
    const n = this.u16();
    this.need(n);
    const s = this.buf.subarray(this.o, this.o + n);
    this.o += n;
    // Malformed UTF-8 is refused, not replaced: what goes out to clients must be well formed [MQTT-1.5.4-1].
    try {
      return UTF8.decode(s);
    } catch {
      throw new FrameError('malformed UTF-8 string');
    }
  }
}

/** The messages of a received frame; throws {@link FrameError} when it is malformed in any way. */
export function decodeFrame(data: Uint8Array): ReceivedMessage[] {
  const r = new Reader(data);
  const version = r.u8();
  if (version !== FRAME_VERSION) throw new FrameError(`unknown frame version ${version}`);
  const count = r.u32();
  if (count * MIN_MESSAGE_BYTES > r.left) throw new FrameError(`count ${count} does not fit in ${r.left} bytes`);
  const out: ReceivedMessage[] = [];
  for (let i = 0; i < count; i++) {
    const n = r.u16();
    let groups = NO_GROUPS;
    if (n > 0) {
      const named: GroupRef[] = [];
      for (let k = 0; k < n; k++) {
        const kind = r.u8();
        if (kind > 1) throw new FrameError(`unknown share kind ${kind}`);
        named.push({ shareKind: kind === 0 ? 'share' : 'oshare', group: r.str(), topicFilter: r.str() });
      }
      groups = named;
    }
    const flags = r.u8();
    const flags2 = r.u8();
    const qos = flags & 3;
    if (qos === 3) throw new FrameError('QoS 3');
    if ((flags2 & ~7) !== 0) throw new FrameError(`unknown flags ${flags2}`);
    const tenantId = r.str();
    const topic = r.str();
    const publisherClientId = r.str();
    const expiryMs = (flags & 8) !== 0 ? r.u32() : undefined;
    const contentType = (flags & 64) !== 0 ? r.str() : undefined;
    const responseTopic = (flags & 128) !== 0 ? r.str() : undefined;
    const correlationData = (flags2 & 1) !== 0 ? r.bytes(r.u16()) : undefined;
    let userProperties: [string, string][] | undefined;
    if ((flags2 & 2) !== 0) {
      const n = r.u32();
      userProperties = [];
      for (let k = 0; k < n; k++) userProperties.push([r.str(), r.str()]);
    }
    const copyId = (flags2 & 4) !== 0 ? r.str() : undefined;
    const payload = r.bytes(r.u32());
    out.push({
      tenantId,
      topic,
      payload,
      qos: qos as 0 | 1 | 2,
      retain: (flags & 4) !== 0,
      publisherClientId,
      expiryMs,
      payloadFormatIndicator: (flags & 16) !== 0 ? (flags & 32) !== 0 : undefined,
      contentType,
      responseTopic,
      correlationData,
      userProperties,
      groups,
      ...(copyId !== undefined ? { copyId } : {}),
    });
  }
  if (r.left !== 0) throw new FrameError(`${r.left} bytes after the last message`);
  return out;
}
