import { createPublicKey, X509Certificate, type KeyObject } from 'node:crypto';
import * as fs from 'node:fs';
import type { PluginLogger } from '@bifro/spi';
import type { JSONWebKeySet, JWK, JWTVerifyGetKey, RemoteJWKSet } from 'jose' with { 'resolution-mode': 'import' };
import { JwtPluginError } from './errors';
import { codeOf, messageOf, type JoseModule } from './jose';
import {
  ASYMMETRIC_ALGORITHMS,
  EC_ALGORITHMS,
  HMAC_ALGORITHMS,
  OKP_ALGORITHMS,
  RSA_ALGORITHMS,
  type JwtAlgorithm,
  type KeySource,
} from './options';

/** What a token is verified with: the `key` argument of jose's `jwtVerify` and the algorithms allowed with it. */
export interface VerificationKeys {
  /** A shared secret, or a resolver picking a key by the token's header (`kid`, `alg`). */
  readonly key: Uint8Array | JWTVerifyGetKey;
  /** The allow-list handed to jose (the option, or the default of the key source). */
  readonly algorithms: readonly JwtAlgorithm[];
  init(): Promise<void>;
  close(): void;
}

/**
 * The key source could not answer (the JWKS URL is down, answered garbage, or timed out): the
 * token is neither accepted nor refused as a bad credential; the client gets "unspecified error".
 */
export class KeyBackendError extends Error {
  override readonly name = 'KeyBackendError';
}

/** jose's error codes that mean "no key for this token" rather than "the key source failed". */
const NO_KEY_CODES = new Set(['ERR_JWKS_NO_MATCHING_KEY', 'ERR_JWKS_MULTIPLE_MATCHING_KEYS', 'ERR_JOSE_NOT_SUPPORTED']);

/** The keys of the `secret`, `publicKeyFile` or `jwksUrl` option. */
export function createKeys(
  jose: JoseModule,
  source: KeySource,
  algorithms: readonly JwtAlgorithm[] | undefined,
  logger: PluginLogger,
): VerificationKeys {
  switch (source.kind) {
    case 'secret':
      return { key: source.secret, algorithms: algorithms ?? HMAC_ALGORITHMS, init: async () => undefined, close: () => undefined };
    case 'file':
      return new FileKeys(jose, source, algorithms, logger);
    case 'jwks':
      return new RemoteKeys(jose, source, algorithms ?? ASYMMETRIC_ALGORITHMS, logger);
  }
}

// ---------------------------------------------------------------------------------------------
// publicKeyFile

/** Parsed key file: the keys as a JWKS and the algorithms they verify. */
export interface KeyFileContent {
  readonly jwks: JSONWebKeySet;
  readonly algorithms: readonly JwtAlgorithm[];
}

const PRIVATE_MEMBERS = ['d', 'p', 'q', 'dp', 'dq', 'qi', 'oth', 'k'];
const PEM_BLOCK = /-----BEGIN ([A-Z0-9 ]+)-----([\s\S]*?)-----END \1-----/g;

/** The algorithms a public JWK verifies: its `alg`, else those of its key type and curve. */
function algorithmsOfJwk(jwk: JWK, where: string): readonly JwtAlgorithm[] {
  if (jwk.alg !== undefined) {
    if (!(ASYMMETRIC_ALGORITHMS as readonly string[]).includes(jwk.alg)) {
      throw new Error(
        `${where} has alg ${JSON.stringify(jwk.alg)}, not a supported public key algorithm (${ASYMMETRIC_ALGORITHMS.join(', ')})`,
      );
    }
    const fits = algorithmsOfJwk({ ...jwk, alg: undefined }, where);
    if (!fits.includes(jwk.alg as JwtAlgorithm))
      throw new Error(`${where} has alg ${jwk.alg}, which does not fit its key type (${fits.join(', ')})`);
    return [jwk.alg as JwtAlgorithm];
  }
  switch (jwk.kty) {
    case 'RSA': {
      const bits = typeof jwk.n === 'string' ? Buffer.from(jwk.n, 'base64url').length * 8 : 0;
      if (bits < 2048) throw new Error(`${where} is an RSA key of ${bits} bits (at least 2048 are needed)`);
      return RSA_ALGORITHMS;
    }
    case 'EC': {
      const alg = { 'P-256': EC_ALGORITHMS[0], 'P-384': EC_ALGORITHMS[1], 'P-521': EC_ALGORITHMS[2] }[String(jwk.crv)];
      if (alg === undefined) throw new Error(`${where} is an EC key on curve ${JSON.stringify(jwk.crv)} (supported: P-256, P-384, P-521)`);
      return [alg];
    }
    case 'OKP':
      if (jwk.crv !== 'Ed25519') throw new Error(`${where} is an OKP key on curve ${JSON.stringify(jwk.crv)} (supported: Ed25519)`);
      return OKP_ALGORITHMS;
    case 'oct':
      throw new Error(`${where} is a symmetric key (kty oct): use the secret option for HMAC`);
    default:
      throw new Error(`${where} has key type ${JSON.stringify(jwk.kty)} (supported: RSA, EC, OKP)`);
  }
}

function checkPublicJwk(value: unknown, where: string): JWK {
  if (typeof value !== 'object' || value === null || Array.isArray(value)) throw new Error(`${where} is not a JWK object`);
  const jwk = value as JWK;
  if (typeof jwk.kty !== 'string') throw new Error(`${where} has no kty`);
  if (jwk.kty !== 'oct' && PRIVATE_MEMBERS.some((m) => m in jwk)) {
    throw new Error(`${where} is a private key: the file must hold public keys only`);
  }
  return jwk;
}

function jwkOfKeyObject(key: KeyObject, where: string): JWK {
  const type = key.asymmetricKeyType;
  if (type !== 'rsa' && type !== 'ec' && type !== 'ed25519') {
    throw new Error(`${where} is a ${type ?? 'unknown'} key (supported: RSA, EC P-256/P-384/P-521, Ed25519)`);
  }
  return key.export({ format: 'jwk' }) as JWK;
}

/** The keys of a key file: a JWKS or a JWK (JSON), or PEM public keys and certificates. Throws with what is wrong. */
export function parseKeyFile(text: string): KeyFileContent {
  const keys: JWK[] = [];
  /** How messages name each key. */
  const names: string[] = [];
  const add = (jwk: JWK, name: string): void => {
    keys.push(jwk);
    names.push(name);
  };
  const trimmed = text.trim();
  if (trimmed.startsWith('{')) {
    let json: unknown;
    try {
      json = JSON.parse(trimmed);
    } catch (err) {
      throw new Error(`is not valid JSON (${messageOf(err)})`);
    }
    const set = json as { keys?: unknown };
    if (Array.isArray(set.keys)) set.keys.forEach((k: unknown, i) => add(checkPublicJwk(k, `keys[${i}]`), `keys[${i}]`));
    else add(checkPublicJwk(json, 'the JWK'), 'the JWK');
  } else {
    let i = 0;
    for (const match of trimmed.matchAll(PEM_BLOCK)) {
      const label = match[1]!;
      const where = `PEM block ${++i} (${label})`;
      if (label.includes('PRIVATE')) throw new Error(`${where} is a private key: the file must hold public keys only`);
      let key: KeyObject;
      try {
        key = label === 'CERTIFICATE' ? new X509Certificate(match[0]).publicKey : createPublicKey(match[0]);
      } catch (err) {
        throw new Error(`${where} cannot be read (${messageOf(err)})`);
      }
      add(jwkOfKeyObject(key, where), where);
    }
    if (i === 0) throw new Error('holds no key: expected PEM (PUBLIC KEY, RSA PUBLIC KEY or CERTIFICATE blocks), a JWK or a JWKS');
  }
  if (keys.length === 0) throw new Error('holds no key (an empty "keys" list)');
  const algorithms = new Set<JwtAlgorithm>();
  keys.forEach((jwk, i) => {
    for (const alg of algorithmsOfJwk(jwk, names[i]!)) algorithms.add(alg);
  });
  return { jwks: { keys }, algorithms: [...algorithms] };
}

/** Keys from `publicKeyFile`, read at init and again when the file changes (the previous keys stay when the new content is bad). */
class FileKeys implements VerificationKeys {
  private resolve: JWTVerifyGetKey | undefined;
  private allowed: readonly JwtAlgorithm[] = [];
  private reloading = false;
  private again = false;
  private closed = false;
  private readonly onChange = (): void => void this.reload();

  constructor(
    private readonly jose: JoseModule,
    private readonly source: Extract<KeySource, { kind: 'file' }>,
    private readonly configured: readonly JwtAlgorithm[] | undefined,
    private readonly logger: PluginLogger,
  ) {}

  readonly key: JWTVerifyGetKey = (header, token) => {
    if (this.resolve === undefined) throw new KeyBackendError('the key file is not loaded');
    return this.resolve(header, token);
  };

  get algorithms(): readonly JwtAlgorithm[] {
    return this.allowed;
  }

  async init(): Promise<void> {
    try {
      await this.load();
    } catch (err) {
      throw new JwtPluginError('BIFRO_AUTH_JWT_KEY_INVALID', `publicKeyFile ${this.source.file} ${messageOf(err)}`, { cause: err });
    }
    if (this.closed) return;
    fs.watchFile(this.source.file, { persistent: false, interval: this.source.pollMs }, this.onChange);
  }

  close(): void {
    this.closed = true;
    fs.unwatchFile(this.source.file, this.onChange);
  }

  /** Reads the file again (what a change does); resolves when done. */
  async reload(): Promise<void> {
    if (this.reloading) {
      this.again = true;
      return;
    }
    this.reloading = true;
    try {
      do {
        this.again = false;
        try {
          await this.load();
        } catch (err) {
          this.logger.warn(`BIFRO_AUTH_JWT_KEY_INVALID: ${this.source.file} changed but ${messageOf(err)}; the previous keys stay`, {
            file: this.source.file,
            err: messageOf(err),
          });
        }
      } while (this.again && !this.closed);
    } finally {
      this.reloading = false;
    }
  }

  private async load(): Promise<void> {
    let text: string;
    try {
      text = await fs.promises.readFile(this.source.file, 'utf8');
    } catch (err) {
      throw new Error(`cannot be read (${messageOf(err)})`);
    }
    const content = parseKeyFile(text);
    const allowed = this.configured === undefined ? content.algorithms : this.configured.filter((a) => content.algorithms.includes(a));
    if (allowed.length === 0) {
      throw new Error(
        `holds keys for ${content.algorithms.join(', ')}, none of which is in options.algorithms (${this.configured!.join(', ')})`,
      );
    }
    // Import each key once now, so that a key jose refuses is reported here rather than per CONNECT.
    for (const [i, jwk] of content.jwks.keys.entries()) {
      const alg = jwk.alg ?? algorithmsOfJwk(jwk, `key ${i + 1}`)[0]!;
      try {
        await this.jose.importJWK(jwk, alg);
      } catch (err) {
        throw new Error(`key ${i + 1} cannot be used for ${alg} (${messageOf(err)})`);
      }
    }
    if (this.closed) return;
    const first = this.resolve === undefined;
    this.resolve = fileResolver(this.jose, content.jwks);
    this.allowed = allowed;
    this.logger.info(`${first ? 'loaded' : 'reloaded'} ${content.jwks.keys.length} key(s) from ${this.source.file}`, {
      file: this.source.file,
      keys: content.jwks.keys.length,
      kids: content.jwks.keys.map((k) => k.kid ?? null),
      algorithms: allowed,
    });
  }
}

/**
 * A resolver over a key file's keys. A token's `kid` picks the key with that `kid`; keys without
 * one (PEM keys have none) verify tokens whatever their `kid` says, tried by key type.
 */
function fileResolver(jose: JoseModule, jwks: JSONWebKeySet): JWTVerifyGetKey {
  const withKid = jwks.keys.filter((k) => k.kid !== undefined);
  const withoutKid = jwks.keys.filter((k) => k.kid === undefined);
  const byKid = withKid.length === 0 ? undefined : jose.createLocalJWKSet({ keys: withKid });
  const anyKid = withoutKid.length === 0 ? undefined : jose.createLocalJWKSet({ keys: withoutKid });
  const all = jose.createLocalJWKSet(jwks);
  return async (header, token) => {
    if (header.kid === undefined || anyKid === undefined) return all(header, token);
    if (byKid !== undefined) {
      try {
        return await byKid(header, token);
      } catch (err) {
        if (codeOf(err) !== 'ERR_JWKS_NO_MATCHING_KEY') throw err;
      }
    }
    return anyKid({ ...header, kid: undefined }, { ...token, header: undefined });
  };
}

// ---------------------------------------------------------------------------------------------
// jwksUrl

/** How often a JWKS that keeps failing is logged again. */
const FAILURE_LOG_EVERY_MS = 60_000;

/**
 * Keys from `jwksUrl`, through jose's `createRemoteJWKSet`: cached for `cacheMaxAgeMs`, fetched
 * again for an unknown `kid` at most once per `cooldownMs`, concurrent fetches shared. On top of
 * it: after a failed fetch none is tried for `failureBackoffMs` (a JWKS that is down is not
 * hammered once per CONNECT), and failures are logged once per streak (then every minute).
 */
class RemoteKeys implements VerificationKeys {
  private readonly remote: RemoteJWKSet;
  private failedAt = 0;
  private failing = false;
  private lastFailureLog = 0;
  /** Fetches started (for logs and tests). */
  fetches = 0;

  constructor(
    jose: JoseModule,
    private readonly source: Extract<KeySource, { kind: 'jwks' }>,
    readonly algorithms: readonly JwtAlgorithm[],
    private readonly logger: PluginLogger,
  ) {
    const fetchImpl = (url: string, init: RequestInit): Promise<Response> => {
      if (this.failedAt !== 0 && Date.now() < this.failedAt + this.source.failureBackoffMs) {
        return Promise.reject(
          new BackoffError(`not fetched again within jwks.failureBackoffMs (${this.source.failureBackoffMs} ms) of a failure`),
        );
      }
      this.fetches++;
      this.logger.debug(`fetching the JWKS ${this.source.url.href}`, { url: this.source.url.href, fetches: this.fetches });
      return fetch(url, init);
    };
    this.remote = jose.createRemoteJWKSet(source.url, {
      cacheMaxAge: source.cacheMaxAgeMs,
      cooldownDuration: source.cooldownMs,
      timeoutDuration: source.timeoutMs,
      [jose.customFetch]: fetchImpl,
    });
  }

  readonly key: JWTVerifyGetKey = async (header, token) => {
    try {
      const key = await this.remote(header, token);
      this.recovered();
      return key;
    } catch (err) {
      if (NO_KEY_CODES.has(codeOf(err) ?? '')) {
        this.recovered();
        throw err;
      }
      throw this.failed(err);
    }
  };

  /** Fetches the set once at start, so the first clients need not wait; a failure is logged, not fatal (clients are refused until it works). */
  async init(): Promise<void> {
    try {
      await this.remote.reload();
      const keys = this.remote.jwks()?.keys ?? [];
      this.logger.info(`fetched ${keys.length} key(s) from the JWKS ${this.source.url.href}`, {
        url: this.source.url.href,
        kids: keys.map((k) => k.kid ?? null),
      });
    } catch (err) {
      this.failed(err);
    }
  }

  close(): void {
    // Nothing to release: jose's fetches are bounded by timeoutMs.
  }

  private failed(err: unknown): KeyBackendError {
    const backoff = err instanceof BackoffError;
    const now = Date.now();
    if (!backoff) this.failedAt = now;
    if (!this.failing || now >= this.lastFailureLog + FAILURE_LOG_EVERY_MS) {
      this.lastFailureLog = now;
      this.logger.warn(
        `BIFRO_AUTH_JWT_JWKS_UNAVAILABLE: the JWKS ${this.source.url.href} cannot be used (${messageOf(err)}); tokens that need it are refused until it can`,
        { url: this.source.url.href, err: messageOf(err), code: codeOf(err) },
      );
    }
    this.failing = true;
    return new KeyBackendError(`the JWKS ${this.source.url.href} cannot be used: ${messageOf(err)}`, { cause: err });
  }

  private recovered(): void {
    if (!this.failing) return;
    this.failing = false;
    this.failedAt = 0;
    this.logger.info(`the JWKS ${this.source.url.href} answers again`, { url: this.source.url.href });
  }
}

class BackoffError extends Error {
  override readonly name = 'BackoffError';
}
