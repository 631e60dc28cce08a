import type { IUnsubackPacket, IUnsubscribePacket } from 'mqtt-packet';
import type { ConnectionPort } from '../connection-port';
import { RC } from '../../codec/reason-codes';
import type { SubscriptionRecord } from '@bifro/spi';
import { removeSubscription, storeRemovals } from '../../broker/subscriptions';

/**
 * UNSUBSCRIBE: remove each filter (compared character by character [MQTT-3.10.4-1]) and answer
 * UNSUBACK with the same packet id [MQTT-3.10.4-4]; v5 carries one reason code per filter. A
 * persistent session's record is stored first; when it cannot be, the subscriptions are put back
 * and v5 gets 0x80 for them, a v3 client (whose UNSUBACK cannot say so) is disconnected.
 */
export function handleUnsubscribe(conn: ConnectionPort, packet: IUnsubscribePacket): void {
  const engine = conn.engine;
  const client = conn.client!;
  // The decoder refused an UNSUBSCRIBE without filters [MQTT-3.10.3-2].
  const filters = packet.unsubscriptions;
  if (filters.length > engine.setting(client.tenantId, 'MaxTopicFiltersPerSub'))
    engine.emit('tooLargeUnsubscription', client, { filters: filters.length });
  engine.usage.count(client.tenantId, 'TotalUnsubscribePerSecond', filters.length, engine.wheel.now);
  const checks = filters.map((filter) => engine.acl.check(client, { type: 'unsubscribe', filter }));
  if (checks.some((c) => c instanceof Promise)) conn.hold(Promise.all(checks).then((allowed) => finish(conn, packet, allowed)));
  else finish(conn, packet, checks as boolean[]);
}

function finish(conn: ConnectionPort, packet: IUnsubscribePacket, allowed: readonly boolean[]): void {
  if (conn.state === 'closed') return;
  const engine = conn.engine;
  const client = conn.client!;
  const session = conn.session!;
  const removed: SubscriptionRecord[] = [];
  const codes: number[] = packet.unsubscriptions.map((filter, i) => {
    if (!allowed[i]) {
      engine.emit('unsubActionDisallow', client, { filter });
      return RC.NotAuthorized;
    }
    const record = removeSubscription(engine, session, filter);
    if (record === undefined) return RC.NoSubscriptionExisted;
    removed.push(record);
    return 0;
  });
  const unsuback: IUnsubackPacket = { cmd: 'unsuback', messageId: packet.messageId!, granted: conn.v5 ? codes : [] };
  const acknowledge = (): void => {
    conn.send(unsuback);
    engine.emit('unsubAcked', client, () => ({ filters: packet.unsubscriptions.join(',') }));
  };
  if (!session.persistent || removed.length === 0) {
    acknowledge();
    return;
  }
  storeRemovals(engine, session, removed).then(acknowledge, () => {
    if (conn.state === 'closed') return;
    if (!conn.v5) {
      conn.disconnect(RC.UnspecifiedError, 'unsubscribe could not be stored');
      return;
    }
    for (let i = 0; i < codes.length; i++) if (codes[i] === 0) codes[i] = RC.UnspecifiedError;
    conn.send(unsuback);
  });
}
