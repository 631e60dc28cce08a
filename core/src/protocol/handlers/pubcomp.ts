import type { MqttConnection } from '../connection';

/** PUBCOMP: a QoS 2 delivery is done (§4.3.3). Unknown ids are ignored. */
export function handlePubcomp(conn: MqttConnection, packetId: number): void {
  conn.session?.complete(packetId);
}
