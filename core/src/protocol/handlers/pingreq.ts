import type { MqttConnection } from '../connection';

/** PINGREQ: answer PINGRESP [MQTT-3.12.4-1]. */
export function handlePingreq(conn: MqttConnection): void {
  conn.send({ cmd: 'pingresp' });
}
