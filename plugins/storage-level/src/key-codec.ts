/**
 * Keys of the level database. Every key is bytes: an ASCII prefix naming the key space (`s!`,
 * `q!`, ...) followed by its components. String components are encoded in CESU-8 (each UTF-16
 * code unit as a 1–3 byte UTF-8 sequence), so that byte order is exactly the order of JavaScript's
 * `<` on strings (UTF-16 code units), which is the order the SPI pages in. Plain UTF-8 differs for
 * characters outside the BMP, which would sort after U+E000–U+FFFF. Components are separated by
 * U+0000, which tenant ids, client ids and topics cannot contain; being the smallest byte, it
 * makes a joined key sort like the tuple of its components.
 */

const SURROGATE = /[\uD800-\uDFFF]/;
const EMPTY = Buffer.alloc(0);

/** The key space prefixes. One byte string per kind of record; see docs/storage.md. */
export const KEY_SPACE = {
  /** `s!<tenant>\0<client>`: session record. */
  session: Buffer.from('s!', 'latin1'),
  /** `q!<tenant>\0<client>\0<seq u64>`: inbox entry. */
  inbox: Buffer.from('q!', 'latin1'),
  /** `qm!<tenant>\0<client>`: inbox meta (first and next seq). */
  inboxMeta: Buffer.from('qm!', 'latin1'),
  /** `f!<tenant>\0<client>\0<order u64><packetId u16>`: outbound inflight record. */
  inflight: Buffer.from('f!', 'latin1'),
  /** `i!<tenant>\0<client>\0<packetId u16>`: inbound QoS 2 packet id. */
  incoming: Buffer.from('i!', 'latin1'),
  /** `r!<tenant>\0<topic>`: retained message. */
  retained: Buffer.from('r!', 'latin1'),
  /** `ri!<tenant>\0<levels u16><topic>`: retained index entry. */
  retainedIndex: Buffer.from('ri!', 'latin1'),
  /** `rm!<tenant>`: retained totals of a tenant. */
  retainedMeta: Buffer.from('rm!', 'latin1'),
  /** `b!<kind>\0<scope><tenant>\0<value>`: a ban (scope byte 0x01: for every tenant, 0x02: the tenant that follows). */
  ban: Buffer.from('b!', 'latin1'),
} as const;

/** The key of the data format marker. */
export const FORMAT_KEY = Buffer.from('meta!format', 'latin1');

/** The component separator byte. */
export const SEPARATOR = 0;

/** CESU-8 bytes of a string (equal to its UTF-8 bytes unless it holds surrogates). */
export function encodeKeyString(text: string): Buffer {
  if (!SURROGATE.test(text)) return Buffer.from(text, 'utf8');
  const out = Buffer.allocUnsafe(text.length * 3);
  let n = 0;
  for (let i = 0; i < text.length; i++) {
    const c = text.charCodeAt(i);
    if (c < 0x80) out[n++] = c;
    else if (c < 0x800) {
      out[n++] = 0xc0 | (c >> 6);
      out[n++] = 0x80 | (c & 0x3f);
    } else {
      out[n++] = 0xe0 | (c >> 12);
      out[n++] = 0x80 | ((c >> 6) & 0x3f);
      out[n++] = 0x80 | (c & 0x3f);
    }
  }
  return out.subarray(0, n);
}

/** The string of CESU-8 bytes `buf[start, end)` (the inverse of {@link encodeKeyString}). */
export function decodeKeyString(buf: Buffer, start = 0, end = buf.length): string {
  // A surrogate encodes as ED A0..BF xx; anything else is plain UTF-8.
  let hasSurrogate = false;
  for (let i = buf.indexOf(0xed, start); i >= 0 && i < end - 1; i = buf.indexOf(0xed, i + 1)) {
    if (buf[i + 1] >= 0xa0) {
      hasSurrogate = true;
      break;
    }
  }
  if (!hasSurrogate) return buf.toString('utf8', start, end);
  const units: number[] = [];
  for (let i = start; i < end;) {
    const b = buf[i];
    if (b < 0x80) {
      units.push(b);
      i += 1;
    } else if (b < 0xe0) {
      units.push(((b & 0x1f) << 6) | (buf[i + 1] & 0x3f));
      i += 2;
    } else {
      units.push(((b & 0x0f) << 12) | ((buf[i + 1] & 0x3f) << 6) | (buf[i + 2] & 0x3f));
      i += 3;
    }
  }
  let text = '';
  for (let i = 0; i < units.length; i += 4096) text += String.fromCharCode(...units.slice(i, i + 4096));
  return text;
}

/** `prefix` + the encoded parts joined by the separator byte. */
export function joinKey(prefix: Buffer, ...parts: string[]): Buffer {
  const encoded = parts.map(encodeKeyString);
  let size = prefix.length + Math.max(0, encoded.length - 1);
  for (const e of encoded) size += e.length;
  const out = Buffer.allocUnsafe(size);
  let n = prefix.copy(out, 0);
  encoded.forEach((e, i) => {
    if (i > 0) out[n++] = SEPARATOR;
    n += e.copy(out, n);
  });
  return out;
}

/** `a` followed by `b` (and `c`). */
export function concatKey(a: Buffer, b: Buffer, c: Buffer = EMPTY): Buffer {
  return Buffer.concat([a, b, c], a.length + b.length + c.length);
}

/** `a` followed by the separator byte. */
export function withSeparator(a: Buffer): Buffer {
  const out = Buffer.allocUnsafe(a.length + 1);
  a.copy(out, 0);
  out[a.length] = SEPARATOR;
  return out;
}

/**
 * The smallest key greater than every key starting with `prefix` (for an exclusive upper
 * bound), or undefined when there is none (a prefix of 0xFF bytes only).
 */
export function prefixEnd(prefix: Buffer): Buffer | undefined {
  for (let i = prefix.length - 1; i >= 0; i--) {
    if (prefix[i] !== 0xff) {
      const out = Buffer.from(prefix.subarray(0, i + 1));
      out[i]++;
      return out;
    }
  }
  return undefined;
}

/** Writes `value` (a non-negative safe integer) as 8 bytes big-endian. */
export function writeU64(buf: Buffer, value: number, offset: number): void {
  buf.writeUInt32BE(Math.floor(value / 0x1_0000_0000), offset);
  buf.writeUInt32BE(value >>> 0, offset + 4);
}

/** Reads 8 bytes big-endian written by {@link writeU64}. */
export function readU64(buf: Buffer, offset: number): number {
  return buf.readUInt32BE(offset) * 0x1_0000_0000 + buf.readUInt32BE(offset + 4);
}

/** `prefix` followed by `value` as 8 bytes big-endian: sorts in numeric order. */
export function u64Key(prefix: Buffer, value: number): Buffer {
  const out = Buffer.allocUnsafe(prefix.length + 8);
  prefix.copy(out, 0);
  writeU64(out, value, prefix.length);
  return out;
}

/** `prefix` followed by `value` as 2 bytes big-endian. */
export function u16Key(prefix: Buffer, value: number): Buffer {
  const out = Buffer.allocUnsafe(prefix.length + 2);
  prefix.copy(out, 0);
  out.writeUInt16BE(value, prefix.length);
  return out;
}
