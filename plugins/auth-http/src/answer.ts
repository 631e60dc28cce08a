import { ACL_RULES_ATTR, aclRulesAttr, parseAclRules } from '@bifro/spi';
import { describe } from './errors';
import type { HttpResponse } from './transport';

/** The reasons a service may give for a deny (`error` is not one: the service answers 5xx for that). */
export const DENY_REASONS = ['badCredentials', 'notAuthorized', 'banned'] as const;
export type DenyReason = (typeof DENY_REASONS)[number];

/** What the service decided, as read from its answer; kept in the cache as is. */
export type ServiceDecision =
  | {
      readonly kind: 'allow';
      /** The tenant the answer names (else the `tenant` option decides). */
      readonly tenantId: string | undefined;
      /** The user the answer names (else the `user` option decides). */
      readonly userId: string | undefined;
      /** The attributes for the session, with the ACL rules under `bifro.acl` when the answer had `acl`. Frozen. */
      readonly attrs: Readonly<Record<string, string>>;
      /** When the credentials stop being valid, ms since the epoch. */
      readonly expiresAt: number | undefined;
    }
  | { readonly kind: 'deny'; readonly reason: DenyReason; readonly text: string | undefined }
  | { readonly kind: 'ignore' }
  | {
      readonly kind: 'failed';
      readonly code: 'BIFRO_AUTH_HTTP_SERVICE_FAILED' | 'BIFRO_AUTH_HTTP_ANSWER_INVALID';
      readonly message: string;
    };

const EMPTY_ATTRS: Readonly<Record<string, string>> = Object.freeze({});

function invalid(message: string): ServiceDecision {
  return { kind: 'failed', code: 'BIFRO_AUTH_HTTP_ANSWER_INVALID', message };
}

function isRecord(value: unknown): value is Readonly<Record<string, unknown>> {
  return typeof value === 'object' && value !== null && !Array.isArray(value);
}

/**
 * Reads the service's answer.
 *
 * - 401 → deny `badCredentials`; 403 → deny `notAuthorized` (whatever the body).
 * - Any other status outside 2xx → failed (`BIFRO_AUTH_HTTP_SERVICE_FAILED`).
 * - 2xx in `status` mode → allow, the identity coming from the options.
 * - 2xx in `json` mode → the JSON object decides: `result` "allow" | "deny" | "ignore"; with
 *   allow, optional `tenant` (non-empty string), `user` (string), `attrs` (map of strings; not
 *   `bifro.acl`), `acl` (rules, see `parseAclRules`), `expiresAt` (ms since the epoch); with
 *   deny, optional `reason` ("badCredentials" | "notAuthorized" (default) | "banned") and
 *   `message` (the v5 Reason String). Unknown fields are ignored. Anything else (not JSON, not an
 *   object, a field of the wrong type, bad rules) → failed (`BIFRO_AUTH_HTTP_ANSWER_INVALID`).
 */
export function interpretAnswer(res: HttpResponse, mode: 'json' | 'status'): ServiceDecision {
  if (res.status === 401) return { kind: 'deny', reason: 'badCredentials', text: undefined };
  if (res.status === 403) return { kind: 'deny', reason: 'notAuthorized', text: undefined };
  if (res.status < 200 || res.status > 299) {
    return { kind: 'failed', code: 'BIFRO_AUTH_HTTP_SERVICE_FAILED', message: `the service answered HTTP ${res.status}` };
  }
  if (mode === 'status') return { kind: 'allow', tenantId: undefined, userId: undefined, attrs: EMPTY_ATTRS, expiresAt: undefined };
  let parsed: unknown;
  try {
    parsed = JSON.parse(res.body.toString('utf8')) as unknown;
  } catch (err) {
    return invalid(`the HTTP ${res.status} answer is not JSON (${(err as Error).message})`);
  }
  return interpretJson(parsed);
}

/** Reads a parsed JSON answer (see {@link interpretAnswer}). */
export function interpretJson(answer: unknown): ServiceDecision {
  if (!isRecord(answer)) return invalid(`the answer must be a JSON object, got ${describe(answer)}`);
  switch (answer.result) {
    case 'ignore':
      return { kind: 'ignore' };
    case 'deny': {
      const reason = answer.reason ?? 'notAuthorized';
      if (typeof reason !== 'string' || !(DENY_REASONS as readonly string[]).includes(reason)) {
        return invalid(`answer.reason must be one of ${DENY_REASONS.join(', ')}, got ${describe(reason)}`);
      }
      const text = answer.message;
      if (text !== undefined && typeof text !== 'string') return invalid(`answer.message must be a string, got ${describe(text)}`);
      return { kind: 'deny', reason: reason as DenyReason, text };
    }
    case 'allow':
      return interpretAllow(answer);
    default:
      return invalid(`answer.result must be "allow", "deny" or "ignore", got ${describe(answer.result)}`);
  }
}

function interpretAllow(answer: Readonly<Record<string, unknown>>): ServiceDecision {
  const { tenant, user, attrs, acl, expiresAt } = answer;
  if (tenant !== undefined && (typeof tenant !== 'string' || tenant === '')) {
    return invalid(`answer.tenant must be a non-empty string, got ${describe(tenant)}`);
  }
  if (user !== undefined && typeof user !== 'string') return invalid(`answer.user must be a string, got ${describe(user)}`);
  if (expiresAt !== undefined && (typeof expiresAt !== 'number' || !Number.isFinite(expiresAt) || expiresAt <= 0)) {
    return invalid(`answer.expiresAt must be a time in ms since the epoch, got ${describe(expiresAt)}`);
  }
  const out: Record<string, string> = {};
  if (attrs !== undefined) {
    if (!isRecord(attrs)) return invalid(`answer.attrs must be an object of strings, got ${describe(attrs)}`);
    for (const [key, value] of Object.entries(attrs)) {
      if (typeof value !== 'string') return invalid(`answer.attrs.${key} must be a string, got ${describe(value)}`);
      if (key === ACL_RULES_ATTR) return invalid(`answer.attrs must not carry ${ACL_RULES_ATTR}: send the rules as answer.acl`);
      // defineProperty: a key "__proto__" stays an ordinary attribute.
      Object.defineProperty(out, key, { value, enumerable: true, writable: true, configurable: true });
    }
  }
  if (acl !== undefined) {
    try {
      out[ACL_RULES_ATTR] = aclRulesAttr(parseAclRules(acl, 'answer.acl'));
    } catch (err) {
      return invalid((err as Error).message);
    }
  }
  return {
    kind: 'allow',
    tenantId: tenant,
    userId: user,
    attrs: Object.keys(out).length === 0 ? EMPTY_ATTRS : Object.freeze(out),
    expiresAt,
  };
}
