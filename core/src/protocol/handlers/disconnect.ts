import type { MqttConnection } from '../connection';

/** DISCONNECT from the client: close the network connection [MQTT-3.14.4-1]. */
export function handleDisconnect(conn: MqttConnection): void {
  conn.end();
}
