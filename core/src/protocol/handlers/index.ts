import type { Packet } from 'mqtt-packet';
import type { ConnectionPort } from '../connection-port';
import { decodePublish, hasMalformedTopic } from '../../codec/publish-codec';
import {
  checkAck,
  checkPingreq,
  decodeAuth,
  decodeDisconnect,
  decodeSubscribe,
  decodeUnsubscribe,
  isDecodeFailure,
  unexpectedPacketType,
  type DecodeFailure,
} from '../../codec/packet-decoder';
import { PACKET, type AckType } from '../../codec/packet-types';
import { RC } from '../../codec/reason-codes';
import { handleAuth } from './auth';
import { handleDisconnect } from './disconnect';
import { handlePingreq } from './pingreq';
import { handlePublish } from './publish';
import { handlePuback } from './puback';
import { handlePubrec } from './pubrec';
import { handlePubrel } from './pubrel';
import { handlePubcomp } from './pubcomp';
import { handleSubscribe } from './subscribe';
import { handleUnsubscribe } from './unsubscribe';

/**
 * Dispatch by packet type for a connected client: one entry per type (the fixed header's high
 * four bits), each decoding its frame and calling the packet's handler, or closing for the reason
 * the decoder gave. CONNECT and what comes before CONNACK are the connection's own
 * (`onPreConnectFrame`). The frame's fixed-header flags were checked already.
 */
export type FrameHandler = (conn: ConnectionPort, header: number, body: Buffer, frame: Buffer) => void;

/** Close for a frame the decoder refused, with its reason code and event. */
export function refuseFrame(conn: ConnectionPort, failure: DecodeFailure): void {
  conn.protocolError(failure.code, failure.why, failure.event);
}

/** AUTH during the CONNECT exchange or for re-authentication (v5). */
export function dispatchAuth(conn: ConnectionPort, body: Buffer): void {
  const packet = decodeAuth(body);
  if (isDecodeFailure(packet)) refuseFrame(conn, packet);
  else handleAuth(conn, packet);
}

function decoded<P extends Packet>(
  decode: (body: Buffer, v5: boolean) => P | DecodeFailure,
  handle: (conn: ConnectionPort, packet: P) => void,
): FrameHandler {
  return (conn, _header, body) => {
    const packet = decode(body, conn.v5);
    if (isDecodeFailure(packet)) refuseFrame(conn, packet);
    else handle(conn, packet);
  };
}

function ack(type: AckType, handle: (conn: ConnectionPort, packetId: number, reasonCode: number) => void): FrameHandler {
  return (conn, _header, body) => {
    const bad = checkAck(type, body, conn.v5);
    if (bad !== undefined) refuseFrame(conn, bad);
    else handle(conn, body.readUInt16BE(0), body.length > 2 ? body[2]! : 0);
  };
}

const unexpected: FrameHandler = (conn, header) => refuseFrame(conn, unexpectedPacketType(header >> 4, conn.v5));

/** The handler of each packet type, indexed by type (0..15). */
export const CONNECTED_HANDLERS: readonly FrameHandler[] = (() => {
  const t: FrameHandler[] = new Array<FrameHandler>(16).fill(unexpected);
  t[PACKET.PUBLISH] = (conn, header, body, frame) => {
    const p = decodePublish(header, body, conn.v5);
    if (typeof p !== 'number') handlePublish(conn, p, frame);
    else if (hasMalformedTopic(body)) conn.protocolError(p, 'topic is ill-formed UTF-8 or contains U+0000', 'malformedTopic');
    else conn.protocolError(p, 'invalid PUBLISH', 'badPacket');
  };
  t[PACKET.PUBACK] = ack(PACKET.PUBACK, (conn, packetId) => handlePuback(conn, packetId));
  t[PACKET.PUBREC] = ack(PACKET.PUBREC, handlePubrec);
  t[PACKET.PUBREL] = ack(PACKET.PUBREL, (conn, packetId) => handlePubrel(conn, packetId));
  t[PACKET.PUBCOMP] = ack(PACKET.PUBCOMP, (conn, packetId) => handlePubcomp(conn, packetId));
  t[PACKET.PINGREQ] = (conn, _header, body) => {
    const bad = checkPingreq(body);
    if (bad !== undefined) refuseFrame(conn, bad);
    else handlePingreq(conn);
  };
  // A second CONNECT is a protocol error [MQTT-3.1.0-2].
  t[PACKET.CONNECT] = (conn) => conn.protocolError(RC.ProtocolError, 'second CONNECT', 'protocolViolation');
  t[PACKET.SUBSCRIBE] = decoded(decodeSubscribe, handleSubscribe);
  t[PACKET.UNSUBSCRIBE] = decoded(decodeUnsubscribe, handleUnsubscribe);
  t[PACKET.DISCONNECT] = decoded(decodeDisconnect, handleDisconnect);
  // AUTH exists in v5 only; in 3.1/3.1.1 type 15 is reserved (unexpected: malformed).
  t[PACKET.AUTH] = (conn, header, body, frame) => (conn.v5 ? dispatchAuth(conn, body) : unexpected(conn, header, body, frame));
  // Reserved type 0, and what only a server sends (CONNACK, SUBACK, UNSUBACK, PINGRESP), stay `unexpected`.
  return t;
})();
