import type { MqttConnection } from '../connection';

const PINGRESP = Buffer.from([0xd0, 0x00]);

/** PINGREQ: answer PINGRESP [MQTT-3.12.4-1]. */
export function handlePingreq(conn: MqttConnection): void {
  conn.write(PINGRESP);
}
