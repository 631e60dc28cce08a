/**
 * Packets the generator sends, encoded once with mqtt-packet before any timing starts (MQTT 3.1,
 * 3.1.1 or 5.0). Hot loops only write these buffers, or copies of them with a timestamp patched in.
 */
import mqtt from 'mqtt-packet';

export type QoS = 0 | 1 | 2;

/** The protocol level: 3 = MQTT 3.1 (`MQIsdp`), 4 = MQTT 3.1.1, 5 = MQTT 5.0. */
export type MqttVersion = 3 | 4 | 5;

export const MQTT_VERSIONS: readonly MqttVersion[] = [3, 4, 5];

export function isMqttVersion(n: number): n is MqttVersion {
  return n === 3 || n === 4 || n === 5;
}

/** How long (s) an MQTT 5 persistent session outlives its connection. */
export const SESSION_EXPIRY_S = 300;

/**
 * CONNECT; `clean: false` asks for a persistent session (MQTT 5: clean start 0 with a session
 * expiry interval of `SESSION_EXPIRY_S`).
 */
export function encodeConnect(
  clientId: string,
  keepalive = 0,
  clean = true,
  version: MqttVersion = 4,
  credentials?: { readonly username: string; readonly password?: string },
): Buffer {
  return mqtt.generate(
    {
      cmd: 'connect',
      protocolId: version === 3 ? 'MQIsdp' : 'MQTT',
      protocolVersion: version,
      clientId,
      clean,
      keepalive,
      ...(credentials === undefined ? {} : { username: credentials.username }),
      ...(credentials?.password === undefined ? {} : { password: Buffer.from(credentials.password) }),
      ...(version === 5 && !clean ? { properties: { sessionExpiryInterval: SESSION_EXPIRY_S } } : {}),
    },
    { protocolVersion: version },
  );
}

export function encodeSubscribe(messageId: number, topic: string, qos: QoS, version: MqttVersion = 4): Buffer {
  return mqtt.generate({ cmd: 'subscribe', messageId, subscriptions: [{ topic, qos }] }, { protocolVersion: version });
}

/** One PUBLISH; `messageId` is required for QoS 1 and 2. */
export function encodePublish(topic: string, payload: Buffer, qos: QoS, messageId?: number, version: MqttVersion = 4): Buffer {
  const opts = { protocolVersion: version };
  if (qos === 0) return mqtt.generate({ cmd: 'publish', topic, payload, qos: 0, dup: false, retain: false }, opts);
  if (messageId === undefined) throw new Error(`a QoS ${qos} PUBLISH needs a packet id`);
  return mqtt.generate({ cmd: 'publish', topic, payload, qos, dup: false, retain: false, messageId }, opts);
}

/** `count` copies of one QoS 0 PUBLISH in a single buffer: one write sends them all. */
export function encodePublishBatch(topic: string, payload: Buffer, count: number, version: MqttVersion = 4): Buffer {
  const one = encodePublish(topic, payload, 0, undefined, version);
  const batch = Buffer.allocUnsafe(one.length * count);
  for (let i = 0; i < count; i++) one.copy(batch, i * one.length);
  return batch;
}

/**
 * QoS 1 (or 2) PUBLISH packets for packet ids 1..count, index = id - 1. Acknowledgements come
 * back in order [MQTT-4.6.0-2], so cycling through more ids than the inflight window never
 * reuses an id still in flight.
 */
export function encodePublishCycle(topic: string, payload: Buffer, count: number, version: MqttVersion = 4, qos: 1 | 2 = 1): Buffer[] {
  if (count < 1 || count > 0xffff) throw new Error(`packet id cycle must be 1..65535, got ${count}`);
  const out: Buffer[] = [];
  for (let id = 1; id <= count; id++) out.push(encodePublish(topic, payload, qos, id, version));
  return out;
}

/** DISCONNECT: the same two bytes in every version (MQTT 5: reason code 0 omitted). */
export const DISCONNECT = mqtt.generate({ cmd: 'disconnect' }, { protocolVersion: 4 });

export const PINGREQ = Buffer.from([0xc0, 0x00]);

/** First bytes of the acknowledgements the generator writes (MQTT 5 allows omitting reason code 0). */
export const AckByte = { PUBACK: 0x40, PUBREC: 0x50, PUBREL: 0x62, PUBCOMP: 0x70 } as const;

/** Writes acknowledgements into one fresh buffer (4 bytes each); `pairs` alternates first byte, packet id. */
export function encodeAcks(pairs: readonly number[]): Buffer {
  const out = Buffer.allocUnsafe(pairs.length * 2);
  for (let i = 0; i < pairs.length; i += 2) {
    const o = i * 2;
    out[o] = pairs[i]!;
    out[o + 1] = 0x02;
    out.writeUInt16BE(pairs[i + 1]!, o + 2);
  }
  return out;
}

/** Writes PUBACKs for the given packet ids into one fresh buffer (4 bytes each). */
export function encodePubacks(ids: readonly number[]): Buffer {
  const pairs: number[] = [];
  for (const id of ids) pairs.push(AckByte.PUBACK, id);
  return encodeAcks(pairs);
}

/** A payload of `size` bytes. */
export function makePayload(size: number): Buffer {
  return Buffer.alloc(size, 0x61);
}

/** Bytes of the timestamp a latency publisher writes at the start of the payload. */
export const TIMESTAMP_BYTES = 8;

/** Monotonic nanoseconds, the same clock in every thread of the process. */
export function nowNs(): number {
  return Number(process.hrtime.bigint());
}
