import type { IAuthPacket } from 'mqtt-packet';
import type { ConnectionPort } from '../connection-port';
import { RC } from '../../codec/reason-codes';
import { continueExtendedAuth } from './connect';

/**
 * AUTH (v5 enhanced authentication): the next step of an exchange started by CONNECT, or a
 * re-authentication of a connected client (0x19) with the method it connected with
 * [MQTT-4.12.1-1]. Anything else is a protocol error (§4.12.0).
 */
export function handleAuth(conn: ConnectionPort, packet: IAuthPacket): void {
  const engine = conn.engine;
  const method = packet.properties?.authenticationMethod;
  const data = packet.properties?.authenticationData;
  const exchange = conn.authExchange;

  if (conn.state === 'authenticating') {
    if (exchange === undefined || packet.reasonCode !== RC.ContinueAuthentication || method !== exchange.method) {
      conn.protocolError(RC.ProtocolError, 'unexpected AUTH during connect', 'protocolViolation');
      return;
    }
    const request = conn.pendingConnect!.request;
    conn.hold(
      Promise.resolve(engine.auth.extendedAuth({ ...request, phase: 'continue', method, data, state: exchange.state })).then((result) =>
        continueExtendedAuth(conn, method, exchange.state, result),
      ),
    );
    return;
  }

  // Connected: re-authentication.
  const started = packet.reasonCode === RC.ReAuthenticate;
  if (
    (!started && (exchange === undefined || packet.reasonCode !== RC.ContinueAuthentication)) ||
    conn.authMethod === undefined ||
    method !== conn.authMethod
  ) {
    conn.protocolError(RC.ProtocolError, 'unexpected AUTH', 'protocolViolation');
    return;
  }
  const client = conn.client!;
  const state = started ? new Map<string, unknown>() : exchange!.state;
  const request = {
    protocolVersion: conn.protocolVersion,
    clientId: client.clientId,
    remoteAddress: conn.origin.remoteAddress,
    remotePort: conn.origin.remotePort,
    listener: conn.origin.listener,
    clientCertificate: conn.origin.clientCertificate,
    phase: started ? ('reauth' as const) : ('continue' as const),
    method,
    data,
    state,
    client,
  };
  conn.hold(
    Promise.resolve(engine.auth.extendedAuth(request)).then((result) => {
      if (conn.state === 'closed') return;
      if (result.type === 'continue') {
        conn.authExchange = { method, state, reauth: true };
        conn.send({
          cmd: 'auth',
          reasonCode: RC.ContinueAuthentication,
          properties: {
            authenticationMethod: method,
            authenticationData: result.data === undefined ? undefined : Buffer.from(result.data),
          },
        });
        return;
      }
      conn.authExchange = undefined;
      if (result.type === 'failed' || result.tenantId !== client.tenantId) {
        // A failed re-authentication ends the connection [MQTT-4.12.1-2]; so does a change of tenant.
        conn.closeCause = 'reported';
        engine.emit('reAuthFailed', client, { remoteAddress: conn.origin.remoteAddress, method });
        conn.disconnect(RC.NotAuthorized, result.type === 'failed' ? result.text : 'tenant changed on re-authentication');
        return;
      }
      // The new credentials' lifetime replaces the old one's (none: they do not expire).
      conn.renewCredentials(result.expiresAt ?? 0);
      conn.send({
        cmd: 'auth',
        reasonCode: 0,
        properties: { authenticationMethod: method, authenticationData: result.data === undefined ? undefined : Buffer.from(result.data) },
      });
    }),
  );
}
