import { isUtf8 } from 'node:buffer';
import type { QoS } from '@bifro/spi';
import { readVarint, varintSize, writeVarint } from './varint';
import { PACKET, type AckType } from './packet-types';

/**
 * PUBLISH is the hot packet: Bifro decodes and encodes it itself rather than through mqtt-packet,
 * to validate as it reads, keep v5 user properties in their order [MQTT-3.3.2-18] (mqtt-packet
 * folds them into an object), and encode one buffer per message variant that every subscriber
 * shares.
 */

/** MQTT 5 PUBLISH properties as received or to send. */
export interface PublishProperties {
  payloadFormatIndicator?: boolean;
  messageExpiryInterval?: number;
  topicAlias?: number;
  responseTopic?: string;
  correlationData?: Buffer;
  userProperties?: [string, string][];
  subscriptionIds?: number[];
  contentType?: string;
}

/** A decoded inbound PUBLISH. */
export interface DecodedPublish {
  topic: string;
  qos: QoS;
  retain: boolean;
  dup: boolean;
  packetId: number;
  properties: PublishProperties | undefined;
  payload: Buffer;
}

/** Why a PUBLISH could not be decoded: the v5 reason code to disconnect with. */
export type PublishDecodeError = 0x81 | 0x82;
export const MALFORMED = 0x81;
export const PROTOCOL_ERROR = 0x82;

function readUtf8(buf: Buffer, pos: number, end: number): [string, number] | undefined {
  if (pos + 2 > end) return undefined;
  const len = buf.readUInt16BE(pos);
  const start = pos + 2;
  if (start + len > end) return undefined;
  const stop = start + len;
  // UTF-8 must be well formed and must not contain U+0000 [MQTT-1.5.4-1], [MQTT-1.5.4-2]. Most
  // topics are ASCII: one pass checks them, the full UTF-8 check runs only for the others.
  let ascii = true;
  for (let i = start; i < stop; i++) {
    const b = buf[i]!;
    if (b === 0) return undefined;
    if (b > 0x7f) {
      ascii = false;
      break;
    }
  }
  if (ascii) return [buf.toString('latin1', start, stop), stop];
  const bytes = buf.subarray(start, stop);
  if (!isUtf8(bytes) || bytes.includes(0)) return undefined;
  return [bytes.toString('utf8'), stop];
}

/**
 * Whether a PUBLISH body's topic is present but ill-formed UTF-8 or contains U+0000
 * [MQTT-1.5.4-1], [MQTT-1.5.4-2]: tells a malformed topic from other reasons
 * {@link decodePublish} refused the packet for (not on the hot path).
 */
export function hasMalformedTopic(body: Buffer): boolean {
  if (body.length < 2) return false;
  const len = body.readUInt16BE(0);
  if (2 + len > body.length) return false;
  const bytes = body.subarray(2, 2 + len);
  return !isUtf8(bytes) || bytes.includes(0);
}

/** Decode a PUBLISH body. Errors: 0x81 malformed, 0x82 protocol error. */
export function decodePublish(header: number, body: Buffer, v5: boolean): DecodedPublish | PublishDecodeError {
  const qos = (header >> 1) & 0x03;
  // QoS 3 is malformed [MQTT-3.3.1-4].
  if (qos === 3) return MALFORMED;
  const dup = (header & 0x08) !== 0;
  // DUP must be 0 for QoS 0 [MQTT-3.3.1-2].
  if (dup && qos === 0) return MALFORMED;
  const end = body.length;
  const t = readUtf8(body, 0, end);
  if (t === undefined) return MALFORMED;
  const topic = t[0];
  let pos = t[1];
  let packetId = 0;
  if (qos > 0) {
    if (pos + 2 > end) return MALFORMED;
    packetId = body.readUInt16BE(pos);
    pos += 2;
    // A packet identifier is non-zero [MQTT-2.2.1-3].
    if (packetId === 0) return MALFORMED;
  }
  let properties: PublishProperties | undefined;
  if (v5) {
    const l = readVarint(body, pos, end);
    if (l === undefined) return MALFORMED;
    const propsEnd = l[1] + l[0];
    if (propsEnd > end) return MALFORMED;
    pos = l[1];
    if (pos < propsEnd) {
      properties = {};
      while (pos < propsEnd) {
        const id = body[pos++]!;
        switch (id) {
          case 0x01:
            if (properties.payloadFormatIndicator !== undefined) return PROTOCOL_ERROR;
            if (pos >= propsEnd) return MALFORMED;
            // 0 (unspecified bytes) or 1 (UTF-8) only (§3.3.2.3.2): another value is not rewritten, it is refused.
            if (body[pos]! > 1) return PROTOCOL_ERROR;
            properties.payloadFormatIndicator = body[pos++] === 1;
            break;
          case 0x02:
            if (properties.messageExpiryInterval !== undefined) return PROTOCOL_ERROR;
            if (pos + 4 > propsEnd) return MALFORMED;
            properties.messageExpiryInterval = body.readUInt32BE(pos);
            pos += 4;
            break;
          case 0x23:
            if (properties.topicAlias !== undefined) return PROTOCOL_ERROR;
            if (pos + 2 > propsEnd) return MALFORMED;
            properties.topicAlias = body.readUInt16BE(pos);
            pos += 2;
            break;
          case 0x08: {
            if (properties.responseTopic !== undefined) return PROTOCOL_ERROR;
            const s = readUtf8(body, pos, propsEnd);
            if (s === undefined) return MALFORMED;
            // A Response Topic is a topic name: not empty, no wildcards [MQTT-3.3.2-14].
            if (s[0].length === 0 || s[0].includes('+') || s[0].includes('#')) return PROTOCOL_ERROR;
            properties.responseTopic = s[0];
            pos = s[1];
            break;
          }
          case 0x03: {
            if (properties.contentType !== undefined) return PROTOCOL_ERROR;
            const s = readUtf8(body, pos, propsEnd);
            if (s === undefined) return MALFORMED;
            properties.contentType = s[0];
            pos = s[1];
            break;
          }
          case 0x09: {
            if (properties.correlationData !== undefined) return PROTOCOL_ERROR;
            if (pos + 2 > propsEnd) return MALFORMED;
            const len = body.readUInt16BE(pos);
            if (pos + 2 + len > propsEnd) return MALFORMED;
            properties.correlationData = body.subarray(pos + 2, pos + 2 + len);
            pos += 2 + len;
            break;
          }
          case 0x26: {
            const k = readUtf8(body, pos, propsEnd);
            if (k === undefined) return MALFORMED;
            const v = readUtf8(body, k[1], propsEnd);
            if (v === undefined) return MALFORMED;
            (properties.userProperties ??= []).push([k[0], v[0]]);
            pos = v[1];
            break;
          }
          // A Subscription Identifier from a client is a protocol error [MQTT-3.3.4-6].
          case 0x0b:
            return PROTOCOL_ERROR;
          // An identifier that is not a PUBLISH property makes the packet malformed (§2.2.2.2).
          default:
            return MALFORMED;
        }
      }
    }
    pos = propsEnd;
  }
  return { topic, qos: qos as QoS, retain: (header & 0x01) !== 0, dup, packetId, properties, payload: body.subarray(pos) };
}

/** Byte size of the properties that do not change per subscriber (all but expiry, alias and subscription ids). */
function staticPropsSize(p: PublishProperties): number {
  let size = 0;
  if (p.payloadFormatIndicator !== undefined) size += 2;
  if (p.contentType !== undefined) size += 3 + Buffer.byteLength(p.contentType);
  if (p.responseTopic !== undefined) size += 3 + Buffer.byteLength(p.responseTopic);
  if (p.correlationData !== undefined) size += 3 + p.correlationData.length;
  if (p.userProperties !== undefined) {
    for (const [k, v] of p.userProperties) size += 5 + Buffer.byteLength(k) + Buffer.byteLength(v);
  }
  return size;
}

function writeStaticProps(buf: Buffer, pos: number, p: PublishProperties): number {
  if (p.payloadFormatIndicator !== undefined) {
    buf[pos++] = 0x01;
    buf[pos++] = p.payloadFormatIndicator ? 1 : 0;
  }
  if (p.contentType !== undefined) pos = writeStringProp(buf, pos, 0x03, p.contentType);
  if (p.responseTopic !== undefined) pos = writeStringProp(buf, pos, 0x08, p.responseTopic);
  if (p.correlationData !== undefined) {
    buf[pos++] = 0x09;
    buf.writeUInt16BE(p.correlationData.length, pos);
    pos += 2 + p.correlationData.copy(buf, pos + 2);
  }
  if (p.userProperties !== undefined) {
    for (const [k, v] of p.userProperties) {
      buf[pos++] = 0x26;
      pos = writeString(buf, pos, k);
      pos = writeString(buf, pos, v);
    }
  }
  return pos;
}

function writeString(buf: Buffer, pos: number, s: string): number {
  const len = buf.write(s, pos + 2, 'utf8');
  buf.writeUInt16BE(len, pos);
  return pos + 2 + len;
}

function writeStringProp(buf: Buffer, pos: number, id: number, s: string): number {
  buf[pos++] = id;
  return writeString(buf, pos, s);
}

/** What varies between deliveries of one message. */
export interface PublishVariant {
  qos: QoS;
  retain: boolean;
  dup: boolean;
  /** Written as 0 when encoding a shared template; patch with {@link patchPacketId}. */
  packetId: number;
  v5: boolean;
  /** v5: remaining Message Expiry Interval to send (undefined: none). */
  messageExpiryInterval?: number;
  /** v5: Subscription Identifiers of the matching subscriptions. */
  subscriptionIds?: readonly number[];
  /** v5: topic alias to send. */
  topicAlias?: number;
  /** v5: send an empty topic name (the alias is already known to the client). */
  omitTopic?: boolean;
}

/** The message fields the encoder needs. */
export interface EncodableMessage {
  readonly topic: string;
  readonly payload: Buffer;
  readonly properties: PublishProperties | undefined;
}

/** Encode a PUBLISH into one buffer. Returns the buffer and the offset of its packet id (-1 for QoS 0). */
export function encodePublish(msg: EncodableMessage, variant: PublishVariant): { buf: Buffer; packetIdOffset: number } {
  const topicLen = variant.omitTopic ? 0 : Buffer.byteLength(msg.topic);
  let propsLen = 0;
  if (variant.v5) {
    if (msg.properties !== undefined) propsLen += staticPropsSize(msg.properties);
    if (variant.messageExpiryInterval !== undefined) propsLen += 5;
    if (variant.topicAlias !== undefined) propsLen += 3;
    if (variant.subscriptionIds !== undefined) {
      for (const id of variant.subscriptionIds) propsLen += 1 + varintSize(id);
    }
  }
  const remaining = 2 + topicLen + (variant.qos > 0 ? 2 : 0) + (variant.v5 ? varintSize(propsLen) + propsLen : 0) + msg.payload.length;
  const buf = Buffer.allocUnsafe(1 + varintSize(remaining) + remaining);
  buf[0] = 0x30 | (variant.dup ? 0x08 : 0) | (variant.qos << 1) | (variant.retain ? 1 : 0);
  let pos = writeVarint(buf, 1, remaining);
  buf.writeUInt16BE(topicLen, pos);
  pos += 2;
  if (topicLen > 0) pos += buf.write(msg.topic, pos, 'utf8');
  let packetIdOffset = -1;
  if (variant.qos > 0) {
    packetIdOffset = pos;
    buf.writeUInt16BE(variant.packetId, pos);
    pos += 2;
  }
  if (variant.v5) {
    pos = writeVarint(buf, pos, propsLen);
    if (msg.properties !== undefined) pos = writeStaticProps(buf, pos, msg.properties);
    if (variant.messageExpiryInterval !== undefined) {
      buf[pos++] = 0x02;
      buf.writeUInt32BE(variant.messageExpiryInterval, pos);
      pos += 4;
    }
    if (variant.topicAlias !== undefined) {
      buf[pos++] = 0x23;
      buf.writeUInt16BE(variant.topicAlias, pos);
      pos += 2;
    }
    if (variant.subscriptionIds !== undefined) {
      for (const id of variant.subscriptionIds) {
        buf[pos++] = 0x0b;
        pos = writeVarint(buf, pos, id);
      }
    }
  }
  msg.payload.copy(buf, pos);
  return { buf, packetIdOffset };
}

/** A copy of a QoS 1/2 template with its packet id (and DUP flag) set. */
/**
 * A received PUBLISH frame (fixed header included) as the encoding of its own variant. Only for
 * a frame with DUP 0 and no properties: with those, what is sent differs from what came. The
 * remaining length is in its fewest bytes (the frame reader refuses others [MQTT-1.5.5-1]), so the
 * frame is byte for byte what {@link encodePublish} would make.
 */
export function receivedEncoding(frame: Buffer): { buf: Buffer; packetIdOffset: number } {
  let i = 1;
  while ((frame[i]! & 0x80) !== 0) i++;
  // After the fixed header: the topic's length and bytes, then (QoS 1/2) the packet id.
  return { buf: frame, packetIdOffset: (frame[0]! & 0x06) === 0 ? -1 : i + 3 + frame.readUInt16BE(i + 1) };
}

export function patchPacketId(template: Buffer, packetIdOffset: number, packetId: number, dup: boolean): Buffer {
  const buf = Buffer.allocUnsafe(template.length);
  template.copy(buf);
  buf.writeUInt16BE(packetId, packetIdOffset);
  if (dup) buf[0] |= 0x08;
  return buf;
}

/** Encode PUBACK / PUBREC / PUBREL / PUBCOMP (`type` 4, 5, 6, 7). v5 reason code omitted when 0 without properties. */
export function encodeAck(type: AckType, packetId: number, reasonCode: number, v5: boolean): Buffer {
  const withCode = v5 && reasonCode !== 0;
  const buf = Buffer.allocUnsafe(withCode ? 5 : 4);
  // PUBREL's fixed header flags are 0010 [MQTT-3.6.1-1].
  buf[0] = (type << 4) | (type === PACKET.PUBREL ? 0x02 : 0);
  buf[1] = withCode ? 3 : 2;
  buf.writeUInt16BE(packetId, 2);
  if (withCode) buf[4] = reasonCode;
  return buf;
}
