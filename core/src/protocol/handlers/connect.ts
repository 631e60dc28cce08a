import { randomBytes } from 'node:crypto';
import type { IConnackPacket, IConnectPacket } from 'mqtt-packet';
import type { AuthRequest, ClientInfo, ProtocolVersion } from '@bifro/spi';
import type { AuthOutcome } from '../../plugin-host/managers';
import type { MqttConnection } from '../connection';
import { connackCodeForAuthReject, RC, RC3 } from '../reason-codes';

/** A client identifier the broker assigns: unique, valid for every protocol version (≤ 23 chars of [0-9a-zA-Z]) [MQTT-3.1.3-5]. */
function assignClientId(): string {
  return 'bifro' + randomBytes(9).toString('hex');
}

function refuse(conn: MqttConnection, codeV5: number, codeV3: number): void {
  const packet: IConnackPacket = { cmd: 'connack', sessionPresent: false };
  if (conn.protocolVersion === 5) packet.reasonCode = codeV5;
  else packet.returnCode = codeV3;
  conn.send(packet);
  conn.end();
}

/**
 * CONNECT: check the client identifier, run the auth chain, answer CONNACK.
 * Sessions, wills and the rest of CONNECT come with the protocol engine.
 */
export function handleConnect(conn: MqttConnection, packet: IConnectPacket): void {
  const version = conn.protocolVersion;
  let clientId = packet.clientId;
  let assigned = false;
  if (clientId.length === 0) {
    // A v3.1.1 client with an empty id MUST ask for a clean session [MQTT-3.1.3-7], [MQTT-3.1.3-8].
    if (version !== 5 && packet.clean === false) {
      refuse(conn, RC.ClientIdentifierNotValid, RC3.IdentifierRejected);
      return;
    }
    clientId = assignClientId();
    assigned = true;
  } else if (Buffer.byteLength(clientId) > conn.services.mqtt.maxClientIdLength) {
    refuse(conn, RC.ClientIdentifierNotValid, RC3.IdentifierRejected);
    return;
  }

  const request: AuthRequest = {
    protocolVersion: version,
    clientId,
    username: packet.username,
    password: packet.password,
    remoteAddress: conn.origin.remoteAddress,
    remotePort: conn.origin.remotePort,
    listener: conn.origin.listener,
    clientCertificate: conn.origin.clientCertificate,
  };
  const outcome = conn.services.auth.authenticate(request);
  if (outcome instanceof Promise) {
    outcome.then(
      (result) => finishConnect(conn, packet, result, clientId, assigned),
      () => refuse(conn, RC.UnspecifiedError, RC3.ServerUnavailable),
    );
  } else {
    finishConnect(conn, packet, outcome, clientId, assigned);
  }
}

function finishConnect(conn: MqttConnection, packet: IConnectPacket, outcome: AuthOutcome, clientId: string, assigned: boolean): void {
  if (conn.state === 'closed') return;
  const version: ProtocolVersion = conn.protocolVersion;
  if (outcome.type === 'reject') {
    conn.services.logger.info({ clientId, reason: outcome.reason, text: outcome.text }, 'connection refused by auth');
    refuse(conn, connackCodeForAuthReject(outcome.reason, 5), connackCodeForAuthReject(outcome.reason, version));
    return;
  }
  const client: ClientInfo = {
    tenantId: outcome.tenantId,
    userId: outcome.userId,
    clientId,
    protocolVersion: version,
    remoteAddress: conn.origin.remoteAddress,
    remotePort: conn.origin.remotePort,
    listener: conn.origin.listener,
    attrs: outcome.attrs ?? {},
  };
  const connack: IConnackPacket = { cmd: 'connack', sessionPresent: false };
  if (version === 5) {
    connack.reasonCode = RC.Success;
    if (assigned) connack.properties = { assignedClientIdentifier: clientId };
  } else {
    connack.returnCode = RC3.Accepted;
  }
  conn.accept(client, packet.keepalive ?? 0);
  conn.send(connack);
  conn.services.logger.debug({ tenantId: client.tenantId, clientId }, 'client connected');
}
