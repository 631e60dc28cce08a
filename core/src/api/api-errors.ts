import { defineErrors } from '../base/errors';

/**
 * Errors of the admin API. Every error answer is `{ code, message }` with one of these codes and
 * an HTTP status, plus `errors` (one per bad field) where a route gives them; never a stack trace
 * (docs/api.md § Errors).
 */
export const API_ERRORS = defineErrors({
  BIFRO_API_UNAUTHORIZED: {
    summary: 'An admin API request came without `Authorization: Bearer <token>`, or with a token that is not configured (HTTP 401).',
    remedy: 'Send a token listed (as its hash) under `api.tokens`; `bifro token create` makes one.',
  },
  BIFRO_API_FORBIDDEN: {
    summary: "A tenant token asked for another tenant's resources, or for a broker-wide one (HTTP 403).",
    remedy: 'Use a token of that tenant, or an admin token (a token without `tenant`).',
  },
  BIFRO_API_NOT_FOUND: {
    summary: 'The route, session, retained message, ban or tenant named in the request does not exist (HTTP 404).',
    remedy: 'Check the path and the names in it; lists (`GET …/sessions`, `GET …/retained`) show what exists.',
  },
  BIFRO_API_INVALID_REQUEST: {
    summary:
      'The request body, path or query does not match the route schema, a value is out of range or the path is not valid percent-encoding (HTTP 400); a body above the limit (HTTP 413: 8 MiB with a token, 64 KiB without).',
    remedy:
      'Fix the field named in the message (a settings PATCH also lists each bad setting in `errors`); every route schema is in /api/v1/openapi.json; send large bodies only with a token.',
  },
  BIFRO_API_CONFLICT: {
    summary: 'The request cannot be done in the current state (e.g. the settings provider is not writable) (HTTP 409).',
    remedy: 'Read the message: it names what is missing (a writable settings plugin, a persistent session...).',
  },
  BIFRO_API_RATE_LIMITED: {
    summary: 'Too many requests with a missing or wrong token came from one address within a minute (HTTP 429).',
    remedy: 'Wait for the time in the Retry-After header; fix the token; raise `api.authFailuresPerMinute` only for trusted callers.',
  },
  BIFRO_API_UNAVAILABLE: {
    summary: 'The broker is starting or shutting down, or the storage it needs failed (HTTP 503).',
    remedy: 'Retry; when it persists, look at the broker log for the storage or plugin error.',
  },
  BIFRO_API_INTERNAL: {
    summary: 'The request failed inside the broker (HTTP 500); the details are in the broker log, not the answer.',
    remedy: 'Look for the request id in the broker log (`reqId`) and report it with the log lines.',
  },
});

export type ApiErrorCode = keyof typeof API_ERRORS;

const STATUS: Readonly<Record<ApiErrorCode, number>> = {
  BIFRO_API_UNAUTHORIZED: 401,
  BIFRO_API_FORBIDDEN: 403,
  BIFRO_API_NOT_FOUND: 404,
  BIFRO_API_INVALID_REQUEST: 400,
  BIFRO_API_CONFLICT: 409,
  BIFRO_API_RATE_LIMITED: 429,
  BIFRO_API_UNAVAILABLE: 503,
  BIFRO_API_INTERNAL: 500,
};

/** One problem of a request, tied to the field it is about (a setting name in a settings PATCH). */
export interface ApiFieldError {
  readonly field: string;
  readonly message: string;
}

/** The body of every error answer. */
export interface ApiErrorBody {
  readonly code: ApiErrorCode;
  readonly message: string;
  /** One entry per bad field, when the route can tell them apart; `message` still says it all. */
  readonly errors?: readonly ApiFieldError[];
}

/** An error answer of the admin API: thrown by a route, answered as its `body()` with its status by the server's error handler. */
export class ApiError extends Error {
  readonly statusCode: number;

  constructor(
    readonly code: ApiErrorCode,
    message: string,
    readonly errors?: readonly ApiFieldError[],
  ) {
    super(message);
    this.name = 'ApiError';
    this.statusCode = STATUS[code];
  }

  /** The answer's body: `{ code, message }`, and `errors` when the error has them. */
  body(): ApiErrorBody {
    return this.errors === undefined
      ? { code: this.code, message: this.message }
      : { code: this.code, message: this.message, errors: this.errors };
  }
}

/** The schema of every error answer (referenced by the route schemas as `ApiError#`). */
export const ERROR_BODY_SCHEMA = {
  $id: 'ApiError',
  type: 'object',
  required: ['code', 'message'],
  additionalProperties: false,
  properties: {
    code: { type: 'string', enum: Object.keys(API_ERRORS) },
    message: { type: 'string' },
    errors: {
      type: 'array',
      description: 'One entry per bad field, when the route can tell them apart (a settings PATCH); `message` says the same in one line.',
      items: {
        type: 'object',
        required: ['field', 'message'],
        additionalProperties: false,
        properties: {
          field: { type: 'string', description: 'The field as the request gives it (a setting name, even an unknown one).' },
          message: { type: 'string', description: 'What is wrong with it, without its name.' },
        },
      },
    },
  },
} as const;
