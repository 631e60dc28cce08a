import { isUtf8 } from 'node:buffer';
import type { IAuthPacket, IConnectPacket, IDisconnectPacket, ISubscribePacket, ISubscription, IUnsubscribePacket, QoS } from 'mqtt-packet';
import { checkSubscription, PROTOCOL_TOPIC_LIMITS } from '../routing/topic';
import { readVarint } from './varint';
import { PACKET, type AckType } from './packet-types';

/**
 * Bifro's decoder for the control packets a client sends other than PUBLISH (which has its own
 * codec in ./publish-codec): CONNECT, SUBSCRIBE, UNSUBSCRIBE, DISCONNECT, AUTH, and the checks
 * on PUBACK/PUBREC/PUBREL/PUBCOMP and PINGREQ.
 *
 * Every function is a pure function of one complete frame (the frame reader has gathered it):
 * no parser object, no buffer, no position survives a call, so nothing one connection sends can
 * reach the decoding of another (the defect mqtt-packet's shared parser had: its read position
 * outlived a parse error). Decoding is strict: every rule the specification states about the
 * bytes is checked here, and the result names the reason code to close with.
 */

/** Why a frame was refused: the v5 reason code, the event reported, and a reason for the log. */
export interface DecodeFailure {
  readonly failed: true;
  /** 0x81 Malformed Packet or 0x82 Protocol Error (MQTT 5 §4.13). */
  readonly code: 0x81 | 0x82;
  readonly why: string;
  readonly event: DecodeFailureEvent;
}

/** The SPI event a refused frame is reported as. */
export type DecodeFailureEvent =
  'badPacket' | 'protocolViolation' | 'malformedClientIdentifier' | 'malformedUserName' | 'malformedWillTopic' | 'malformedTopicFilter';

export const MALFORMED_PACKET = 0x81;
export const PROTOCOL_ERROR = 0x82;

/** Thrown inside a decode only; every exported function catches it and returns it. */
class Refusal implements DecodeFailure {
  readonly failed = true;
  constructor(
    readonly code: 0x81 | 0x82,
    readonly why: string,
    readonly event: DecodeFailureEvent = code === MALFORMED_PACKET ? 'badPacket' : 'protocolViolation',
  ) {}
}

function malformed(why: string, event?: DecodeFailureEvent): never {
  throw new Refusal(MALFORMED_PACKET, why, event);
}

function protocolError(why: string): never {
  throw new Refusal(PROTOCOL_ERROR, why);
}

/** What a refused frame returns. */
export function isDecodeFailure(x: unknown): x is DecodeFailure {
  return x instanceof Refusal;
}

function attempt<T>(decode: () => T): T | DecodeFailure {
  try {
    return decode();
  } catch (err) {
    if (err instanceof Refusal) return err;
    throw err;
  }
}

/** A read cursor over one frame's body; created per decode, never shared. */
class Reader {
  pos = 0;
  constructor(
    readonly buf: Buffer,
    public end: number = buf.length,
  ) {}

  get done(): boolean {
    return this.pos >= this.end;
  }

  u8(what: string): number {
    if (this.pos + 1 > this.end) malformed(`${what} runs past the packet`);
    return this.buf[this.pos++]!;
  }

  u16(what: string): number {
    if (this.pos + 2 > this.end) malformed(`${what} runs past the packet`);
    const v = this.buf.readUInt16BE(this.pos);
    this.pos += 2;
    return v;
  }

  u32(what: string): number {
    if (this.pos + 4 > this.end) malformed(`${what} runs past the packet`);
    const v = this.buf.readUInt32BE(this.pos);
    this.pos += 4;
    return v;
  }

  varint(what: string): number {
    const r = readVarint(this.buf, this.pos, this.end);
    if (r === undefined) malformed(`${what} is not a valid variable byte integer`);
    this.pos = r[1];
    return r[0];
  }

  /** Binary data: a two-byte length and that many bytes (§1.5.6). A copy: the frame's memory may be the socket's. */
  binary(what: string): Buffer {
    const len = this.u16(what);
    if (this.pos + len > this.end) malformed(`${what} runs past the packet`);
    const out = Buffer.from(this.buf.subarray(this.pos, this.pos + len));
    this.pos += len;
    return out;
  }

  /**
   * A UTF-8 Encoded String (§1.5.4): well-formed UTF-8 [MQTT-1.5.4-1] without U+0000
   * [MQTT-1.5.4-2] (3.1.1: [MQTT-1.5.3-1], [MQTT-1.5.3-2]); otherwise a malformed packet,
   * reported as `event`.
   */
  utf8(what: string, event?: DecodeFailureEvent, why?: string): string {
    const len = this.u16(what);
    if (this.pos + len > this.end) malformed(`${what} runs past the packet`);
    const bytes = this.buf.subarray(this.pos, this.pos + len);
    if (!isUtf8(bytes) || bytes.includes(0)) malformed(why ?? `${what} is ill-formed UTF-8 or contains U+0000`, event);
    this.pos += len;
    return bytes.toString('utf8');
  }
}

// ---- properties (MQTT 5 §2.2.2) ----

type PropertyType = 'bool' | 'u16' | 'u32' | 'varint' | 'utf8' | 'binary' | 'pair';

/** The properties a client may send, by identifier: the name mqtt-packet's types use and the data type. */
const PROPERTIES: Readonly<Record<number, readonly [string, PropertyType]>> = {
  0x01: ['payloadFormatIndicator', 'bool'],
  0x02: ['messageExpiryInterval', 'u32'],
  0x03: ['contentType', 'utf8'],
  0x08: ['responseTopic', 'utf8'],
  0x09: ['correlationData', 'binary'],
  0x0b: ['subscriptionIdentifier', 'varint'],
  0x11: ['sessionExpiryInterval', 'u32'],
  0x15: ['authenticationMethod', 'utf8'],
  0x16: ['authenticationData', 'binary'],
  0x17: ['requestProblemInformation', 'bool'],
  0x18: ['willDelayInterval', 'u32'],
  0x19: ['requestResponseInformation', 'bool'],
  0x1f: ['reasonString', 'utf8'],
  0x21: ['receiveMaximum', 'u16'],
  0x22: ['topicAliasMaximum', 'u16'],
  0x26: ['userProperties', 'pair'],
  0x27: ['maximumPacketSize', 'u32'],
};

/** Which properties each packet (or the will) may carry (§3.x.2.2 property lists). */
const ALLOWED = {
  connect: new Set([0x11, 0x15, 0x16, 0x17, 0x19, 0x21, 0x22, 0x26, 0x27]),
  will: new Set([0x01, 0x02, 0x03, 0x08, 0x09, 0x18, 0x26]),
  ack: new Set([0x1f, 0x26]),
  subscribe: new Set([0x0b, 0x26]),
  unsubscribe: new Set([0x26]),
  disconnect: new Set([0x11, 0x1f, 0x26]),
  auth: new Set([0x15, 0x16, 0x1f, 0x26]),
} as const;

type Props = Record<string, unknown>;

/** User Properties as received: name-value pairs in their order, repeated names included (§3.1.2.11.8). */
export type UserPropertyPairs = [string, string][];

type ConnectProperties = Omit<NonNullable<IConnectPacket['properties']>, 'userProperties'> & { userProperties?: UserPropertyPairs };
type WillProperties = Omit<NonNullable<NonNullable<IConnectPacket['will']>['properties']>, 'userProperties'> & {
  userProperties?: UserPropertyPairs;
};

/** A decoded CONNECT: mqtt-packet's shape, with user properties (of CONNECT and of the will) as ordered pairs. */
export type DecodedConnect = Omit<IConnectPacket, 'properties' | 'will'> & {
  properties?: ConnectProperties;
  will?: Omit<NonNullable<IConnectPacket['will']>, 'properties' | 'payload'> & { payload: Buffer; properties?: WillProperties };
};

/**
 * A property block: its length, then properties. An identifier not valid for the packet is a
 * malformed packet; a property other than User Property given twice a protocol error (§2.2.2.2).
 * User Properties are checked always and kept (as ordered pairs) where the broker uses them.
 */
function readProperties(r: Reader, allowed: ReadonlySet<number>, what: string, keepUserProperties = false): Props | undefined {
  const len = r.varint(`${what} property length`);
  const end = r.pos + len;
  if (end > r.end) malformed(`${what} properties run past the packet`);
  if (len === 0) return undefined;
  const outerEnd = r.end;
  r.end = end;
  const props: Props = {};
  while (!r.done) {
    const id = r.varint(`${what} property identifier`);
    const spec = PROPERTIES[id];
    if (spec === undefined || !allowed.has(id)) malformed(`property 0x${id.toString(16)} is not valid in ${what}`);
    const [name, type] = spec;
    if (type === 'pair') {
      const key = r.utf8('user property name');
      const value = r.utf8('user property value');
      if (keepUserProperties) ((props.userProperties ??= []) as UserPropertyPairs).push([key, value]);
      continue;
    }
    if (props[name] !== undefined) protocolError(`${what} carries ${name} more than once`);
    switch (type) {
      case 'bool': {
        const v = r.u8(name);
        // Payload Format Indicator, Request Problem / Response Information: 0 or 1 (§3.1.2.11.6, §3.1.2.11.7, §3.3.2.3.2).
        if (v > 1) protocolError(`${name} is ${v} (0 or 1 allowed)`);
        props[name] = v === 1;
        break;
      }
      case 'u16':
        props[name] = r.u16(name);
        break;
      case 'u32':
        props[name] = r.u32(name);
        break;
      case 'varint':
        props[name] = r.varint(name);
        break;
      case 'utf8':
        props[name] = r.utf8(name);
        break;
      case 'binary':
        props[name] = r.binary(name);
        break;
    }
  }
  r.end = outerEnd;
  return Object.keys(props).length === 0 ? undefined : props;
}

/** A Response Topic is a topic name: no wildcards [MQTT-3.3.2-14], and not empty. */
function checkResponseTopic(topic: unknown): void {
  if (typeof topic !== 'string') return;
  if (topic.length === 0 || topic.includes('+') || topic.includes('#')) protocolError('response topic is empty or contains a wildcard');
}

// ---- CONNECT (§3.1) ----

/**
 * CONNECT body, after the protocol name, level and reserved flag were checked
 * (handleUnsupportedConnect). Refuses what §3.1 forbids: will QoS/retain without the will flag
 * [MQTT-3.1.2-11], [MQTT-3.1.2-13] (v5 [MQTT-3.1.2-11], [MQTT-3.1.2-12]), will QoS 3
 * [MQTT-3.1.2-14], a password without a user name in 3.1/3.1.1 [MQTT-3.1.2-22], ill-formed or
 * U+0000 strings, bad or repeated properties, bytes missing or left over.
 */
export function decodeConnect(body: Buffer): DecodedConnect | DecodeFailure {
  return attempt(() => {
    const r = new Reader(body);
    const protocolId = r.utf8('protocol name') as 'MQTT' | 'MQIsdp';
    const level = r.u8('protocol level') as 3 | 4 | 5;
    const v5 = level === 5;
    const flags = r.u8('connect flags');
    const keepalive = r.u16('keep alive');
    const willFlag = (flags & 0x04) !== 0;
    const willQoS = (flags >> 3) & 0x03;
    const willRetain = (flags & 0x20) !== 0;
    const hasPassword = (flags & 0x40) !== 0;
    const hasUsername = (flags & 0x80) !== 0;
    if (!willFlag && (willQoS !== 0 || willRetain)) malformed('will QoS or will retain set without the will flag');
    if (willQoS === 3) malformed('will QoS 3');
    if (!v5 && hasPassword && !hasUsername) malformed('password flag set without the user name flag');
    const packet: DecodedConnect = {
      cmd: 'connect',
      protocolId,
      protocolVersion: level,
      clean: (flags & 0x02) !== 0,
      keepalive,
      clientId: '',
    };
    if (v5) {
      const props = readProperties(r, ALLOWED.connect, 'CONNECT', true);
      if (props !== undefined) {
        // §3.1.2.11.3 / §3.1.2.11.4: Receive Maximum and Maximum Packet Size of 0 are protocol errors.
        if (props.receiveMaximum === 0) protocolError('receive maximum 0');
        if (props.maximumPacketSize === 0) protocolError('maximum packet size 0');
        // §3.1.2.11.10: Authentication Data without an Authentication Method is a protocol error.
        if (props.authenticationData !== undefined && props.authenticationMethod === undefined)
          protocolError('authentication data without an authentication method');
        packet.properties = props as ConnectProperties;
      }
    }
    packet.clientId = r.utf8('client identifier', 'malformedClientIdentifier', 'client identifier is ill-formed UTF-8');
    if (willFlag) {
      const willProps = v5 ? readProperties(r, ALLOWED.will, 'will', true) : undefined;
      if (willProps !== undefined) checkResponseTopic(willProps.responseTopic);
      const topic = r.utf8('will topic', 'malformedWillTopic', 'will topic is ill-formed UTF-8');
      const payload = r.binary('will payload');
      packet.will = { topic, payload, qos: willQoS as QoS, retain: willRetain };
      if (willProps !== undefined) packet.will.properties = willProps as WillProperties;
    }
    if (hasUsername) packet.username = r.utf8('user name', 'malformedUserName', 'user name is ill-formed UTF-8');
    if (hasPassword) packet.password = r.binary('password');
    if (!r.done) malformed('bytes after the end of the CONNECT payload');
    return packet;
  });
}

// ---- SUBSCRIBE (§3.8) and UNSUBSCRIBE (§3.10) ----

/**
 * A filter's syntax as the protocol defines it (wildcards, `$share/` form): a filter that breaks it
 * is not "correctly formed", so it is a malformed packet, not a SUBACK 0x8F (§3.9.3); tenant limits
 * (length, levels) are checked by the handler and answered with 0x8F.
 */
function checkFilterSyntax(filter: string): void {
  const check = checkSubscription(filter, PROTOCOL_TOPIC_LIMITS);
  // [MQTT-4.7.1-1], [MQTT-4.7.1-2], [MQTT-4.7.3-1], [MQTT-4.8.2-1], [MQTT-4.8.2-2].
  if (!check.ok) malformed(`invalid topic filter (${check.reason})`, 'malformedTopicFilter');
}

const FILTER_WHY = 'topic filter is ill-formed UTF-8 or contains U+0000';

/** A non-zero packet identifier [MQTT-2.2.1-3]. */
function packetIdentifier(r: Reader, what: string): number {
  const id = r.u16(`${what} packet identifier`);
  if (id === 0) protocolError(`${what} with packet identifier 0`);
  return id;
}

/**
 * SUBSCRIBE: a non-zero packet id, properties (one Subscription Identifier, 1..268,435,455
 * §3.8.2.1.2), at least one filter [MQTT-3.8.3-3], options with the reserved bits clear
 * [MQTT-3.8.3-5] (3.1.1 [MQTT-3-8.3-4]), QoS ≤ 2 and Retain Handling ≤ 2 (§3.8.3.1).
 */
export function decodeSubscribe(body: Buffer, v5: boolean): ISubscribePacket | DecodeFailure {
  return attempt(() => {
    const r = new Reader(body);
    const messageId = packetIdentifier(r, 'SUBSCRIBE');
    const packet: ISubscribePacket = { cmd: 'subscribe', messageId, subscriptions: [] };
    if (v5) {
      const props = readProperties(r, ALLOWED.subscribe, 'SUBSCRIBE');
      if (props !== undefined) {
        if (props.subscriptionIdentifier === 0) protocolError('subscription identifier 0');
        packet.properties = props as ISubscribePacket['properties'];
      }
    }
    while (!r.done) {
      const topic = r.utf8('topic filter', 'malformedTopicFilter', FILTER_WHY);
      const options = r.u8('subscription options');
      const qos = options & 0x03;
      // "It is a Protocol Error if the Maximum QoS field has the value 3" (§3.8.3.1).
      if (qos === 3) protocolError('subscription QoS 3');
      if (v5) {
        if ((options & 0xc0) !== 0) malformed('reserved subscription option bits set');
        const rh = (options >> 4) & 0x03;
        if (rh === 3) protocolError('retain handling 3');
        checkFilterSyntax(topic);
        const sub: ISubscription = { topic, qos: qos as QoS, nl: (options & 0x04) !== 0, rap: (options & 0x08) !== 0, rh: rh as 0 | 1 | 2 };
        packet.subscriptions.push(sub);
      } else {
        if ((options & 0xfc) !== 0) malformed('reserved subscription option bits set');
        checkFilterSyntax(topic);
        packet.subscriptions.push({ topic, qos: qos as QoS });
      }
    }
    if (packet.subscriptions.length === 0) protocolError('SUBSCRIBE without topic filters');
    return packet;
  });
}

/** UNSUBSCRIBE: a non-zero packet id, user properties only, at least one valid filter [MQTT-3.10.3-2]. */
export function decodeUnsubscribe(body: Buffer, v5: boolean): IUnsubscribePacket | DecodeFailure {
  return attempt(() => {
    const r = new Reader(body);
    const messageId = packetIdentifier(r, 'UNSUBSCRIBE');
    const packet: IUnsubscribePacket = { cmd: 'unsubscribe', messageId, unsubscriptions: [] };
    if (v5) {
      const props = readProperties(r, ALLOWED.unsubscribe, 'UNSUBSCRIBE');
      if (props !== undefined) packet.properties = props as IUnsubscribePacket['properties'];
    }
    while (!r.done) {
      const filter = r.utf8('topic filter', 'malformedTopicFilter', FILTER_WHY);
      checkFilterSyntax(filter);
      packet.unsubscriptions.push(filter);
    }
    if (packet.unsubscriptions.length === 0) protocolError('UNSUBSCRIBE without topic filters');
    return packet;
  });
}

// ---- DISCONNECT (§3.14) and AUTH (§3.15) ----

/** DISCONNECT reason codes a client may send (§3.14.2.1). */
const CLIENT_DISCONNECT_CODES = new Set([0x00, 0x04, 0x80, 0x81, 0x82, 0x83, 0x90, 0x93, 0x94, 0x95, 0x96, 0x97, 0x98, 0x99]);

/** DISCONNECT: no body in 3.1/3.1.1 (§3.14.1); in v5 an optional reason code a client may send and properties. */
export function decodeDisconnect(body: Buffer, v5: boolean): IDisconnectPacket | DecodeFailure {
  return attempt(() => {
    if (!v5) {
      if (body.length !== 0) malformed('DISCONNECT with a body');
      return { cmd: 'disconnect' };
    }
    const r = new Reader(body);
    const packet: IDisconnectPacket = { cmd: 'disconnect', reasonCode: r.done ? 0 : r.u8('reason code') };
    if (!CLIENT_DISCONNECT_CODES.has(packet.reasonCode!)) protocolError(`DISCONNECT reason code 0x${packet.reasonCode!.toString(16)}`);
    if (!r.done) {
      const props = readProperties(r, ALLOWED.disconnect, 'DISCONNECT');
      if (props !== undefined) packet.properties = props as IDisconnectPacket['properties'];
    }
    if (!r.done) malformed('bytes after the DISCONNECT properties');
    return packet;
  });
}

/** AUTH reason codes (§3.15.2.1): success, continue authentication, re-authenticate. */
const AUTH_CODES = new Set([0x00, 0x18, 0x19]);

/** AUTH (v5 only; the caller refuses type 15 from 3.1/3.1.1): reason code and properties. */
export function decodeAuth(body: Buffer): IAuthPacket | DecodeFailure {
  return attempt(() => {
    const r = new Reader(body);
    const reasonCode = r.done ? 0 : r.u8('reason code');
    if (!AUTH_CODES.has(reasonCode)) protocolError(`AUTH reason code 0x${reasonCode.toString(16)}`);
    const packet: IAuthPacket = { cmd: 'auth', reasonCode };
    if (!r.done) {
      const props = readProperties(r, ALLOWED.auth, 'AUTH');
      if (props !== undefined) {
        if (props.authenticationData !== undefined && props.authenticationMethod === undefined)
          protocolError('authentication data without an authentication method');
        packet.properties = props as IAuthPacket['properties'];
      }
    }
    if (!r.done) malformed('bytes after the AUTH properties');
    return packet;
  });
}

// ---- acknowledgements (§3.4 - §3.7) and PINGREQ (§3.12) ----

/** Reason codes a client may put in PUBACK/PUBREC (§3.4.2.1, §3.5.2.1) and in PUBREL/PUBCOMP (§3.6.2.1, §3.7.2.1). */
const PUBACK_CODES = new Set([0x00, 0x10, 0x80, 0x83, 0x87, 0x90, 0x91, 0x97, 0x99]);
const PUBREL_CODES = new Set([0x00, 0x92]);

const ACK_NAMES = ['', '', '', '', 'PUBACK', 'PUBREC', 'PUBREL', 'PUBCOMP'] as const;

/**
 * Checks a PUBACK/PUBREC/PUBREL/PUBCOMP body without allocating on the common path: 3.1/3.1.1
 * exactly a packet id (remaining length 2, §3.4.1); v5 a packet id, then optionally a reason
 * code valid for the type and properties (Reason String once, User Properties) that end exactly
 * at the end of the packet. The packet id must not be 0 [MQTT-2.2.1-3]. Undefined when fine.
 */
export function checkAck(type: AckType, body: Buffer, v5: boolean): DecodeFailure | undefined {
  const name = ACK_NAMES[type];
  if (!v5) {
    if (body.length !== 2) return new Refusal(MALFORMED_PACKET, `${name} with remaining length ${body.length} (2 required)`);
  } else if (body.length < 2) return new Refusal(MALFORMED_PACKET, `${name} without packet identifier`);
  if (body.readUInt16BE(0) === 0) return new Refusal(PROTOCOL_ERROR, `${name} with packet identifier 0`);
  if (body.length === 2) return undefined;
  const code = body[2]!;
  if (!(type === PACKET.PUBACK || type === PACKET.PUBREC ? PUBACK_CODES : PUBREL_CODES).has(code))
    return new Refusal(PROTOCOL_ERROR, `${name} reason code 0x${code.toString(16)}`);
  if (body.length === 3) return undefined;
  return attempt(() => {
    const r = new Reader(body);
    r.pos = 3;
    readProperties(r, ALLOWED.ack, name);
    if (!r.done) malformed(`bytes after the ${name} properties`);
    return undefined;
  });
}

/** PINGREQ has no variable header and no payload (§3.12): a remaining length other than 0 is malformed. */
export function checkPingreq(body: Buffer): DecodeFailure | undefined {
  return body.length === 0 ? undefined : new Refusal(MALFORMED_PACKET, `PINGREQ with remaining length ${body.length}`);
}

/** A packet type a client never sends: reserved 0 (and 15 before v5) is malformed, server-only types a protocol error (§2.1.2). */
export function unexpectedPacketType(type: number, v5: boolean): DecodeFailure {
  if (type === 0 || (type === PACKET.AUTH && !v5)) return new Refusal(MALFORMED_PACKET, `reserved packet type ${type}`);
  return new Refusal(PROTOCOL_ERROR, `packet type ${type} is sent by servers only`);
}
