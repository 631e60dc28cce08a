/**
 * A connection before CONNACK: the first packet must be CONNECT, only AUTH may come during an
 * enhanced authentication exchange, and what a client sends right after CONNECT is kept until the
 * CONNACK (MqttConnection.replayEarlyFrames). From CONNACK on, ./handlers/index.ts dispatches.
 */
import { decodeConnect, isDecodeFailure, type DecodeFailure } from '../codec/packet-decoder';
import type { ConnectionPort, ConnectionState } from './connection-port';
import { PACKET } from '../codec/packet-types';
import { RC } from '../codec/reason-codes';
import { handleConnect, handleUnsupportedConnect } from './handlers/connect';
import { dispatchAuth } from './handlers';

/** Largest packet before CONNECT tells us the tenant's limit; also the most bytes kept before CONNACK. */
export const PRE_CONNECT_MAX_PACKET = 1 << 20;

/** Packets received after CONNECT and before CONNACK: (header, body, frame) triples, and their bytes. */
export interface EarlyFrames {
  frames: (number | Buffer)[];
  bytes: number;
}

/** The connection before CONNACK (MqttConnection): it moves itself to `authenticating` and keeps early packets. */
export interface PreConnectConnection extends ConnectionPort {
  state: ConnectionState;
  early: EarlyFrames | undefined;
}

/** A frame (its fixed-header flags checked) that arrived before CONNACK. */
export function preConnectFrame(conn: PreConnectConnection, header: number, type: number, body: Buffer, frame: Buffer): void {
  if (conn.state === 'awaiting-connect') {
    // The first packet MUST be CONNECT [MQTT-3.1.0-1].
    if (type !== PACKET.CONNECT) {
      conn.destroy();
      return;
    }
    if (handleUnsupportedConnect(conn, body)) return;
    const connect = decodeConnect(body);
    if (isDecodeFailure(connect)) {
      refuseConnect(conn, connect, body[2 + body.readUInt16BE(0)]!);
      return;
    }
    conn.state = 'authenticating';
    handleConnect(conn, connect);
    return;
  }
  // During an enhanced authentication exchange only AUTH (v5) may arrive [MQTT-3.1.2-30], (§4.12.0).
  if (type === PACKET.AUTH && conn.v5) {
    dispatchAuth(conn, body);
    return;
  }
  if (conn.authExchange !== undefined || conn.pendingConnect !== undefined) {
    conn.protocolError(RC.ProtocolError, 'packet other than AUTH during authentication', 'protocolViolation');
    return;
  }
  // A client may send packets right after CONNECT without waiting for CONNACK (§3.1.4): they are
  // kept, within the pre-CONNECT packet limit, and handled once the CONNACK is sent.
  const early = (conn.early ??= { frames: [], bytes: 0 });
  early.bytes += frame.length;
  if (early.bytes > PRE_CONNECT_MAX_PACKET) {
    conn.protocolError(RC.PacketTooLarge, 'too many bytes before CONNACK', 'oversizePacketDropped');
    return;
  }
  early.frames.push(header, body, frame);
}

/**
 * A CONNECT the decoder refused: 3.1/3.1.1 close without CONNACK (§4.8: a protocol violation
 * closes the connection); v5 may first get CONNACK with 0x81 / 0x82 [MQTT-4.13.1-1].
 */
function refuseConnect(conn: ConnectionPort, failure: DecodeFailure, level: number): void {
  const engine = conn.engine;
  engine.logger.debug({ remote: conn.origin.remoteAddress, reasonCode: failure.code, why: failure.why }, 'refusing CONNECT');
  engine.emit(failure.event, undefined, { reasonCode: failure.code, reason: failure.why, remoteAddress: conn.origin.remoteAddress });
  conn.closeCause = 'reported';
  if (level !== 5) {
    conn.destroy();
    return;
  }
  conn.write(Buffer.from([0x20, 0x03, 0x00, failure.code, 0x00]));
  conn.end();
}
