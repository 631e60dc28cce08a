import {
  ACL_RULES_ATTR,
  aclRulesAttr,
  parseAclRules,
  type AuthProvider,
  type AuthRejectReason,
  type AuthRequest,
  type AuthResult,
  type ExtendedAuthRequest,
  type ExtendedAuthResult,
  type PluginLogger,
} from '@bifro/spi';
import type { CryptoKey, JWTPayload, JWTVerifyOptions } from 'jose' with { 'resolution-mode': 'import' };
import { codeOf, loadJose, messageOf, type JoseModule } from './jose';
import { createKeys, KeyBackendError, type VerificationKeys } from './keys';
import type { JwtAuthOptions } from './options';

/** Longest tenant or user id taken from a claim. */
export const MAX_ID_LENGTH = 1024;

/** What a token says, once verified: who the client is, or why it is refused. */
export type Verdict =
  | {
      readonly ok: true;
      readonly tenantId: string;
      readonly userId: string;
      readonly attrs: Readonly<Record<string, string>>;
      readonly expiresAt: number | undefined;
    }
  | { readonly ok: false; readonly reason: AuthRejectReason; readonly text: string };

const utf8 = new TextDecoder('utf-8', { fatal: true });
const COMPACT_JWS = /^[A-Za-z0-9_-]+\.[A-Za-z0-9_-]+\.[A-Za-z0-9_-]*$/;

/**
 * The token in a password or Authentication Data, or undefined when the bytes are not a JWT
 * (then the provider defers, so that another provider of the chain may take a plain password):
 * UTF-8 text of three base64url segments, the first of which decodes to a JSON object's `{`.
 */
export function tokenOf(bytes: Uint8Array | undefined): string | undefined {
  if (bytes === undefined || bytes.length === 0) return undefined;
  let text: string;
  try {
    text = utf8.decode(bytes).trim();
  } catch {
    return undefined;
  }
  if (!COMPACT_JWS.test(text)) return undefined;
  const header = text.slice(0, text.indexOf('.'));
  return Buffer.from(header.slice(0, 8), 'base64url').toString('latin1').trimStart().startsWith('{') ? text : undefined;
}

function refuse(reason: AuthRejectReason, text: string): Verdict {
  return { ok: false, reason, text };
}

/** A claim as an id: a non-empty string (or an integer), at most {@link MAX_ID_LENGTH} characters. */
function idOf(value: unknown): string | undefined {
  const id = typeof value === 'string' ? value : typeof value === 'number' && Number.isSafeInteger(value) ? String(value) : undefined;
  return id === undefined || id === '' || id.length > MAX_ID_LENGTH ? undefined : id;
}

/**
 * Authenticates clients whose password (or MQTT 5 Authentication Data, method `authMethod`) is a
 * JWT: signature by `secret`, `publicKeyFile` or `jwksUrl` keys, `algorithms`, `issuer`,
 * `audience`, `exp`/`nbf` with `clockSkewSeconds`; the claims name the tenant, the user, the
 * session's ACL rules and attributes; `expiresAt` is the token's `exp`, so the broker ends the
 * session then unless an MQTT 5 re-authentication brings a fresh token.
 */
export class JwtAuthProvider implements AuthProvider {
  readonly authMethods: readonly string[];
  private jose: JoseModule | undefined;
  private keys: VerificationKeys | undefined;
  private lastUnexpectedLog = 0;

  constructor(
    readonly options: JwtAuthOptions,
    private readonly logger: PluginLogger,
  ) {
    this.authMethods = options.authMethod === undefined ? [] : [options.authMethod];
  }

  async init(): Promise<void> {
    this.jose = await loadJose();
    const keys = createKeys(this.jose, this.options.key, this.options.algorithms, this.logger);
    await keys.init();
    this.keys = keys;
    const o = this.options;
    this.logger.info('JWT authentication ready', {
      keys: o.key.kind === 'secret' ? 'secret' : o.key.kind === 'file' ? o.key.file : o.key.url.href,
      algorithms: keys.algorithms,
      issuer: o.issuer ?? null,
      audience: o.audience ?? null,
      authMethod: o.authMethod ?? null,
    });
    if (o.audience === undefined) {
      this.logger.warn(
        'no audience option: tokens issued for any audience are accepted; set audience to the one your issuer gives the broker',
        {},
      );
    }
  }

  close(): void {
    this.keys?.close();
  }

  async authenticate(request: AuthRequest): Promise<AuthResult> {
    const token = tokenOf(request.password);
    if (token === undefined) return { type: 'defer' };
    const verdict = await this.verify(token, request);
    if (!verdict.ok) return { type: 'reject', reason: verdict.reason, text: verdict.text };
    return { type: 'ok', tenantId: verdict.tenantId, userId: verdict.userId, attrs: verdict.attrs, ...expiry(verdict.expiresAt) };
  }

  async extendedAuth(request: ExtendedAuthRequest): Promise<ExtendedAuthResult> {
    if (this.options.authMethod === undefined || request.method !== this.options.authMethod) return { type: 'defer' };
    if (request.phase === 'continue') {
      return {
        type: 'failed',
        reason: 'notAuthorized',
        text: 'JWT authentication is one step: the token goes in the CONNECT or AUTH 0x19',
      };
    }
    const token = tokenOf(request.data);
    if (token === undefined) return { type: 'failed', reason: 'badCredentials', text: 'the Authentication Data must be a JWT' };
    const verdict = await this.verify(token, request);
    if (!verdict.ok) return { type: 'failed', reason: verdict.reason, text: verdict.text };
    const current = request.client;
    if (
      request.phase === 'reauth' &&
      current !== undefined &&
      (current.tenantId !== verdict.tenantId || current.userId !== verdict.userId)
    ) {
      this.logger.debug('re-authentication refused: the token names another tenant or user', {
        clientId: current.clientId,
        tenantId: current.tenantId,
        userId: current.userId,
      });
      return { type: 'failed', reason: 'notAuthorized', text: 're-authentication must keep the tenant and the user' };
    }
    return { type: 'success', tenantId: verdict.tenantId, userId: verdict.userId, attrs: verdict.attrs, ...expiry(verdict.expiresAt) };
  }

  /** Verifies a token and maps its claims; never throws. */
  async verify(token: string, request: Pick<AuthRequest, 'clientId' | 'remoteAddress'>): Promise<Verdict> {
    const verdict = await this.check(token);
    if (!verdict.ok) {
      this.logger.debug(`token refused: ${verdict.text}`, {
        reason: verdict.reason,
        clientId: request.clientId,
        remoteAddress: request.remoteAddress,
      });
    }
    return verdict;
  }

  private async check(token: string): Promise<Verdict> {
    const jose = this.jose;
    const keys = this.keys;
    if (jose === undefined || keys === undefined) return refuse('error', 'the JWT plugin is not initialised');
    if (Buffer.byteLength(token) > this.options.maxTokenBytes)
      return refuse('badCredentials', `token longer than ${this.options.maxTokenBytes} bytes`);
    let payload: JWTPayload;
    try {
      payload = await this.jwtVerify(jose, keys, token);
    } catch (err) {
      return this.refusal(err);
    }
    return this.identity(payload);
  }

  private async jwtVerify(jose: JoseModule, keys: VerificationKeys, token: string): Promise<JWTPayload> {
    const o = this.options;
    const options: JWTVerifyOptions = {
      algorithms: [...keys.algorithms],
      clockTolerance: o.clockSkewSeconds,
      requiredClaims: o.requireExp ? ['exp'] : [],
    };
    if (o.issuer !== undefined) options.issuer = o.issuer;
    if (o.audience !== undefined) options.audience = o.audience;
    try {
      return (await jose.jwtVerify(token, keys.key, options)).payload;
    } catch (err) {
      // Several keys fit a token without `kid` (e.g. two PEM keys of one type): try each.
      if (codeOf(err) !== 'ERR_JWKS_MULTIPLE_MATCHING_KEYS') throw err;
      for await (const key of err as AsyncIterable<CryptoKey>) {
        try {
          return (await jose.jwtVerify(token, key, options)).payload;
        } catch (inner) {
          if (codeOf(inner) !== 'ERR_JWS_SIGNATURE_VERIFICATION_FAILED') throw inner;
        }
      }
      throw Object.assign(new Error('no key verifies the signature'), { code: 'ERR_JWS_SIGNATURE_VERIFICATION_FAILED' });
    }
  }

  /** Why jose refused a token, as an auth reason. */
  private refusal(err: unknown): Verdict {
    if (err instanceof KeyBackendError) return refuse('error', 'the keys to verify the token cannot be fetched');
    switch (codeOf(err)) {
      case 'ERR_JWT_EXPIRED':
        return refuse('badCredentials', 'token expired');
      case 'ERR_JWT_CLAIM_VALIDATION_FAILED': {
        const { claim, reason } = err as { claim?: unknown; reason?: unknown };
        if (claim === 'iss') return refuse('notAuthorized', 'token issuer not accepted');
        if (claim === 'aud') return refuse('notAuthorized', 'token audience not accepted');
        if (claim === 'nbf') return refuse('badCredentials', 'token not valid yet');
        if (reason === 'missing') return refuse('badCredentials', `token has no ${String(claim)} claim`);
        return refuse('badCredentials', `token claim ${String(claim)} invalid`);
      }
      case 'ERR_JWS_SIGNATURE_VERIFICATION_FAILED':
        return refuse('badCredentials', 'token signature invalid');
      case 'ERR_JOSE_ALG_NOT_ALLOWED':
        return refuse('badCredentials', 'token algorithm not allowed');
      case 'ERR_JWKS_NO_MATCHING_KEY':
        return refuse('badCredentials', 'no key for the token (unknown kid or key type)');
      case 'ERR_JWS_INVALID':
      case 'ERR_JWT_INVALID':
      case 'ERR_JOSE_NOT_SUPPORTED':
      case 'ERR_JWK_INVALID':
      case 'ERR_JWKS_MULTIPLE_MATCHING_KEYS':
        return refuse('badCredentials', 'token malformed');
      default: {
        const now = Date.now();
        if (now >= this.lastUnexpectedLog + 60_000) {
          this.lastUnexpectedLog = now;
          this.logger.warn(`token verification failed unexpectedly: ${messageOf(err)}`, { err: messageOf(err), code: codeOf(err) });
        }
        return refuse('error', 'the token could not be verified');
      }
    }
  }

  /** The identity, attributes and lifetime a verified token's claims give. */
  private identity(payload: JWTPayload): Verdict {
    const o = this.options;
    const userId = idOf(payload[o.userClaim]);
    if (userId === undefined) return refuse('notAuthorized', `token has no usable ${o.userClaim} claim (the user)`);
    const claimed = payload[o.tenantClaim];
    const tenantId = claimed === undefined ? o.defaultTenant : idOf(claimed);
    if (tenantId === undefined) return refuse('notAuthorized', `token has no usable ${o.tenantClaim} claim (the tenant)`);
    const attrs: Record<string, string> = {};
    for (const [claim, attr] of o.attrsClaims) {
      const value = payload[claim];
      if (value !== undefined) attrs[attr] = typeof value === 'string' ? value : JSON.stringify(value);
    }
    const acl = payload[o.aclClaim];
    if (acl !== undefined) {
      try {
        attrs[ACL_RULES_ATTR] = aclRulesAttr(parseAclRules(acl, `token claim ${o.aclClaim}`));
      } catch (err) {
        return refuse('notAuthorized', messageOf(err).slice(0, 200));
      }
    }
    return { ok: true, tenantId, userId, attrs, expiresAt: typeof payload.exp === 'number' ? payload.exp * 1000 : undefined };
  }
}

function expiry(expiresAt: number | undefined): { expiresAt?: number } {
  return expiresAt === undefined ? {} : { expiresAt };
}
