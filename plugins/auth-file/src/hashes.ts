import { pbkdf2, randomBytes, scrypt, timingSafeEqual, type ScryptOptions } from 'node:crypto';

/**
 * Password hashes of the password file. New entries are scrypt; mosquitto's `$7$` (PBKDF2-SHA512)
 * lines are verified so that mosquitto password files work as they are. Plain text and fast hashes
 * (mosquitto's old `$6$`, one round of salted SHA-512) are refused when the file is read.
 *
 * Every KDF runs through the callback APIs of node:crypto, on libuv's thread pool: the event loop
 * stays free while a password is checked. Comparisons are constant-time (`timingSafeEqual` on
 * equal-length keys).
 */

/** `$scrypt$ln=15,r=8,p=1$<salt>$<key>` (base64): cost 2^ln, block size r, parallelism p. */
export interface ScryptHash {
  readonly scheme: 'scrypt';
  readonly ln: number;
  readonly r: number;
  readonly p: number;
  readonly salt: Buffer;
  readonly key: Buffer;
}

/** mosquitto's `$7$<iterations>$<salt>$<hash>`: PBKDF2-HMAC-SHA512 over the password, base64 salt and hash. */
export interface Pbkdf2Hash {
  readonly scheme: 'pbkdf2-sha512';
  readonly iterations: number;
  readonly salt: Buffer;
  readonly key: Buffer;
}

export type PasswordHash = ScryptHash | Pbkdf2Hash;

/**
 * scrypt parameters of new entries: N = 2^15, r = 8, p = 1 (32 MiB, about 0.1–0.2 s on one core).
 * These are the parameters the Go and Python standard documentation recommends for interactive
 * logins (RFC 7914 authors' interactive profile raised one step); OWASP's stronger 2^17 costs four
 * times as much per CONNECT, which the verification cache would only partly hide during a
 * reconnect storm. The parameters are stored in each entry, so stronger ones verify as well.
 */
export const SCRYPT_DEFAULTS = { ln: 15, r: 8, p: 1 } as const;
/** Bytes of salt and derived key of new scrypt entries. */
export const SCRYPT_SALT_BYTES = 16;
export const SCRYPT_KEY_BYTES = 32;
/** The weakest scrypt cost accepted from a file: 2^14 (below is a fast hash). */
export const SCRYPT_MIN_LN = 14;
export const SCRYPT_MAX_LN = 22;
/** mosquitto's `$7$` iterations accepted from a file (mosquitto 2.0 writes 101 by default). */
export const PBKDF2_MAX_ITERATIONS = 10_000_000;
/** Fewer `$7$` iterations than this are verified but warned about when the file loads. */
export const PBKDF2_WEAK_ITERATIONS = 10_000;

const B64 = /^[A-Za-z0-9+/]+={0,2}$/;

/** Decodes strict base64 (standard alphabet, padding optional); undefined when it is not. */
export function decodeBase64(text: string): Buffer | undefined {
  if (!B64.test(text)) return undefined;
  const bytes = Buffer.from(text, 'base64');
  return bytes.length === 0 ? undefined : bytes;
}

/** Why a hash field is refused, or the parsed hash. */
export type HashParse = { readonly ok: true; readonly hash: PasswordHash } | { readonly ok: false; readonly problem: string };

/** Parses the hash field of a line (it starts with `$`). */
export function parseHash(field: string): HashParse {
  const parts = field.split('$');
  // parts[0] is '' (the field starts with '$').
  const scheme = parts[1] ?? '';
  if (scheme === 'scrypt') return parseScrypt(parts);
  if (scheme === '7') return parsePbkdf2(parts);
  if (scheme === '6')
    return {
      ok: false,
      problem:
        'a $6$ hash (one round of salted SHA-512, mosquitto 1.6 and older) is a fast hash and is refused: set the password again with `bifro passwd` (scrypt) or mosquitto_passwd 2.x ($7$)',
    };
  if (scheme === '1' || scheme === '5' || scheme.startsWith('2') || scheme.startsWith('argon2') || scheme === 'pbkdf2-sha256')
    return { ok: false, problem: `the $${scheme}$ hash scheme is not supported: only $scrypt$ and mosquitto's $7$ (PBKDF2-SHA512) are` };
  return { ok: false, problem: `unknown hash scheme "$${scheme}$": only $scrypt$ and mosquitto's $7$ (PBKDF2-SHA512) are supported` };
}

function parseScrypt(parts: string[]): HashParse {
  if (parts.length !== 5) return { ok: false, problem: 'a $scrypt$ hash must be $scrypt$ln=<n>,r=<n>,p=<n>$<base64 salt>$<base64 key>' };
  const params = new Map<string, number>();
  for (const item of parts[2]!.split(',')) {
    const m = /^(ln|r|p)=(\d{1,3})$/.exec(item);
    if (m === null || params.has(m[1]!))
      return { ok: false, problem: `bad $scrypt$ parameters "${parts[2]}": expected ln=<n>,r=<n>,p=<n>` };
    params.set(m[1]!, Number(m[2]));
  }
  const ln = params.get('ln');
  const r = params.get('r');
  const p = params.get('p');
  if (ln === undefined || r === undefined || p === undefined)
    return { ok: false, problem: `bad $scrypt$ parameters "${parts[2]}": expected ln=<n>,r=<n>,p=<n>` };
  if (ln < SCRYPT_MIN_LN) return { ok: false, problem: `scrypt cost ln=${ln} is below the minimum ${SCRYPT_MIN_LN} (a fast hash)` };
  if (ln > SCRYPT_MAX_LN) return { ok: false, problem: `scrypt cost ln=${ln} is above the maximum ${SCRYPT_MAX_LN}` };
  if (r < 1 || r > 32 || p < 1 || p > 16) return { ok: false, problem: `scrypt r=${r}, p=${p} out of range (r 1..32, p 1..16)` };
  if (128 * 2 ** ln * r > 1024 * 1024 * 1024) return { ok: false, problem: `scrypt ln=${ln}, r=${r} needs more than 1 GiB of memory` };
  const salt = decodeBase64(parts[3]!);
  const key = decodeBase64(parts[4]!);
  if (salt === undefined || salt.length < 8) return { ok: false, problem: 'the $scrypt$ salt must be base64 of at least 8 bytes' };
  if (key === undefined || key.length < 16) return { ok: false, problem: 'the $scrypt$ key must be base64 of at least 16 bytes' };
  return { ok: true, hash: { scheme: 'scrypt', ln, r, p, salt, key } };
}

function parsePbkdf2(parts: string[]): HashParse {
  if (parts.length !== 5) return { ok: false, problem: 'a $7$ hash must be $7$<iterations>$<base64 salt>$<base64 hash>' };
  const iterText = parts[2]!;
  const iterations = /^\d{1,8}$/.test(iterText) ? Number(iterText) : NaN;
  if (!Number.isInteger(iterations) || iterations < 1 || iterations > PBKDF2_MAX_ITERATIONS)
    return { ok: false, problem: `bad $7$ iteration count "${iterText}" (1..${PBKDF2_MAX_ITERATIONS})` };
  const salt = decodeBase64(parts[3]!);
  const key = decodeBase64(parts[4]!);
  if (salt === undefined) return { ok: false, problem: 'the $7$ salt is not base64' };
  if (key === undefined || key.length !== 64) return { ok: false, problem: 'the $7$ hash must be base64 of 64 bytes (SHA-512)' };
  return { ok: true, hash: { scheme: 'pbkdf2-sha512', iterations, salt, key } };
}

/** The text of a hash as it is written in the file. */
export function formatHash(hash: PasswordHash): string {
  if (hash.scheme === 'scrypt')
    return `$scrypt$ln=${hash.ln},r=${hash.r},p=${hash.p}$${hash.salt.toString('base64')}$${hash.key.toString('base64')}`;
  return `$7$${hash.iterations}$${hash.salt.toString('base64')}$${hash.key.toString('base64')}`;
}

function scryptOptions(hash: { ln: number; r: number; p: number }): ScryptOptions {
  const N = 2 ** hash.ln;
  // node refuses when 128 * N * r exceeds maxmem (32 MiB by default, exactly what N = 2^15, r = 8 needs).
  return { N, r: hash.r, p: hash.p, maxmem: 128 * N * hash.r * 2 + 1024 * 1024 };
}

function scryptAsync(password: Uint8Array, salt: Buffer, length: number, options: ScryptOptions): Promise<Buffer> {
  return new Promise((resolve, reject) => scrypt(password, salt, length, options, (err, key) => (err ? reject(err) : resolve(key))));
}

/** PBKDF2 on the thread pool. */
export function pbkdf2Async(password: Uint8Array, salt: Uint8Array, iterations: number, length: number, digest: string): Promise<Buffer> {
  return new Promise((resolve, reject) =>
    pbkdf2(password, salt, iterations, length, digest, (err, key) => (err ? reject(err) : resolve(key))),
  );
}

/** A new scrypt entry for `password` (random salt, {@link SCRYPT_DEFAULTS} unless given). */
export async function hashPassword(
  password: Uint8Array,
  params: { ln: number; r: number; p: number } = SCRYPT_DEFAULTS,
): Promise<ScryptHash> {
  const salt = randomBytes(SCRYPT_SALT_BYTES);
  const key = await scryptAsync(password, salt, SCRYPT_KEY_BYTES, scryptOptions(params));
  return { scheme: 'scrypt', ln: params.ln, r: params.r, p: params.p, salt, key };
}

/** Whether `password` matches `hash`; the key comparison is constant-time. */
export async function verifyPassword(hash: PasswordHash, password: Uint8Array): Promise<boolean> {
  const derived =
    hash.scheme === 'scrypt'
      ? await scryptAsync(password, hash.salt, hash.key.length, scryptOptions(hash))
      : await pbkdf2Async(password, hash.salt, hash.iterations, hash.key.length, 'sha512');
  return derived.length === hash.key.length && timingSafeEqual(derived, hash.key);
}
