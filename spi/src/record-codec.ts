import type { ProtocolVersion, QoS } from './common';
import type {
  BanKind,
  BanRecord,
  InboxMessage,
  InflightRecord,
  MessageProperties,
  SessionRecord,
  StoredMessage,
  SubscriptionRecord,
  WillRecord,
} from './storage';

/**
 * The binary encoding of stored values (format 1), for storage plugins (SPI 1.4.0; @bifro/plugin-storage-level and @bifro/plugin-storage-nats use it). Compact and exact: byte arrays are copied
 * verbatim, strings are UTF-8 with a varint length, timestamps are float64 (any JS number
 * round-trips), small integers are varints, and optional fields are announced by flag bits, so an
 * absent field stays absent and `false` stays `false`. User properties keep their order and
 * duplicates. Decoded byte arrays are plain `Uint8Array` views into the value read from disk
 * (which is not shared), so reads copy nothing twice.
 *
 * Chosen over JSON with base64 byte arrays after measuring both (docs/storage.md of storage-level): for an inbox
 * message with a 1 KiB payload and a few properties the binary form is 1095 bytes against 1659,
 * encodes in 2.3 µs against 6.3 µs and decodes in 1.0 µs against 6.1 µs.
 */

/** A growing output buffer. */
export class ValueWriter {
  private buf: Buffer;
  private pos = 0;

  constructor(initialSize = 256) {
    this.buf = Buffer.allocUnsafe(initialSize);
  }

  /** Bytes written so far. */
  get length(): number {
    return this.pos;
  }

  private reserve(n: number): void {
    if (this.pos + n <= this.buf.length) return;
    const next = Buffer.allocUnsafe(Math.max(this.buf.length * 2, this.pos + n));
    this.buf.copy(next, 0, 0, this.pos);
    this.buf = next;
  }

  u8(value: number): void {
    this.reserve(1);
    this.buf[this.pos++] = value;
  }

  u16(value: number): void {
    this.reserve(2);
    this.buf.writeUInt16BE(value, this.pos);
    this.pos += 2;
  }

  /** A non-negative safe integer in LEB128; throws on anything else (a caller bug, not data to mangle). */
  varint(value: number): void {
    if (!Number.isSafeInteger(value) || value < 0) throw new RangeError(`expected a non-negative integer, got ${value}`);
    this.reserve(8);
    let v = value;
    while (v >= 0x80) {
      this.buf[this.pos++] = (v % 0x80) | 0x80;
      v = Math.floor(v / 0x80);
    }
    this.buf[this.pos++] = v;
  }

  f64(value: number): void {
    this.reserve(8);
    this.buf.writeDoubleBE(value, this.pos);
    this.pos += 8;
  }

  bytes(value: Uint8Array): void {
    this.varint(value.byteLength);
    this.reserve(value.byteLength);
    this.buf.set(value, this.pos);
    this.pos += value.byteLength;
  }

  string(value: string): void {
    const n = Buffer.byteLength(value, 'utf8');
    this.varint(n);
    this.reserve(n);
    this.buf.write(value, this.pos, n, 'utf8');
    this.pos += n;
  }

  /** Bytes as they are, without a length (a chunk of entries that delimit themselves). */
  raw(value: Uint8Array): void {
    this.reserve(value.byteLength);
    this.buf.set(value, this.pos);
    this.pos += value.byteLength;
  }

  /** The bytes written from `start` to now, as a view into this writer's buffer (valid until it grows). */
  slice(start: number): Buffer {
    return this.buf.subarray(start, this.pos);
  }

  /** Everything written, as a view. */
  finish(): Buffer {
    return this.buf.subarray(0, this.pos);
  }
}

/** A cursor over an encoded value. */
export class ValueReader {
  private pos = 0;

  constructor(private readonly buf: Buffer) {}

  u8(): number {
    return this.buf[this.pos++];
  }

  u16(): number {
    const v = this.buf.readUInt16BE(this.pos);
    this.pos += 2;
    return v;
  }

  varint(): number {
    let result = 0;
    let scale = 1;
    for (;;) {
      const b = this.buf[this.pos++];
      if (b === undefined) throw new RangeError('truncated value');
      result += (b & 0x7f) * scale;
      if (b < 0x80) return result;
      scale *= 0x80;
    }
  }

  f64(): number {
    const v = this.buf.readDoubleBE(this.pos);
    this.pos += 8;
    return v;
  }

  bytes(): Uint8Array {
    const n = this.varint();
    if (this.pos + n > this.buf.length) throw new RangeError('truncated value');
    const view = new Uint8Array(this.buf.buffer, this.buf.byteOffset + this.pos, n);
    this.pos += n;
    return view;
  }

  string(): string {
    const n = this.varint();
    if (this.pos + n > this.buf.length) throw new RangeError('truncated value');
    const s = this.buf.toString('utf8', this.pos, this.pos + n);
    this.pos += n;
    return s;
  }
}

// Message flags.
const M_RETAIN = 0x04;
const M_EXPIRES = 0x08;
const M_PROPS = 0x10;
// Property presence flags.
const P_FORMAT = 0x01;
const P_FORMAT_TRUE = 0x02;
const P_EXPIRY = 0x04;
const P_CONTENT_TYPE = 0x08;
const P_RESPONSE_TOPIC = 0x10;
const P_CORRELATION = 0x20;
const P_USER_PROPS = 0x40;

function writeProperties(w: ValueWriter, p: MessageProperties): void {
  let flags = 0;
  if (p.payloadFormatIndicator !== undefined) flags |= P_FORMAT | (p.payloadFormatIndicator ? P_FORMAT_TRUE : 0);
  if (p.messageExpiryInterval !== undefined) flags |= P_EXPIRY;
  if (p.contentType !== undefined) flags |= P_CONTENT_TYPE;
  if (p.responseTopic !== undefined) flags |= P_RESPONSE_TOPIC;
  if (p.correlationData !== undefined) flags |= P_CORRELATION;
  if (p.userProperties !== undefined) flags |= P_USER_PROPS;
  w.u8(flags);
  if (p.messageExpiryInterval !== undefined) w.f64(p.messageExpiryInterval);
  if (p.contentType !== undefined) w.string(p.contentType);
  if (p.responseTopic !== undefined) w.string(p.responseTopic);
  if (p.correlationData !== undefined) w.bytes(p.correlationData);
  if (p.userProperties !== undefined) {
    w.varint(p.userProperties.length);
    for (const [name, value] of p.userProperties) {
      w.string(name);
      w.string(value);
    }
  }
}

function readProperties(r: ValueReader): MessageProperties {
  const flags = r.u8();
  const p: {
    payloadFormatIndicator?: boolean;
    messageExpiryInterval?: number;
    contentType?: string;
    responseTopic?: string;
    correlationData?: Uint8Array;
    userProperties?: Array<readonly [string, string]>;
  } = {};
  if (flags & P_FORMAT) p.payloadFormatIndicator = (flags & P_FORMAT_TRUE) !== 0;
  if (flags & P_EXPIRY) p.messageExpiryInterval = r.f64();
  if (flags & P_CONTENT_TYPE) p.contentType = r.string();
  if (flags & P_RESPONSE_TOPIC) p.responseTopic = r.string();
  if (flags & P_CORRELATION) p.correlationData = r.bytes();
  if (flags & P_USER_PROPS) {
    const n = r.varint();
    const pairs: Array<readonly [string, string]> = [];
    for (let i = 0; i < n; i++) {
      const name = r.string();
      pairs.push([name, r.string()]);
    }
    p.userProperties = pairs;
  }
  return p;
}

/** Appends a stored message. */
export function writeMessage(w: ValueWriter, m: StoredMessage): void {
  w.u8(m.qos | (m.retain ? M_RETAIN : 0) | (m.expiresAt !== undefined ? M_EXPIRES : 0) | (m.properties !== undefined ? M_PROPS : 0));
  w.string(m.topic);
  w.bytes(m.payload);
  w.f64(m.publishedAt);
  if (m.expiresAt !== undefined) w.f64(m.expiresAt);
  if (m.properties !== undefined) writeProperties(w, m.properties);
}

/** Reads a stored message. */
export function readMessage(r: ValueReader): StoredMessage {
  const flags = r.u8();
  const topic = r.string();
  const payload = r.bytes();
  const publishedAt = r.f64();
  const m: {
    topic: string;
    payload: Uint8Array;
    qos: QoS;
    retain: boolean;
    publishedAt: number;
    expiresAt?: number;
    properties?: MessageProperties;
  } = { topic, payload, qos: (flags & 0x03) as QoS, retain: (flags & M_RETAIN) !== 0, publishedAt };
  if (flags & M_EXPIRES) m.expiresAt = r.f64();
  if (flags & M_PROPS) m.properties = readProperties(r);
  return m;
}

/** A stored message as a value. */
export function encodeMessage(m: StoredMessage): Buffer {
  const w = new ValueWriter(64 + m.topic.length + m.payload.byteLength);
  writeMessage(w, m);
  return w.finish();
}

export function decodeMessage(value: Buffer): StoredMessage {
  return readMessage(new ValueReader(value));
}

const IM_RETAIN = 0x04;
const IM_SUB_IDS = 0x08;

/** Appends an inbox message (delivery fields, then the message). */
export function writeInboxMessage(w: ValueWriter, m: InboxMessage): void {
  w.u8(m.qos | (m.retain ? IM_RETAIN : 0) | (m.subscriptionIds !== undefined ? IM_SUB_IDS : 0));
  if (m.subscriptionIds !== undefined) {
    w.varint(m.subscriptionIds.length);
    for (const id of m.subscriptionIds) w.varint(id);
  }
  writeMessage(w, m.message);
}

export function readInboxMessage(r: ValueReader): InboxMessage {
  const flags = r.u8();
  let subscriptionIds: number[] | undefined;
  if (flags & IM_SUB_IDS) {
    const n = r.varint();
    subscriptionIds = [];
    for (let i = 0; i < n; i++) subscriptionIds.push(r.varint());
  }
  const message = readMessage(r);
  const qos = (flags & 0x03) as QoS;
  const retain = (flags & IM_RETAIN) !== 0;
  return subscriptionIds === undefined ? { message, qos, retain } : { message, qos, retain, subscriptionIds };
}

export function decodeInboxMessage(value: Buffer): InboxMessage {
  return readInboxMessage(new ValueReader(value));
}

const F_PUBREL = 0x01;
const F_MESSAGE = 0x02;
const F_INBOX_SEQ = 0x04;

/** An inflight record as a value. */
export function encodeInflight(record: InflightRecord): Buffer {
  const w = new ValueWriter(record.message === undefined ? 12 : 104 + record.message.message.payload.byteLength);
  w.u16(record.packetId);
  const seq = record.inboxSeq;
  w.u8((record.phase === 'pubrel' ? F_PUBREL : 0) | (record.message !== undefined ? F_MESSAGE : 0) | (seq !== undefined ? F_INBOX_SEQ : 0));
  if (record.message !== undefined) writeInboxMessage(w, record.message);
  if (seq !== undefined) w.f64(seq);
  return w.finish();
}

export function decodeInflight(value: Buffer): InflightRecord {
  const r = new ValueReader(value);
  const packetId = r.u16();
  const flags = r.u8();
  const phase = flags & F_PUBREL ? 'pubrel' : 'publish';
  const message = flags & F_MESSAGE ? readInboxMessage(r) : undefined;
  const inboxSeq = flags & F_INBOX_SEQ ? r.f64() : undefined;
  return { packetId, phase, ...(message !== undefined ? { message } : {}), ...(inboxSeq !== undefined ? { inboxSeq } : {}) };
}

const S_DISCONNECTED = 0x01;
const S_WILL = 0x02;
const SUB_NO_LOCAL = 0x04;
const SUB_RAP = 0x08;
const SUB_HAS_ID = 0x40;
const W_RETAIN = 0x04;
const W_PROPS = 0x08;

function writeSubscription(w: ValueWriter, s: SubscriptionRecord): void {
  w.string(s.filter);
  w.u8(
    s.qos |
      (s.noLocal ? SUB_NO_LOCAL : 0) |
      (s.retainAsPublished ? SUB_RAP : 0) |
      (s.retainHandling << 4) |
      (s.subscriptionId !== undefined ? SUB_HAS_ID : 0),
  );
  if (s.subscriptionId !== undefined) w.varint(s.subscriptionId);
}

function readSubscription(r: ValueReader): SubscriptionRecord {
  const filter = r.string();
  const flags = r.u8();
  const base = {
    filter,
    qos: (flags & 0x03) as QoS,
    noLocal: (flags & SUB_NO_LOCAL) !== 0,
    retainAsPublished: (flags & SUB_RAP) !== 0,
    retainHandling: ((flags >> 4) & 0x03) as 0 | 1 | 2,
  };
  return flags & SUB_HAS_ID ? { ...base, subscriptionId: r.varint() } : base;
}

function writeWill(w: ValueWriter, will: WillRecord): void {
  w.u8(will.qos | (will.retain ? W_RETAIN : 0) | (will.properties !== undefined ? W_PROPS : 0));
  w.string(will.topic);
  w.bytes(will.payload);
  w.varint(will.delaySeconds);
  if (will.properties !== undefined) writeProperties(w, will.properties);
}

function readWill(r: ValueReader): WillRecord {
  const flags = r.u8();
  const topic = r.string();
  const payload = r.bytes();
  const delaySeconds = r.varint();
  const base = { topic, payload, qos: (flags & 0x03) as QoS, retain: (flags & W_RETAIN) !== 0, delaySeconds };
  return flags & W_PROPS ? { ...base, properties: readProperties(r) } : base;
}

/** A session record as a value. */
export function encodeSession(s: SessionRecord): Buffer {
  const w = new ValueWriter(128 + (s.will?.payload.byteLength ?? 0));
  w.u8((s.disconnectedAt !== undefined ? S_DISCONNECTED : 0) | (s.will !== undefined ? S_WILL : 0));
  w.string(s.tenantId);
  w.string(s.clientId);
  w.string(s.userId);
  w.u8(s.protocolVersion);
  w.varint(s.expirySeconds);
  w.f64(s.createdAt);
  if (s.disconnectedAt !== undefined) w.f64(s.disconnectedAt);
  w.varint(s.subscriptions.length);
  for (const sub of s.subscriptions) writeSubscription(w, sub);
  if (s.will !== undefined) writeWill(w, s.will);
  return w.finish();
}

export function decodeSession(value: Buffer): SessionRecord {
  const r = new ValueReader(value);
  const flags = r.u8();
  const tenantId = r.string();
  const clientId = r.string();
  const userId = r.string();
  const protocolVersion = r.u8() as ProtocolVersion;
  const expirySeconds = r.varint();
  const createdAt = r.f64();
  const disconnectedAt = flags & S_DISCONNECTED ? r.f64() : undefined;
  const n = r.varint();
  const subscriptions: SubscriptionRecord[] = [];
  for (let i = 0; i < n; i++) subscriptions.push(readSubscription(r));
  const record: {
    tenantId: string;
    clientId: string;
    userId: string;
    protocolVersion: ProtocolVersion;
    expirySeconds: number;
    createdAt: number;
    disconnectedAt?: number;
    subscriptions: SubscriptionRecord[];
    will?: WillRecord;
  } = { tenantId, clientId, userId, protocolVersion, expirySeconds, createdAt, subscriptions };
  if (disconnectedAt !== undefined) record.disconnectedAt = disconnectedAt;
  if (flags & S_WILL) record.will = readWill(r);
  return record;
}

const BAN_KINDS: readonly BanKind[] = ['clientId', 'user', 'tenant', 'address'];
const B_TENANT = 0x01;
const B_REASON = 0x02;
const B_UNTIL = 0x04;
const B_BY = 0x08;

/** A ban as a value: kind, presence flags, value, createdAt, then the optional fields. */
export function encodeBan(ban: BanRecord): Buffer {
  const w = new ValueWriter(64 + ban.value.length + (ban.reason?.length ?? 0));
  w.u8(BAN_KINDS.indexOf(ban.kind));
  w.u8(
    (ban.tenantId !== undefined ? B_TENANT : 0) |
      (ban.reason !== undefined ? B_REASON : 0) |
      (ban.until !== undefined ? B_UNTIL : 0) |
      (ban.by !== undefined ? B_BY : 0),
  );
  w.string(ban.value);
  w.f64(ban.createdAt);
  if (ban.tenantId !== undefined) w.string(ban.tenantId);
  if (ban.reason !== undefined) w.string(ban.reason);
  if (ban.until !== undefined) w.f64(ban.until);
  if (ban.by !== undefined) w.string(ban.by);
  return w.finish();
}

export function decodeBan(value: Buffer): BanRecord {
  const r = new ValueReader(value);
  const kind = BAN_KINDS[r.u8()];
  if (kind === undefined) throw new RangeError('unknown ban kind');
  const flags = r.u8();
  const ban: { kind: BanKind; value: string; createdAt: number; tenantId?: string; reason?: string; until?: number; by?: string } = {
    kind,
    value: r.string(),
    createdAt: r.f64(),
  };
  if (flags & B_TENANT) ban.tenantId = r.string();
  if (flags & B_REASON) ban.reason = r.string();
  if (flags & B_UNTIL) ban.until = r.f64();
  if (flags & B_BY) ban.by = r.string();
  return ban;
}
