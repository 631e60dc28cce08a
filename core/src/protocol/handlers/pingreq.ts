import type { ConnectionPort } from '../connection-port';
import { PACKET } from '../../codec/packet-types';

const PINGRESP = Buffer.from([PACKET.PINGRESP << 4, 0x00]);

/** PINGREQ: answer PINGRESP [MQTT-3.12.4-1]. */
export function handlePingreq(conn: ConnectionPort): void {
  conn.write(PINGRESP);
}
