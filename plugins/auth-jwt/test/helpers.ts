import { createHmac, sign as cryptoSign, type KeyObject } from 'node:crypto';
import * as fs from 'node:fs';
import * as http from 'node:http';
import type { AddressInfo } from 'node:net';
import * as os from 'node:os';
import * as path from 'node:path';
import type { AuthRequest } from '@bifro/spi';
import { sampleAuthRequest, testPluginContext, type TestPluginContext } from '@bifro/spi/testing';
import type { CryptoKey, JWK, JWTPayload } from 'jose' with { 'resolution-mode': 'import' };
import plugin from '../src';
import { loadJose, type JoseModule } from '../src/jose';
import { JwtAuthProvider } from '../src/jwt-auth';

/** A 48-byte HMAC secret (longer than the 32-byte minimum). */
export const SECRET = 'unit-test-secret-0123456789abcdefghijklmnopqrstuv';

export function jose(): Promise<JoseModule> {
  return loadJose();
}

/** Seconds since the epoch, now. */
export function nowSeconds(): number {
  return Math.floor(Date.now() / 1000);
}

/** Claims of an ordinary valid token: user alice of tenant acme, valid for a minute. */
export function claims(extra: JWTPayload = {}): JWTPayload {
  const now = nowSeconds();
  return { sub: 'alice', tenant: 'acme', iat: now, exp: now + 60, ...extra };
}

/** A key pair whose public half is also a JWK with `kid` (and `alg`). */
export interface TestKeyPair {
  readonly alg: string;
  readonly kid: string;
  readonly privateKey: CryptoKey;
  readonly publicKey: CryptoKey;
  readonly jwk: JWK;
  readonly pem: string;
}

let kids = 0;

export async function keyPair(alg: string, kid = `kid-${alg}-${++kids}`): Promise<TestKeyPair> {
  const j = await jose();
  const { privateKey, publicKey } = await j.generateKeyPair(alg, { extractable: true });
  const jwk = { ...(await j.exportJWK(publicKey)), kid, alg };
  return { alg, kid, privateKey, publicKey, jwk, pem: await j.exportSPKI(publicKey) };
}

/** Signs `payload` with `key` (a secret or a private key); `header` is merged into the protected header. */
export async function sign(
  key: CryptoKey | Uint8Array | string,
  alg: string,
  payload: JWTPayload,
  header: Record<string, unknown> = {},
): Promise<string> {
  const j = await jose();
  const k = typeof key === 'string' ? new TextEncoder().encode(key) : key;
  return new j.SignJWT(payload).setProtectedHeader({ alg, ...header }).sign(k);
}

/** The token with one character of its signature changed. */
export function tamper(token: string): string {
  const dot = token.lastIndexOf('.');
  const sig = token.slice(dot + 1);
  const i = Math.floor(sig.length / 2);
  const c = sig[i] === 'A' ? 'B' : 'A';
  return `${token.slice(0, dot + 1)}${sig.slice(0, i)}${c}${sig.slice(i + 1)}`;
}

/** A CONNECT carrying `token` as its password. */
export function withPassword(token: string, extra: Partial<AuthRequest> = {}): AuthRequest {
  return sampleAuthRequest({ protocolVersion: 5, clientId: 'dev-1', username: 'ignored', password: Buffer.from(token), ...extra });
}

export function makeTempDir(): string {
  return fs.mkdtempSync(path.join(os.tmpdir(), 'bifro-auth-jwt-'));
}

/** Providers and folders made by a test, released by {@link cleanup}. */
const opened: Array<() => Promise<void> | void> = [];

export function onCleanup(fn: () => Promise<void> | void): void {
  opened.push(fn);
}

export async function cleanup(): Promise<void> {
  for (const fn of opened.splice(0).reverse()) await fn();
}

/** Creates a provider through the plugin's factory and inits it (closed by {@link cleanup}). */
export async function provider(
  options: Record<string, unknown>,
  configDir?: string,
): Promise<{ auth: JwtAuthProvider; ctx: TestPluginContext }> {
  const ctx = testPluginContext(configDir === undefined ? { options } : { options, configDir });
  const made = await plugin.auth(ctx);
  if (!(made instanceof JwtAuthProvider)) throw new Error('the auth factory must return a JwtAuthProvider');
  onCleanup(() => made.close());
  await made.init();
  return { auth: made, ctx };
}

/** A JWKS endpoint on 127.0.0.1 whose keys and availability a test changes, counting its requests. */
export class JwksServer {
  keys: JWK[] = [];
  /** When false, answers 503. */
  up = true;
  /** When set, answers this body with status 200 instead of the keys. */
  body: string | undefined;
  requests = 0;
  private constructor(
    private readonly server: http.Server,
    readonly url: string,
  ) {}

  static async start(keys: JWK[] = []): Promise<JwksServer> {
    const holder: { self?: JwksServer } = {};
    const server = http.createServer((_req, res) => {
      const s = holder.self!;
      s.requests++;
      if (!s.up) {
        res.writeHead(503).end('down');
        return;
      }
      res.writeHead(200, { 'content-type': 'application/json' }).end(s.body ?? JSON.stringify({ keys: s.keys }));
    });
    await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
    const port = (server.address() as AddressInfo).port;
    const self = new JwksServer(server, `http://127.0.0.1:${port}/.well-known/jwks.json`);
    self.keys = keys;
    holder.self = self;
    return self;
  }

  stop(): Promise<void> {
    return new Promise((resolve) => {
      this.server.closeAllConnections();
      this.server.close(() => resolve());
    });
  }
}

export function sleep(ms: number): Promise<void> {
  return new Promise((resolve) => setTimeout(resolve, ms));
}

/**
 * Signs a JWT synchronously with node:crypto (HS256 with a string secret, ES256 with an EC
 * P-256 private KeyObject), for tokens a conformance kit needs when it is built, before any await.
 */
export function signSync(key: string | KeyObject, payload: JWTPayload, header: Record<string, unknown> = {}): string {
  const alg = typeof key === 'string' ? 'HS256' : 'ES256';
  const b64 = (o: object): string => Buffer.from(JSON.stringify(o)).toString('base64url');
  const input = `${b64({ alg, typ: 'JWT', ...header })}.${b64(payload)}`;
  const signature =
    typeof key === 'string'
      ? createHmac('sha256', key).update(input).digest()
      : cryptoSign('sha256', Buffer.from(input), { key, dsaEncoding: 'ieee-p1363' });
  return `${input}.${signature.toString('base64url')}`;
}
