import type { InboxMessage, InflightRecord, MessageProperties, SessionRecord, StoredMessage, UserProperties, WillRecord } from '@bifro/spi';

/**
 * Copies made when data enters the memory storage (copy-on-store): the broker may reuse or
 * mutate its buffers after a write resolves, and what is stored must not change with them.
 * Strings and numbers are immutable and shared; every `Uint8Array` and every array is copied.
 * Data handed back by reads is the stored copy itself: callers must treat it as read-only.
 */

/** A fresh `Uint8Array` with the same bytes (a plain Uint8Array even when given a Buffer). */
export function copyBytes(bytes: Uint8Array): Uint8Array {
  return new Uint8Array(bytes);
}

function copyUserProperties(props: UserProperties): UserProperties {
  return props.map(([name, value]) => [name, value] as const);
}

/** A deep copy of MQTT 5 message properties. */
export function copyProperties(p: MessageProperties): MessageProperties {
  return {
    ...p,
    ...(p.correlationData !== undefined ? { correlationData: copyBytes(p.correlationData) } : {}),
    ...(p.userProperties !== undefined ? { userProperties: copyUserProperties(p.userProperties) } : {}),
  };
}

/** A deep copy of a stored message. */
export function copyMessage(m: StoredMessage): StoredMessage {
  return {
    ...m,
    payload: copyBytes(m.payload),
    ...(m.properties !== undefined ? { properties: copyProperties(m.properties) } : {}),
  };
}

/** A deep copy of an inbox message. */
export function copyInboxMessage(m: InboxMessage): InboxMessage {
  return {
    ...m,
    message: copyMessage(m.message),
    ...(m.subscriptionIds !== undefined ? { subscriptionIds: [...m.subscriptionIds] } : {}),
  };
}

/** A deep copy of an inflight record. */
export function copyInflightRecord(r: InflightRecord): InflightRecord {
  return { ...r, ...(r.message !== undefined ? { message: copyInboxMessage(r.message) } : {}) };
}

function copyWill(w: WillRecord): WillRecord {
  return { ...w, payload: copyBytes(w.payload), ...(w.properties !== undefined ? { properties: copyProperties(w.properties) } : {}) };
}

/** A deep copy of a session record. */
export function copySessionRecord(r: SessionRecord): SessionRecord {
  return {
    ...r,
    subscriptions: r.subscriptions.map((s) => ({ ...s })),
    ...(r.will !== undefined ? { will: copyWill(r.will) } : {}),
  };
}
