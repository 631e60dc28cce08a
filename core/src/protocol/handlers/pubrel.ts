import type { MqttConnection } from '../connection';
import { RC } from '../reason-codes';

/**
 * PUBREL: release an inbound QoS 2 packet id and answer PUBCOMP [MQTT-4.3.3-11]. The message was
 * delivered on PUBLISH, once; an unknown id still gets PUBCOMP (v5: 0x92) (§4.3.3).
 */
export function handlePubrel(conn: MqttConnection, packetId: number): void {
  const session = conn.session;
  const known = session?.inboundQoS2.delete(packetId) ?? false;
  if (known && session!.persistent) {
    session!.host.persistence
      .removeIncoming(session!, packetId)
      .catch((err: unknown) => session!.host.storageFailed(session!, 'incoming remove', err));
  }
  conn.sendAck(7, packetId, known || !conn.v5 ? 0 : RC.PacketIdentifierNotFound);
}
