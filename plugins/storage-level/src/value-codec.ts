import { ValueReader, ValueWriter } from '@bifro/spi';

/*
 * Values of this plugin's own bookkeeping (inbox and retained meta). The stored records themselves
 * (messages, inbox entries, inflight records, sessions, bans) use the SPI's record codec
 * (`@bifro/spi`, spi/src/record-codec.ts), which @bifro/plugin-storage-nats shares.
 */

/** Inbox meta: the seq of the oldest entry and the seq the next append gets (count = next − first). */
export interface InboxMeta {
  first: number;
  next: number;
}

export function encodeInboxMeta(meta: InboxMeta): Buffer {
  const out = Buffer.allocUnsafe(16);
  out.writeDoubleBE(meta.first, 0);
  out.writeDoubleBE(meta.next, 8);
  return out;
}

export function decodeInboxMeta(value: Buffer): InboxMeta {
  return { first: value.readDoubleBE(0), next: value.readDoubleBE(8) };
}

/** Retained totals of a tenant plus how many topics have each level count (to probe only used counts for `#`). */
export interface RetainedMeta {
  topics: number;
  bytes: number;
  readonly levels: Map<number, number>;
}

export function encodeRetainedMeta(meta: RetainedMeta): Buffer {
  const w = new ValueWriter(24 + meta.levels.size * 4);
  w.f64(meta.topics);
  w.f64(meta.bytes);
  w.varint(meta.levels.size);
  for (const [levels, count] of meta.levels) {
    w.varint(levels);
    w.varint(count);
  }
  return w.finish();
}

export function decodeRetainedMeta(value: Buffer): RetainedMeta {
  const r = new ValueReader(value);
  const topics = r.f64();
  const bytes = r.f64();
  const n = r.varint();
  const levels = new Map<number, number>();
  for (let i = 0; i < n; i++) {
    const l = r.varint();
    levels.set(l, r.varint());
  }
  return { topics, bytes, levels };
}

/** A retained index entry's value: the message's retained bytes and, when it expires, when. */
export interface RetainedIndexValue {
  readonly bytes: number;
  readonly expiresAt?: number;
}

export function encodeRetainedIndexValue(v: RetainedIndexValue): Buffer {
  const out = Buffer.allocUnsafe(v.expiresAt === undefined ? 8 : 16);
  out.writeDoubleBE(v.bytes, 0);
  if (v.expiresAt !== undefined) out.writeDoubleBE(v.expiresAt, 8);
  return out;
}

export function decodeRetainedIndexValue(value: Buffer): RetainedIndexValue {
  return value.length >= 16 ? { bytes: value.readDoubleBE(0), expiresAt: value.readDoubleBE(8) } : { bytes: value.readDoubleBE(0) };
}
