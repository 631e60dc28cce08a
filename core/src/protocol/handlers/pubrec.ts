import type { ConnectionPort } from '../connection-port';
import { FIRST_FAILURE_CODE, RC } from '../../codec/reason-codes';
import { PACKET } from '../../codec/packet-types';

/**
 * PUBREC: the client has a QoS 2 message; answer PUBREL [MQTT-4.3.3-4]. A PUBREC with a failure
 * reason (v5, ≥ 0x80) ends the flow. An unknown packet id gets PUBREL 0x92 (v5).
 */
export function handlePubrec(conn: ConnectionPort, packetId: number, reasonCode: number): void {
  const session = conn.session;
  if (session !== undefined && session.received(packetId, reasonCode >= FIRST_FAILURE_CODE)) return;
  if (reasonCode < FIRST_FAILURE_CODE) conn.sendAck(PACKET.PUBREL, packetId, conn.v5 ? RC.PacketIdentifierNotFound : 0);
}
