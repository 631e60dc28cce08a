import { createHash, createHmac, randomBytes, timingSafeEqual } from 'node:crypto';
import { decodeBase64, pbkdf2Async } from './hashes';

/**
 * SCRAM-SHA-256 and SCRAM-SHA-512 (RFC 5802, RFC 7677) for MQTT 5 enhanced authentication. The
 * server keeps only the salted keys (StoredKey, ServerKey), never the password. Messages are the
 * RFC's: client-first `n,,n=user,r=nonce`, server-first `r=nonce,s=salt,i=iterations`,
 * client-final `c=biws,r=nonce,p=proof`, server-final `v=signature`. No channel binding (the
 * `-PLUS` variants are not offered) and no SASLprep: user names and passwords are used as their
 * UTF-8 bytes, which is the same for ASCII.
 */

export const SCRAM_METHODS = ['SCRAM-SHA-256', 'SCRAM-SHA-512'] as const;
export type ScramMethod = (typeof SCRAM_METHODS)[number];

/** The key of a method's credentials among a line's fields. */
export const SCRAM_FIELD: Readonly<Record<ScramMethod, string>> = { 'SCRAM-SHA-256': 'scram-sha-256', 'SCRAM-SHA-512': 'scram-sha-512' };

/** Iterations of new credentials: RFC 7677's minimum, also PostgreSQL's and Kafka's default; the client pays them per CONNECT. */
export const SCRAM_DEFAULT_ITERATIONS = 4096;
export const SCRAM_MIN_ITERATIONS = 4096;
export const SCRAM_MAX_ITERATIONS = 10_000_000;
/** Longest SCRAM message accepted from a client. */
export const SCRAM_MAX_MESSAGE = 4096;

const DIGEST: Readonly<Record<ScramMethod, { readonly name: string; readonly length: number }>> = {
  'SCRAM-SHA-256': { name: 'sha256', length: 32 },
  'SCRAM-SHA-512': { name: 'sha512', length: 64 },
};

export function isScramMethod(method: string): method is ScramMethod {
  return method === 'SCRAM-SHA-256' || method === 'SCRAM-SHA-512';
}

/** What the server stores for one user and method. */
export interface ScramCredentials {
  readonly method: ScramMethod;
  readonly iterations: number;
  readonly salt: Buffer;
  readonly storedKey: Buffer;
  readonly serverKey: Buffer;
}

function hmac(method: ScramMethod, key: Uint8Array, text: string | Uint8Array): Buffer {
  return createHmac(DIGEST[method].name, key).update(text).digest();
}

function hash(method: ScramMethod, data: Uint8Array): Buffer {
  return createHash(DIGEST[method].name).update(data).digest();
}

function xor(a: Buffer, b: Buffer): Buffer {
  const out = Buffer.alloc(a.length);
  for (let i = 0; i < a.length; i++) out[i] = a[i]! ^ b[i]!;
  return out;
}

/** SaltedPassword = PBKDF2(password, salt, i) (Hi() of RFC 5802), on the thread pool. */
export function saltedPassword(method: ScramMethod, password: Uint8Array, salt: Uint8Array, iterations: number): Promise<Buffer> {
  return pbkdf2Async(password, salt, iterations, DIGEST[method].length, DIGEST[method].name);
}

/** The server's credentials from a salted password. */
export function credentialsFromSalted(method: ScramMethod, salted: Buffer, salt: Buffer, iterations: number): ScramCredentials {
  const clientKey = hmac(method, salted, 'Client Key');
  return { method, iterations, salt, storedKey: hash(method, clientKey), serverKey: hmac(method, salted, 'Server Key') };
}

/** New credentials for `password` (random 16-byte salt). */
export async function deriveScramCredentials(
  method: ScramMethod,
  password: Uint8Array,
  iterations: number = SCRAM_DEFAULT_ITERATIONS,
  salt: Buffer = randomBytes(16),
): Promise<ScramCredentials> {
  return credentialsFromSalted(method, await saltedPassword(method, password, salt, iterations), salt, iterations);
}

/**
 * Credentials for a user that has none (unknown, or without this method's): the salt is an HMAC of
 * the name under `key`, so the same name always gets the same salt, as a real user does; the keys
 * are random, so no proof matches. Iterations are the default of new credentials.
 */
export function mockScramCredentials(method: ScramMethod, username: string, key: Uint8Array): ScramCredentials {
  const salt = createHmac('sha256', key).update(`${method}\u0000${username}`).digest().subarray(0, 16);
  const length = DIGEST[method].length;
  return { method, iterations: SCRAM_DEFAULT_ITERATIONS, salt, storedKey: randomBytes(length), serverKey: randomBytes(length) };
}

/** `<iterations>$<salt>$<StoredKey>$<ServerKey>` (base64), the value of a `scram-sha-*=` field. */
export function formatScramCredentials(c: ScramCredentials): string {
  return `${c.iterations}$${c.salt.toString('base64')}$${c.storedKey.toString('base64')}$${c.serverKey.toString('base64')}`;
}

/** Parses the value of a `scram-sha-*=` field. */
export function parseScramCredentials(method: ScramMethod, text: string): ScramCredentials | string {
  const parts = text.split('$');
  if (parts.length !== 4) return `${SCRAM_FIELD[method]} must be <iterations>$<base64 salt>$<base64 StoredKey>$<base64 ServerKey>`;
  const iterations = /^\d{1,8}$/.test(parts[0]!) ? Number(parts[0]) : NaN;
  if (!Number.isInteger(iterations) || iterations < SCRAM_MIN_ITERATIONS || iterations > SCRAM_MAX_ITERATIONS)
    return `${SCRAM_FIELD[method]} iterations "${parts[0]}" out of range (${SCRAM_MIN_ITERATIONS}..${SCRAM_MAX_ITERATIONS})`;
  const salt = decodeBase64(parts[1]!);
  const storedKey = decodeBase64(parts[2]!);
  const serverKey = decodeBase64(parts[3]!);
  const length = DIGEST[method].length;
  if (salt === undefined) return `${SCRAM_FIELD[method]} salt is not base64`;
  if (storedKey?.length !== length || serverKey?.length !== length)
    return `${SCRAM_FIELD[method]} StoredKey and ServerKey must be base64 of ${length} bytes`;
  return { method, iterations, salt, storedKey, serverKey };
}

/** RFC 5802 saslname: `,` and `=` are written =2C and =3D. */
export function decodeSaslName(text: string): string | undefined {
  if (/=(?!2C|3D)/.test(text) || text.includes(',')) return undefined;
  return text.replace(/=2C/g, ',').replace(/=3D/g, '=');
}

export function encodeSaslName(name: string): string {
  return name.replace(/=/g, '=3D').replace(/,/g, '=2C');
}

/** A parsed client-first message. */
export interface ClientFirst {
  /** `n,,` (or `y,,`, or with `a=authzid`): the GS2 header the client-final must echo in `c=`. */
  readonly gs2Header: string;
  readonly authzid?: string;
  readonly username: string;
  readonly clientNonce: string;
  /** The message without the GS2 header, part of the AuthMessage. */
  readonly bare: string;
}

const PRINTABLE_NONCE = /^[\x21-\x2b\x2d-\x7e]+$/;

/** Parses a client-first message; a string is the problem. */
export function parseClientFirst(data: Uint8Array | undefined): ClientFirst | string {
  if (data === undefined || data.length === 0) return 'no client-first message in the Authentication Data';
  if (data.length > SCRAM_MAX_MESSAGE) return 'client-first message too long';
  const text = Buffer.from(data).toString('utf8');
  const first = text.indexOf(',');
  const second = first < 0 ? -1 : text.indexOf(',', first + 1);
  if (second < 0) return 'client-first message has no GS2 header (expected n,,n=<user>,r=<nonce>)';
  const flag = text.slice(0, first);
  if (flag.startsWith('p=')) return 'channel binding is not supported (use SCRAM without -PLUS)';
  if (flag !== 'n' && flag !== 'y') return `bad GS2 channel binding flag "${flag}"`;
  const authzField = text.slice(first + 1, second);
  let authzid: string | undefined;
  if (authzField !== '') {
    const decoded = authzField.startsWith('a=') ? decodeSaslName(authzField.slice(2)) : undefined;
    if (decoded === undefined || decoded === '') return 'bad authzid in the GS2 header';
    authzid = decoded;
  }
  const bare = text.slice(second + 1);
  const fields = bare.split(',');
  if (fields[0]?.startsWith('m=')) return 'mandatory SCRAM extensions (m=) are not supported';
  if (!fields[0]?.startsWith('n=')) return 'client-first message lacks n=<user>';
  const username = decodeSaslName(fields[0].slice(2));
  if (username === undefined || username === '') return 'bad user name in the client-first message';
  if (!fields[1]?.startsWith('r=')) return 'client-first message lacks r=<nonce>';
  const clientNonce = fields[1].slice(2);
  if (!PRINTABLE_NONCE.test(clientNonce)) return 'bad client nonce';
  return { gs2Header: text.slice(0, second + 1), ...(authzid === undefined ? {} : { authzid }), username, clientNonce, bare };
}

/** The server's half of one exchange after the client-first message. */
export interface ScramServerExchange {
  readonly credentials: ScramCredentials;
  readonly clientFirst: ClientFirst;
  readonly nonce: string;
  readonly serverFirst: string;
}

/** Builds the server-first message (the combined nonce: the client's plus 18 random bytes, or `serverNonce` in tests). */
export function serverFirst(credentials: ScramCredentials, clientFirst: ClientFirst, serverNonce?: string): ScramServerExchange {
  const nonce = clientFirst.clientNonce + (serverNonce ?? randomBytes(18).toString('base64'));
  const message = `r=${nonce},s=${credentials.salt.toString('base64')},i=${credentials.iterations}`;
  return { credentials, clientFirst, nonce, serverFirst: message };
}

export type ClientFinalCheck =
  { readonly ok: true; readonly serverFinal: string } | { readonly ok: false; readonly badProof: boolean; readonly problem: string };

/** Checks the client-final message: nonce, channel binding echo and proof (constant-time); on success the server-final message. */
export function verifyClientFinal(exchange: ScramServerExchange, data: Uint8Array | undefined): ClientFinalCheck {
  if (data === undefined || data.length === 0)
    return { ok: false, badProof: false, problem: 'no client-final message in the Authentication Data' };
  if (data.length > SCRAM_MAX_MESSAGE) return { ok: false, badProof: false, problem: 'client-final message too long' };
  const text = Buffer.from(data).toString('utf8');
  const proofAt = text.lastIndexOf(',p=');
  if (proofAt < 0) return { ok: false, badProof: false, problem: 'client-final message lacks p=<proof>' };
  const withoutProof = text.slice(0, proofAt);
  const fields = withoutProof.split(',');
  if (!fields[0]?.startsWith('c=')) return { ok: false, badProof: false, problem: 'client-final message lacks c=<channel binding>' };
  const binding = decodeBase64(fields[0].slice(2));
  if (binding === undefined || binding.toString('utf8') !== exchange.clientFirst.gs2Header)
    return { ok: false, badProof: false, problem: 'channel binding c= does not match the GS2 header' };
  if (fields[1] !== `r=${exchange.nonce}`)
    return { ok: false, badProof: false, problem: 'the nonce of the client-final message does not match' };
  const { method, storedKey, serverKey } = exchange.credentials;
  const proof = decodeBase64(text.slice(proofAt + 3));
  if (proof === undefined || proof.length !== storedKey.length) return { ok: false, badProof: true, problem: 'bad client proof' };
  const authMessage = `${exchange.clientFirst.bare},${exchange.serverFirst},${withoutProof}`;
  const clientSignature = hmac(method, storedKey, authMessage);
  const clientKey = xor(proof, clientSignature);
  if (!timingSafeEqual(hash(method, clientKey), storedKey)) return { ok: false, badProof: true, problem: 'wrong client proof' };
  return { ok: true, serverFinal: `v=${hmac(method, serverKey, authMessage).toString('base64')}` };
}

/**
 * The client side of an exchange, for tests and tools: `first` is the client-first message;
 * `final(serverFirst)` the client-final message (PBKDF2 with the server's salt and iterations);
 * `verifyServer(serverFinal)` whether the server proved it knows the ServerKey.
 */
export class ScramClient {
  readonly first: string;
  private readonly bare: string;
  private authMessage: string | undefined;
  private salted: Buffer | undefined;

  constructor(
    readonly method: ScramMethod,
    readonly username: string,
    private readonly password: string,
    readonly clientNonce: string = randomBytes(18).toString('base64'),
  ) {
    this.bare = `n=${encodeSaslName(username)},r=${clientNonce}`;
    this.first = `n,,${this.bare}`;
  }

  async final(serverFirstMessage: string): Promise<string> {
    const fields = new Map(serverFirstMessage.split(',').map((f) => [f.slice(0, 1), f.slice(2)] as const));
    const nonce = fields.get('r') ?? '';
    const salt = Buffer.from(fields.get('s') ?? '', 'base64');
    const iterations = Number(fields.get('i'));
    if (!nonce.startsWith(this.clientNonce)) throw new Error('the server nonce does not extend the client nonce');
    this.salted = await saltedPassword(this.method, Buffer.from(this.password, 'utf8'), salt, iterations);
    const withoutProof = `c=${Buffer.from('n,,').toString('base64')},r=${nonce}`;
    this.authMessage = `${this.bare},${serverFirstMessage},${withoutProof}`;
    const clientKey = hmac(this.method, this.salted, 'Client Key');
    const signature = hmac(this.method, hash(this.method, clientKey), this.authMessage);
    return `${withoutProof},p=${xor(clientKey, signature).toString('base64')}`;
  }

  verifyServer(serverFinalMessage: string): boolean {
    if (this.salted === undefined || this.authMessage === undefined) return false;
    const expected = `v=${hmac(this.method, hmac(this.method, this.salted, 'Server Key'), this.authMessage).toString('base64')}`;
    return expected === serverFinalMessage;
  }
}
