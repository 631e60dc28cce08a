import type { ConnectionPort } from '../connection-port';

const PINGRESP = Buffer.from([0xd0, 0x00]);

/** PINGREQ: answer PINGRESP [MQTT-3.12.4-1]. */
export function handlePingreq(conn: ConnectionPort): void {
  conn.write(PINGRESP);
}
