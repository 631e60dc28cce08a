import type { ErrorCatalogue } from '@bifro/spi';

/** The plugin's package name, as messages name it. */
export const PLUGIN_NAME = '@bifro/plugin-auth-http';

/**
 * The error codes of `@bifro/plugin-auth-http`. Errors it throws have a message starting with
 * `<CODE>: @bifro/plugin-auth-http: ` and a `code` property; the service failures are not thrown
 * (a CONNECT is answered) but logged with the code in the message and in the `code` field.
 */
export const AUTH_HTTP_ERRORS = {
  BIFRO_AUTH_HTTP_OPTIONS_INVALID: {
    summary: 'An option of @bifro/plugin-auth-http (its auth or its acl entry) is missing, unknown, or has the wrong type or range.',
    remedy:
      'Fix the `options` of the plugin entry in the broker config: the message names the key; every option is described in plugins/auth-http/README.md.',
  },
  BIFRO_AUTH_HTTP_TLS_INVALID: {
    summary:
      'A file named by `options.tls` (ca, cert, key) of @bifro/plugin-auth-http cannot be read or is not PEM, or the certificate and key cannot be used together.',
    remedy: 'Check the path named in the message (relative paths resolve against the config folder) and that the broker user may read it.',
  },
  BIFRO_AUTH_HTTP_SERVICE_FAILED: {
    summary:
      'The auth service of @bifro/plugin-auth-http could not answer: connection refused, timeout, TLS failure, or an HTTP status other than 2xx, 401 and 403.',
    remedy:
      'Check that the service at `options.url` is up and reachable from the broker, and `timeoutMs`. Meanwhile clients are refused with CONNACK 0x80 (v3: 3), or passed to the next auth provider with `failOpen: true`.',
  },
  BIFRO_AUTH_HTTP_ANSWER_INVALID: {
    summary:
      'The auth service of @bifro/plugin-auth-http answered 2xx with a body that is not the expected JSON answer (or an allow naming no tenant while `options.tenant` gives none).',
    remedy:
      'Fix the service: a 2xx answer is a JSON object with `result` "allow", "deny" or "ignore" (see plugins/auth-http/README.md); the message says what was wrong. Such an answer counts as a failure (0x80, or the next provider with `failOpen`).',
  },
} as const satisfies ErrorCatalogue;

/** A code of the plugin. */
export type AuthHttpErrorCode = keyof typeof AUTH_HTTP_ERRORS;

/** An error of the plugin: `message` starts with the code and the plugin name. */
export class AuthHttpError extends Error {
  override readonly name = 'AuthHttpError';

  constructor(
    readonly code: AuthHttpErrorCode,
    message: string,
    options?: { cause?: unknown },
  ) {
    super(`${code}: ${PLUGIN_NAME}: ${message}`, options);
  }
}

/** The error of a bad option: `BIFRO_AUTH_HTTP_OPTIONS_INVALID: @bifro/plugin-auth-http: options.<key> ...`. */
export function optionError(key: string, problem: string): AuthHttpError {
  return new AuthHttpError('BIFRO_AUTH_HTTP_OPTIONS_INVALID', `options.${key} ${problem}`);
}

/** A short description of a value for messages. */
export function describe(value: unknown): string {
  if (value === undefined) return 'nothing';
  if (value === null) return 'null';
  if (typeof value === 'string') return JSON.stringify(value.length > 60 ? `${value.slice(0, 60)}...` : value);
  if (Array.isArray(value)) return 'an array';
  if (typeof value === 'object') return 'an object';
  return `${typeof value} ${String(value)}`;
}
