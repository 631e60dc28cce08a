import type { ConnectionPort } from '../connection-port';

/** PUBCOMP: a QoS 2 delivery is done (§4.3.3). Unknown ids are ignored. */
export function handlePubcomp(conn: ConnectionPort, packetId: number): void {
  conn.session?.complete(packetId);
}
