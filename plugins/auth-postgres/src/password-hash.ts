import { pbkdf2, randomBytes, scrypt, timingSafeEqual } from 'node:crypto';
import { promisify } from 'node:util';

const pbkdf2Async = promisify(pbkdf2);
const scryptAsync = promisify(scrypt) as (password: Buffer, salt: Buffer, keylen: number, options: ScryptParams) => Promise<Buffer>;

interface ScryptParams {
  readonly N: number;
  readonly r: number;
  readonly p: number;
  readonly maxmem: number;
}

/**
 * The password hash formats the plugin verifies. All are slow, salted key derivations run with
 * node:crypto's asynchronous functions (off the event loop) and compared in constant time:
 * - `mosquitto`: `$7$<iterations>$<salt>$<hash>`, PBKDF2-HMAC-SHA512 as `mosquitto_passwd` writes it
 *   (salt and hash in base64);
 * - `pbkdf2-sha256`, `pbkdf2-sha512`: `$pbkdf2-sha512$<iterations>$<salt>$<hash>` (passlib's
 *   format: adapted base64, `.` for `+`, no padding);
 * - `scrypt`: `$scrypt$ln=<log2 N>,r=<r>,p=<p>$<salt>$<hash>` (passlib's format, base64 without padding).
 */
export const HASH_FORMATS = ['mosquitto', 'pbkdf2-sha256', 'pbkdf2-sha512', 'scrypt'] as const;
export type HashFormat = (typeof HASH_FORMATS)[number];

/** A parsed password hash. */
export type PasswordHash =
  | {
      readonly format: 'mosquitto' | 'pbkdf2-sha256' | 'pbkdf2-sha512';
      readonly digest: 'sha256' | 'sha512';
      readonly iterations: number;
      readonly salt: Buffer;
      readonly hash: Buffer;
    }
  | {
      readonly format: 'scrypt';
      readonly log2N: number;
      readonly r: number;
      readonly p: number;
      readonly salt: Buffer;
      readonly hash: Buffer;
    };

/** Bounds on the cost a stored hash may ask for (a row must not be able to stall the broker). */
export const MAX_PBKDF2_ITERATIONS = 10_000_000;
export const MAX_SCRYPT_MEMORY = 256 * 1024 * 1024;
const MIN_SALT_BYTES = 8;
const MIN_HASH_BYTES = 16;
const MAX_BYTES = 1024;

const BASE64 = /^[A-Za-z0-9+/]*={0,2}$/;
const AB64 = /^[A-Za-z0-9./]*$/;

function decodeBase64(text: string, alphabet: 'base64' | 'ab64', what: string): Buffer {
  if (text === '' || !(alphabet === 'base64' ? BASE64 : AB64).test(text))
    throw new Error(`${what} is not ${alphabet === 'base64' ? 'base64' : 'adapted base64'}`);
  const bytes = Buffer.from(alphabet === 'ab64' ? text.replace(/\./g, '+') : text, 'base64');
  if (bytes.length > MAX_BYTES) throw new Error(`${what} is longer than ${MAX_BYTES} bytes`);
  return bytes;
}

function positiveInteger(text: string, max: number, what: string): number {
  if (!/^[1-9][0-9]{0,9}$/.test(text)) throw new Error(`${what} must be a positive integer, got ${JSON.stringify(text)}`);
  const value = Number(text);
  if (value > max) throw new Error(`${what} ${value} is above the maximum ${max}`);
  return value;
}

function checkLengths(salt: Buffer, hash: Buffer): void {
  if (salt.length < MIN_SALT_BYTES) throw new Error(`the salt has ${salt.length} bytes, at least ${MIN_SALT_BYTES} are needed`);
  if (hash.length < MIN_HASH_BYTES) throw new Error(`the hash has ${hash.length} bytes, at least ${MIN_HASH_BYTES} are needed`);
}

/**
 * Parses a stored hash; throws an Error saying why it cannot be used (unknown or fast format,
 * bad encoding, parameters out of bounds, a format not in `allowed`). Never includes the hash
 * itself in the message.
 */
export function parsePasswordHash(stored: string, allowed: readonly HashFormat[] = HASH_FORMATS): PasswordHash {
  const parts = stored.split('$');
  const id = parts[0] === '' && parts.length > 1 ? parts[1] : undefined;
  let parsed: PasswordHash;
  switch (id) {
    case '7': {
      if (parts.length !== 5) throw new Error('a $7$ (mosquitto PBKDF2-SHA512) hash has the form $7$<iterations>$<salt>$<hash>');
      const iterations = positiveInteger(parts[2]!, MAX_PBKDF2_ITERATIONS, 'the iteration count');
      parsed = {
        format: 'mosquitto',
        digest: 'sha512',
        iterations,
        salt: decodeBase64(parts[3]!, 'base64', 'the salt'),
        hash: decodeBase64(parts[4]!, 'base64', 'the hash'),
      };
      break;
    }
    case 'pbkdf2-sha256':
    case 'pbkdf2-sha512': {
      if (parts.length !== 5) throw new Error(`a $${id}$ hash has the form $${id}$<iterations>$<salt>$<hash>`);
      const iterations = positiveInteger(parts[2]!, MAX_PBKDF2_ITERATIONS, 'the iteration count');
      parsed = {
        format: id,
        digest: id === 'pbkdf2-sha256' ? 'sha256' : 'sha512',
        iterations,
        salt: decodeBase64(parts[3]!, 'ab64', 'the salt'),
        hash: decodeBase64(parts[4]!, 'ab64', 'the hash'),
      };
      break;
    }
    case 'scrypt': {
      if (parts.length !== 5) throw new Error('a $scrypt$ hash has the form $scrypt$ln=<log2 N>,r=<r>,p=<p>$<salt>$<hash>');
      const params = new Map<string, string>();
      for (const kv of parts[2]!.split(',')) {
        const eq = kv.indexOf('=');
        if (eq <= 0) throw new Error(`the scrypt parameters must be ln=<n>,r=<n>,p=<n>, got ${JSON.stringify(parts[2])}`);
        params.set(kv.slice(0, eq), kv.slice(eq + 1));
      }
      const keys = [...params.keys()].sort().join(',');
      if (keys !== 'ln,p,r') throw new Error(`the scrypt parameters must be ln, r and p, got ${JSON.stringify(parts[2])}`);
      const log2N = positiveInteger(params.get('ln')!, 30, 'scrypt ln');
      const r = positiveInteger(params.get('r')!, 64, 'scrypt r');
      const p = positiveInteger(params.get('p')!, 16, 'scrypt p');
      if (scryptMemory(log2N, r, p) > MAX_SCRYPT_MEMORY) {
        throw new Error(`the scrypt parameters ln=${log2N},r=${r},p=${p} need more than ${MAX_SCRYPT_MEMORY / 1024 / 1024} MiB`);
      }
      parsed = {
        format: 'scrypt',
        log2N,
        r,
        p,
        salt: decodeBase64(parts[3]!, 'base64', 'the salt'),
        hash: decodeBase64(parts[4]!, 'base64', 'the hash'),
      };
      break;
    }
    case '6':
    case '5':
    case '1':
      throw new Error(
        `$${id}$ hashes are one round of a fast digest and are not accepted: store a $7$ (mosquitto_passwd), $pbkdf2-sha512$ or $scrypt$ hash`,
      );
    default:
      throw new Error(
        'the hash is in no known format (plain text is not accepted): store a $7$ (mosquitto_passwd), $pbkdf2-sha256$, $pbkdf2-sha512$ or $scrypt$ hash',
      );
  }
  checkLengths(parsed.salt, parsed.hash);
  if (!allowed.includes(parsed.format))
    throw new Error(`the hash format ${parsed.format} is not allowed by options.passwordHash (${allowed.join(', ')})`);
  return parsed;
}

/** Bytes scrypt needs for these parameters (what OpenSSL checks against `maxmem`). */
function scryptMemory(log2N: number, r: number, p: number): number {
  return 128 * r * (2 ** log2N + 2) + 128 * r * p;
}

/** Whether `password` matches `hash`: the key derivation runs asynchronously, the comparison in constant time. */
export async function verifyPassword(password: Uint8Array, hash: PasswordHash): Promise<boolean> {
  const given = Buffer.from(password.buffer, password.byteOffset, password.byteLength);
  let derived: Buffer;
  if (hash.format === 'scrypt') {
    derived = await scryptAsync(given, hash.salt, hash.hash.length, {
      N: 2 ** hash.log2N,
      r: hash.r,
      p: hash.p,
      maxmem: scryptMemory(hash.log2N, hash.r, hash.p) + 1024 * 1024,
    });
  } else {
    derived = await pbkdf2Async(given, hash.salt, hash.iterations, hash.hash.length, hash.digest);
  }
  return derived.length === hash.hash.length && timingSafeEqual(derived, hash.hash);
}

/**
 * A hash no password matches (random salt and key) with the parameters of `like` (by default those
 * {@link hashPassword} writes): checking an unknown user's password against it costs what checking
 * a real user's does, so the time of the answer does not tell whether the user exists.
 */
export function dummyHash(like?: PasswordHash): PasswordHash {
  if (like === undefined) return { format: 'scrypt', log2N: 15, r: 8, p: 1, salt: randomBytes(16), hash: randomBytes(32) };
  return { ...like, salt: randomBytes(like.salt.length), hash: randomBytes(like.hash.length) };
}

/** Options of {@link hashPassword}. */
export interface HashPasswordOptions {
  /** Default `scrypt`. */
  readonly format?: HashFormat;
  /** PBKDF2 iterations (default 210000 for SHA-512, 600000 for SHA-256: OWASP's 2023 advice). */
  readonly iterations?: number;
  /** scrypt cost: log2 of N (default 15), r (default 8), p (default 1). */
  readonly log2N?: number;
  readonly r?: number;
  readonly p?: number;
}

const ab64 = (bytes: Buffer): string => bytes.toString('base64').replace(/=+$/, '').replace(/\+/g, '.');
const b64NoPad = (bytes: Buffer): string => bytes.toString('base64').replace(/=+$/, '');

/**
 * Hashes a password in one of the formats the plugin verifies, to fill the `password_hash`
 * column: `node -e "require('@bifro/plugin-auth-postgres').hashPassword(process.argv[1]).then(console.log)" 's3cret'`.
 */
export async function hashPassword(password: string | Uint8Array, options: HashPasswordOptions = {}): Promise<string> {
  const bytes = typeof password === 'string' ? Buffer.from(password, 'utf8') : Buffer.from(password);
  const format = options.format ?? 'scrypt';
  if (format === 'scrypt') {
    const log2N = options.log2N ?? 15;
    const r = options.r ?? 8;
    const p = options.p ?? 1;
    const salt = randomBytes(16);
    const hash = await scryptAsync(bytes, salt, 32, { N: 2 ** log2N, r, p, maxmem: scryptMemory(log2N, r, p) + 1024 * 1024 });
    return `$scrypt$ln=${log2N},r=${r},p=${p}$${b64NoPad(salt)}$${b64NoPad(hash)}`;
  }
  const digest = format === 'pbkdf2-sha256' ? 'sha256' : 'sha512';
  const iterations = options.iterations ?? (digest === 'sha256' ? 600_000 : 210_000);
  if (format === 'mosquitto') {
    const salt = randomBytes(12);
    const hash = await pbkdf2Async(bytes, salt, iterations, 64, 'sha512');
    return `$7$${iterations}$${salt.toString('base64')}$${hash.toString('base64')}`;
  }
  const salt = randomBytes(16);
  const hash = await pbkdf2Async(bytes, salt, iterations, digest === 'sha256' ? 32 : 64, digest);
  return `$${format}$${iterations}$${ab64(salt)}$${ab64(hash)}`;
}
