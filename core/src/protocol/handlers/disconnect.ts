import type { IDisconnectPacket } from 'mqtt-packet';
import type { ConnectionPort } from '../connection-port';
import { RC } from '../../codec/reason-codes';

/**
 * DISCONNECT from the client: close without publishing the will [MQTT-3.1.2-10], except v5
 * reason 0x04 (disconnect with will message). A v5 client may change its Session Expiry Interval,
 * but not from 0 to non-zero [MQTT-3.14.2-2].
 */
export function handleDisconnect(conn: ConnectionPort, packet: IDisconnectPacket): void {
  const session = conn.session;
  const expiry = packet.properties?.sessionExpiryInterval;
  if (conn.v5 && expiry !== undefined && session !== undefined) {
    if (session.expirySeconds === 0 && expiry !== 0) {
      conn.protocolError(RC.ProtocolError, 'session expiry changed from 0 at DISCONNECT', 'protocolViolation');
      return;
    }
    const engine = conn.engine;
    const tenantId = session.tenantId;
    session.expirySeconds =
      expiry === 0
        ? 0
        : Math.min(
            Math.max(expiry, engine.setting(tenantId, 'MinSessionExpirySeconds')),
            engine.setting(tenantId, 'MaxSessionExpirySeconds'),
          );
  }
  conn.normalDisconnect = !(conn.v5 && packet.reasonCode === RC.DisconnectWithWillMessage);
  conn.closeCause = { type: 'byClient', reasonCode: packet.reasonCode ?? 0 };
  conn.end();
}
