/**
 * Packets the generator sends, encoded once with mqtt-packet (MQTT 3.1.1) before any timing
 * starts. Hot loops only write these buffers.
 */
import mqtt from 'mqtt-packet';

const V4 = { protocolVersion: 4 } as const;

export type QoS = 0 | 1;

/** CONNECT (3.1.1); `clean: false` asks for a persistent session. */
export function encodeConnect(clientId: string, keepalive = 0, clean = true): Buffer {
  return mqtt.generate({ cmd: 'connect', protocolId: 'MQTT', protocolVersion: 4, clientId, clean, keepalive }, V4);
}

export function encodeSubscribe(messageId: number, topic: string, qos: QoS): Buffer {
  return mqtt.generate({ cmd: 'subscribe', messageId, subscriptions: [{ topic, qos }] }, V4);
}

/** One PUBLISH; `messageId` is required for QoS 1. */
export function encodePublish(topic: string, payload: Buffer, qos: QoS, messageId?: number): Buffer {
  if (qos === 0) return mqtt.generate({ cmd: 'publish', topic, payload, qos: 0, dup: false, retain: false }, V4);
  if (messageId === undefined) throw new Error('a QoS 1 PUBLISH needs a packet id');
  return mqtt.generate({ cmd: 'publish', topic, payload, qos: 1, dup: false, retain: false, messageId }, V4);
}

/** `count` copies of one QoS 0 PUBLISH in a single buffer: one write sends them all. */
export function encodePublishBatch(topic: string, payload: Buffer, count: number): Buffer {
  const one = encodePublish(topic, payload, 0);
  const batch = Buffer.allocUnsafe(one.length * count);
  for (let i = 0; i < count; i++) one.copy(batch, i * one.length);
  return batch;
}

/**
 * QoS 1 PUBLISH packets for packet ids 1..count, index = id - 1. Acknowledgements come back in
 * order [MQTT-4.6.0-2], so cycling through more ids than the inflight window never reuses an id
 * still in flight.
 */
export function encodePublishCycle(topic: string, payload: Buffer, count: number): Buffer[] {
  if (count < 1 || count > 0xffff) throw new Error(`packet id cycle must be 1..65535, got ${count}`);
  const out: Buffer[] = [];
  for (let id = 1; id <= count; id++) out.push(encodePublish(topic, payload, 1, id));
  return out;
}

export const DISCONNECT = mqtt.generate({ cmd: 'disconnect' }, V4);

/** Writes PUBACKs for the given packet ids into one fresh buffer (4 bytes each). */
export function encodePubacks(ids: readonly number[]): Buffer {
  const out = Buffer.allocUnsafe(ids.length * 4);
  for (let i = 0; i < ids.length; i++) {
    const o = i * 4;
    out[o] = 0x40;
    out[o + 1] = 0x02;
    out.writeUInt16BE(ids[i]!, o + 2);
  }
  return out;
}

/** A payload of `size` bytes. */
export function makePayload(size: number): Buffer {
  return Buffer.alloc(size, 0x61);
}
