import type { ConnectionPort } from '../connection-port';
import { PublishAck } from '../publish-ack';
import { RC } from '../../codec/reason-codes';
import { PACKET } from '../../codec/packet-types';

/**
 * PUBREL: release an inbound QoS 2 packet id and answer PUBCOMP [MQTT-4.3.3-11]. The message was
 * delivered on PUBLISH, once; an unknown id still gets PUBCOMP (v5: 0x92) (§4.3.3). For a
 * persistent session PUBCOMP waits until the release is stored: the client may reuse the packet
 * id right after it, and a restart must not take the new message for a duplicate.
 */
export function handlePubrel(conn: ConnectionPort, packetId: number): void {
  const session = conn.session;
  const known = session?.inboundQoS2.delete(packetId) ?? false;
  const ack = new PublishAck(conn, PACKET.PUBCOMP, packetId, undefined);
  ack.reasonCode = known || !conn.v5 ? 0 : RC.PacketIdentifierNotFound;
  if (known && session!.persistent) {
    const removed = session!.host.persistence.removeIncoming(session!, packetId);
    removed.catch((err: unknown) => session!.host.storageFailed(session!, 'incoming remove', err));
    ack.add(removed);
  }
  conn.queueAck(ack);
}
