import type { ConnectionPort } from '../connection-port';

/** PUBACK: a QoS 1 delivery is done; the window opens for the next (§4.3.2). Unknown ids are ignored. */
export function handlePuback(conn: ConnectionPort, packetId: number): void {
  conn.session?.complete(packetId);
}
