import { createHash } from 'node:crypto';

/**
 * Names inside NATS: every identifier (tenant, client id, topic level, ban value) becomes one
 * subject token. Letters, digits and `-` stay as they are (keys stay readable in `nats kv ls`);
 * every other character is written as `_` and the two hex digits of each of its UTF-8 bytes; the
 * empty string is `_` alone. A token is never empty and never holds `.`, `*`, `>`, spaces or
 * anything a KV key refuses, and decoding gives back the exact string (any UTF-8, empty levels).
 */

const PLAIN = /^[A-Za-z0-9-]+$/;

/**
 * Longest token written as is. A longer one (a 5000-character ban value, a huge topic level)
 * becomes `=` and the SHA-256 of the string: NATS refuses subjects over its control line (4 KiB),
 * and a per-level hash still matches wildcards exactly. Its string is then read from the value.
 */
export const MAX_TOKEN = 120;

export function encodeToken(s: string): string {
  if (s.length === 0) return '_';
  if (PLAIN.test(s)) return s.length <= MAX_TOKEN ? s : hashed(s);
  let out = '';
  for (const ch of s) {
    if (/[A-Za-z0-9-]/.test(ch)) out += ch;
    else for (const b of Buffer.from(ch, 'utf8')) out += '_' + (b < 16 ? '0' : '') + b.toString(16).toUpperCase();
    if (out.length > MAX_TOKEN) return hashed(s);
  }
  return out;
}

function hashed(s: string): string {
  return '=' + createHash('sha256').update(s, 'utf8').digest('hex');
}

/** True for a token that holds a hash, not the string: decode it from the stored value instead. */
export function isHashed(t: string): boolean {
  return t.startsWith('=');
}

/** The string of a token (not of a hashed one, see {@link isHashed}). */
export function decodeToken(t: string): string {
  if (t === '_') return '';
  if (!t.includes('_')) return t;
  const bytes: number[] = [];
  for (let i = 0; i < t.length; i++) {
    if (t[i] === '_') {
      bytes.push(parseInt(t.slice(i + 1, i + 3), 16));
      i += 2;
    } else bytes.push(t.charCodeAt(i));
  }
  return Buffer.from(bytes).toString('utf8');
}

/** A topic as tokens, one per level (`a//b` has three). */
export function encodeTopic(topic: string): string {
  return topic.split('/').map(encodeToken).join('.');
}

export function decodeTopic(tokens: readonly string[]): string {
  return tokens.map(decodeToken).join('/');
}

/** FNV-1a (32 bit) of UTF-8 text: stable across processes and versions, so every node finds the same partition. */
export function fnv1a(text: string): number {
  let h = 0x811c9dc5;
  for (const b of Buffer.from(text, 'utf8')) {
    h ^= b;
    h = Math.imul(h, 0x01000193) >>> 0;
  }
  return h;
}

/** The partition of a session's data: hash(tenantId, clientId) mod partitions (NUL cannot occur in either). */
export function sessionPartition(tenantId: string, clientId: string, partitions: number): number {
  return fnv1a(`${tenantId}\u0000${clientId}`) % partitions;
}

/** The partition of a tenant's retained messages: hash(tenantId) mod partitions, so one lookup reads one bucket. */
export function tenantPartition(tenantId: string, partitions: number): number {
  return fnv1a(tenantId) % partitions;
}
