/**
 * The acknowledgements of one connection that wait for storage writes (see ./publish-ack.ts),
 * sent in PUBLISH order [MQTT-4.6.0-2], [MQTT-4.6.0-3]. The queue is an array on the connection,
 * allocated at the first acknowledgement that has to wait.
 */
import type { ClientInfo } from '@bifro/spi';
import type { Engine } from '../broker/engine';
import type { Session } from '../session/session';
import { PACKET, type AckType } from '../codec/packet-types';
import type { ConnectionState } from './connection-port';
import type { PublishAck } from './publish-ack';
import { RC } from '../codec/reason-codes';
import { describeError } from '../base/errors';

/** The connection as its acknowledgement queue sees it (MqttConnection). */
export interface AckQueueOwner {
  /** Acknowledgements waiting for storage writes, in PUBLISH order (undefined until one had to wait). */
  ackQueue: PublishAck[] | undefined;
  readonly v5: boolean;
  readonly engine: Pick<Engine, 'emit' | 'storageHealth'>;
  readonly client: ClientInfo | undefined;
  readonly session: Pick<Session, 'inboundQoS2'> | undefined;
  readonly state: ConnectionState;
  sendAck(type: AckType, packetId: number, reasonCode: number, topic?: string): void;
  disconnect(reasonCode: number, reasonString?: string): void;
}

/**
 * Acknowledge a PUBLISH (or PUBREL) whose storage writes are tracked by `ack`: it leaves when
 * they are done and every earlier acknowledgement has left; with nothing to wait for and nothing
 * before it, at once.
 */
export function queueAck(conn: AckQueueOwner, ack: PublishAck): void {
  const queue = conn.ackQueue;
  if (!ack.mustQueue() && (queue === undefined || queue.length === 0)) {
    conn.sendAck(ack.type, ack.packetId, ack.reasonCode, ack.topic);
    return;
  }
  (conn.ackQueue ??= []).push(ack);
  ack.release();
}

/**
 * Send the settled acknowledgements at the head of the queue. A failed write is not acknowledged
 * as a success: v5 gets 0x80, a v3 client is disconnected (it will resend). A PUBCOMP whose
 * release was not stored has no failure code: the client is disconnected and resends its PUBREL
 * after reconnecting (otherwise a restart would take its next QoS 2 message with that packet id
 * for a duplicate). Once the connection is closed they are dropped.
 */
export function flushAcks(conn: AckQueueOwner): void {
  const queue = conn.ackQueue;
  if (queue === undefined) return;
  while (queue.length > 0 && queue[0]!.state !== 'waiting') {
    const entry = queue.shift()!;
    if (conn.state === 'closed') continue;
    if (entry.state === 'ready') {
      conn.sendAck(entry.type, entry.packetId, entry.reasonCode, entry.topic);
    } else if (entry.type === PACKET.PUBCOMP) {
      reportDistError(conn, entry);
      conn.session?.inboundQoS2.add(entry.packetId);
      conn.disconnect(RC.UnspecifiedError, 'storage write failed');
    } else if (conn.v5) {
      reportDistError(conn, entry);
      if (entry.type === PACKET.PUBREC) conn.session?.inboundQoS2.delete(entry.packetId);
      conn.sendAck(entry.type, entry.packetId, RC.UnspecifiedError, entry.topic);
    } else {
      reportDistError(conn, entry);
      conn.disconnect(RC.UnspecifiedError, 'storage write failed');
    }
  }
}

function reportDistError(conn: AckQueueOwner, entry: PublishAck): void {
  const health = conn.engine.storageHealth;
  if (health.failing) health.refused();
  const error = describeError(entry.error);
  conn.engine.emit('distError', conn.client, { what: 'publish', topic: entry.topic, qos: entry.type === PACKET.PUBACK ? 1 : 2, error });
}
