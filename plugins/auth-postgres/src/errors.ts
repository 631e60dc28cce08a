import type { ErrorCatalogue } from '@bifro/spi';

/** The package name, used in every message and log line. */
export const PLUGIN_NAME = '@bifro/plugin-auth-postgres';

/**
 * The error codes of the plugin. Every error it throws has a message starting with `<CODE>: ` and
 * a `code` property; the broker knows the codes once it loaded the plugin, and docs/errors.md
 * lists them.
 */
export const AUTH_POSTGRES_ERRORS = {
  BIFRO_AUTH_POSTGRES_OPTIONS_INVALID: {
    summary: 'An option of the auth-postgres plugin is missing, unknown, of the wrong type or out of range (or a query cannot be used).',
    remedy:
      'Fix the key named in the message in `plugins.auth` / `plugins.acl` `options` of the broker config; the options are listed in plugins/auth-postgres/README.md.',
  },
  BIFRO_AUTH_POSTGRES_UNAVAILABLE: {
    summary:
      'The PostgreSQL database could not be reached or did not answer in time (connection refused, timeout, server shutting down): the client was refused with the `error` outcome (fail closed).',
    remedy:
      'Check that the database in `connectionString` is up and reachable from the broker, and the pool and timeout options (`pool.connectionTimeoutMs`, `queryTimeoutMs`); clients are accepted again as soon as it answers.',
  },
  BIFRO_AUTH_POSTGRES_QUERY_FAILED: {
    summary:
      'PostgreSQL refused `authQuery` or `aclQuery` (syntax error, missing table or column, permission denied): the client was refused with the `error` outcome.',
    remedy:
      "Run the query named in the message with psql as the broker's database role and fix the query option or the schema; the SQLSTATE is in the message.",
  },
  BIFRO_AUTH_POSTGRES_ROW_INVALID: {
    summary:
      'A row the queries returned cannot be used: several users for one login, a missing or empty column, a password hash in an unknown or disallowed format, attrs that are not an object of strings, or an ACL row that is not a valid rule. The client was refused with the `error` outcome.',
    remedy:
      'Fix the row named in the message (or the query, so that it returns the documented columns); the row formats are described in plugins/auth-postgres/README.md.',
  },
} as const satisfies ErrorCatalogue;

/** A code of the plugin. */
export type AuthPostgresErrorCode = keyof typeof AUTH_POSTGRES_ERRORS;

/** An error of the plugin: `message` starts with the code. */
export class AuthPostgresError extends Error {
  override readonly name = 'AuthPostgresError';

  constructor(
    readonly code: AuthPostgresErrorCode,
    message: string,
    options?: { cause?: unknown },
  ) {
    super(`${code}: ${PLUGIN_NAME}: ${message}`, options);
  }
}

/** An option problem: `options.<key> ...`. */
export function optionsError(message: string): AuthPostgresError {
  return new AuthPostgresError('BIFRO_AUTH_POSTGRES_OPTIONS_INVALID', message);
}

/** The message of anything thrown. */
export function describeError(err: unknown): string {
  if (err instanceof AggregateError && err.errors.length > 0) return err.errors.map(describeError).join('; ');
  if (err instanceof Error) {
    const code = (err as { code?: unknown }).code;
    const text = err.message === '' ? err.name : err.message.replace(/^Error: /, '');
    return typeof code === 'string' && !text.includes(code) ? `${text} (${code})` : text;
  }
  return String(err);
}
