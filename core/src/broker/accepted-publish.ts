import type { ClientInfo } from '@bifro/spi';
import { describeError } from '../base/errors';
import type { Message } from '../session/message';
import type { WriteWaiter } from '../session/session-types';
import { COUNTER, resourceIndex, type TenantState } from '../tenancy/tenant-usage';
import type { Engine } from './engine';

const INBOUND_RATE = resourceIndex('TotalInboundBytesPerSecond');

/**
 * What every accepted application message goes through, whoever published it (a client's PUBLISH
 * in protocol/handlers/publish.ts, the admin API's publish in api/publish.ts): counted in the
 * tenant's traffic, retained, and handed to the engine for delivery. Checks (topic, size, QoS,
 * permission) are the caller's. QoS 1/2 pass the waiter of their acknowledgement: it is held by
 * the retained write and by every persistent-inbox append, so it settles once storage has them.
 * Returns the number of deliveries.
 */
export function publishAccepted(
  engine: Engine,
  publisher: ClientInfo,
  tenant: TenantState,
  msg: Message,
  waiter: WriteWaiter | undefined,
): number {
  const size = msg.payload.length;
  tenant.counters[COUNTER.messagesIn]++;
  tenant.counters[COUNTER.bytesIn]! += size;
  // Counted per payload; the throttler is asked once per chunk read (MqttConnection.onData).
  tenant.countRate(INBOUND_RATE, size, engine.wheel.now);
  if (msg.retain) {
    const retained = engine.retainMessage(publisher, msg);
    // QoS 0 does not wait for storage; a failure is logged and reported by the engine.
    if (waiter === undefined) retained.catch(() => undefined);
    else waiter.add(retained);
  }
  return distribute(engine, publisher, msg, waiter);
}

/**
 * Hand an accepted message to the engine. A message that reaches no subscriber and is not
 * retained is reported as `pubDiscarded`. A throw is logged; QoS 0 reports it as `distError` at
 * once, QoS 1/2 fails its waiter (the publisher then gets no success, and `distError` is reported
 * with the other failed writes). Returns the number of deliveries.
 */
function distribute(engine: Engine, publisher: ClientInfo, msg: Message, waiter: WriteWaiter | undefined): number {
  try {
    const matched = engine.publish(publisher.tenantId, msg, waiter);
    if (matched === 0 && !msg.retain)
      engine.emit('pubDiscarded', publisher, () => ({ topic: msg.topic, qos: msg.qos, size: msg.payload.length, reason: 'noSubscribers' }));
    return matched;
  } catch (err) {
    engine.logger.error(
      { tenantId: publisher.tenantId, clientId: publisher.clientId, topic: msg.topic, err: describeError(err) },
      'publish not distributed',
    );
    if (waiter !== undefined) {
      waiter.hold();
      waiter.fail(err);
    } else engine.emit('distError', publisher, { what: 'publish', topic: msg.topic, qos: msg.qos, error: describeError(err) });
    return 0;
  }
}
