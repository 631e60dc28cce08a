import type { ErrorCatalogue } from '@bifro/spi';

/**
 * The error codes of the JWT plugin. Every error it throws has a message starting with
 * `<CODE>: @bifro/plugin-auth-jwt: ` and a `code` property; the plugin declares them in its
 * definition (`errors`), so the broker prints their remedy and docs/errors.md lists them.
 */
export const JWT_ERRORS = {
  BIFRO_AUTH_JWT_OPTIONS_INVALID: {
    summary: 'An option of the JWT plugin (auth or acl entry) is unknown, missing or has the wrong type or range.',
    remedy:
      'Fix the `options` of `@bifro/plugin-auth-jwt` in the broker config: the message names the key; the option table is in plugins/auth-jwt/README.md.',
  },
  BIFRO_AUTH_JWT_KEY_INVALID: {
    summary: 'The `publicKeyFile` of the JWT plugin cannot be read or holds no usable public key (PEM SPKI, PEM certificate, JWK or JWKS).',
    remedy:
      'Point `publicKeyFile` at a readable file with public keys only (no private key, no symmetric key) whose types fit `algorithms`. At start this fails the load; on a change of the file the previous keys stay.',
  },
  BIFRO_AUTH_JWT_JWKS_UNAVAILABLE: {
    summary:
      'The JWKS URL of the JWT plugin could not be fetched or did not answer a valid JSON Web Key Set; tokens that need it are refused.',
    remedy:
      'Check that `jwksUrl` is reachable from the broker and answers 200 with `{ "keys": [...] }` within `jwks.timeoutMs`. Clients are refused (CONNACK 0x80 / v3 0x03) until it is back.',
  },
  BIFRO_AUTH_JWT_JOSE_MISSING: {
    summary: 'The `jose` library the JWT plugin verifies tokens with cannot be loaded.',
    remedy:
      'Install the plugin with its dependencies (`bifro plugin install @bifro/plugin-auth-jwt`, or `npm install` in its folder) on Node.js 20.19 or later.',
  },
} as const satisfies ErrorCatalogue;

/** A code of the JWT plugin. */
export type JwtErrorCode = keyof typeof JWT_ERRORS;

/** The plugin's name, as every message names it. */
export const PLUGIN = '@bifro/plugin-auth-jwt';

/** An error of the JWT plugin: the message starts with the code and names the plugin. */
export class JwtPluginError extends Error {
  override readonly name = 'JwtPluginError';

  constructor(
    readonly code: JwtErrorCode,
    message: string,
    options?: { cause?: unknown },
  ) {
    super(`${code}: ${PLUGIN}: ${message}`, options);
  }
}
