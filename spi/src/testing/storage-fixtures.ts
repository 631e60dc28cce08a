import type { QoS } from '../common';
import type { InboxMessage, SessionRecord, Storage, StoredMessage } from '../storage';

/** Registers one storage case; the check gets a fresh, initialised, empty storage. */
export type AddStorageCase = (name: string, check: (storage: Storage) => Promise<void>) => void;

/** A fixed clock value the storage kit stamps messages with (2023-11-14). */
export const FIXTURE_TIME = 1_700_000_000_000;

/** UTF-8 bytes of a string. */
export function utf8(text: string): Uint8Array {
  return new TextEncoder().encode(text);
}

/** Every byte value 0..255 once, then the same reversed: a payload no text codec survives. */
export function binaryPayload(): Uint8Array {
  const out = new Uint8Array(512);
  for (let i = 0; i < 256; i++) {
    out[i] = i;
    out[511 - i] = i;
  }
  return out;
}

/** A plain message: payload = UTF-8 of the topic, QoS 1, not retained, no properties. */
export function plainMessage(topic: string, overrides: Partial<StoredMessage> = {}): StoredMessage {
  return { topic, payload: utf8(topic), qos: 1, retain: false, publishedAt: FIXTURE_TIME, ...overrides };
}

/** A message using every field: binary payload, all MQTT 5 properties, repeated user property names, expiry. */
export function richMessage(topic: string): StoredMessage {
  return {
    topic,
    payload: binaryPayload(),
    qos: 2,
    retain: true,
    publishedAt: FIXTURE_TIME,
    expiresAt: FIXTURE_TIME + 3_600_000_000,
    properties: {
      payloadFormatIndicator: false,
      messageExpiryInterval: 3_600_000,
      contentType: 'application/octet-stream; charset=ü',
      responseTopic: 'reply/to/me',
      correlationData: Uint8Array.from([0, 255, 1, 254, 0x80, 0x7f]),
      userProperties: [
        ['z', 'last-name-first'],
        ['a', '1'],
        ['a', '2'],
        ['', ''],
        ['ü', '€'],
      ],
    },
  };
}

/** The `i`-th numbered inbox message: topic `q/<i>`, payload the 4 bytes of `i`, delivery QoS 1. */
export function numberedInboxMessage(i: number, qos: QoS = 1): InboxMessage {
  const payload = new Uint8Array(4);
  new DataView(payload.buffer).setUint32(0, i);
  return { message: plainMessage(`q/${i}`, { payload }), qos, retain: false };
}

/** `count` numbered inbox messages starting at `from`. */
export function numberedInboxMessages(from: number, count: number): InboxMessage[] {
  return Array.from({ length: count }, (_, k) => numberedInboxMessage(from + k));
}

/** An inbox message using every field. */
export function richInboxMessage(topic: string): InboxMessage {
  return { message: richMessage(topic), qos: 1, retain: true, subscriptionIds: [7, 268435455, 1] };
}

/** A session record with two subscriptions; `rich` adds a will with binary payload and properties. */
export function sampleSession(tenantId: string, clientId: string, rich = false, overrides: Partial<SessionRecord> = {}): SessionRecord {
  const base: SessionRecord = {
    tenantId,
    clientId,
    userId: `user-of-${clientId}`,
    protocolVersion: 5,
    expirySeconds: 3600,
    createdAt: FIXTURE_TIME,
    disconnectedAt: FIXTURE_TIME + 1000,
    subscriptions: [
      { filter: 'a/+/c', qos: 1, noLocal: false, retainAsPublished: false, retainHandling: 0 },
      { filter: '$share/g1/x/#', qos: 2, noLocal: true, retainAsPublished: true, retainHandling: 2, subscriptionId: 42 },
    ],
  };
  if (!rich) return { ...base, ...overrides };
  const m = richMessage('will/topic');
  return {
    ...base,
    protocolVersion: 5,
    expirySeconds: 0xffffffff,
    will: { topic: m.topic, payload: m.payload, qos: 2, retain: true, properties: m.properties, delaySeconds: 30 },
    ...overrides,
  };
}
