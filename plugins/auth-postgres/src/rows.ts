import { ACL_RULES_ATTR, parseAclRules, type AclRule } from '@bifro/spi';
import { AuthPostgresError } from './errors';
import { parsePasswordHash, type HashFormat, type PasswordHash } from './password-hash';

/** What a query answered: its rows and the names of its columns. */
export interface QueryRows {
  readonly rows: ReadonlyArray<Readonly<Record<string, unknown>>>;
  readonly columns: readonly string[];
}

/** A user as the auth query describes it. */
export interface UserRecord {
  readonly tenantId: string;
  readonly userId: string;
  /** Null when the row has no password (`password_hash` NULL): every login is refused. */
  readonly hash: PasswordHash | null;
  readonly attrs: Readonly<Record<string, string>>;
}

/** Required and optional columns of the auth query. */
export const AUTH_COLUMNS = { required: ['tenant', 'password_hash'], optional: ['user_id', 'attrs'] } as const;
/** Columns of the ACL query (other columns are ignored). */
export const ACL_COLUMNS = ['permission', 'action', 'topic'] as const;

function who(username: string): string {
  return JSON.stringify(username.length > 80 ? `${username.slice(0, 80)}...` : username);
}

function rowError(message: string, cause?: unknown): AuthPostgresError {
  return new AuthPostgresError('BIFRO_AUTH_POSTGRES_ROW_INVALID', message, cause === undefined ? undefined : { cause });
}

function kindOf(value: unknown): string {
  if (value === null) return 'null';
  if (Array.isArray(value)) return 'an array';
  if (Buffer.isBuffer(value)) return 'bytes (bytea)';
  return typeof value === 'object' ? 'an object' : typeof value;
}

function parseAttrs(value: unknown, username: string): Record<string, string> {
  if (value === undefined || value === null) return {};
  let object: unknown = value;
  if (typeof value === 'string') {
    try {
      object = JSON.parse(value);
    } catch {
      throw rowError(`authQuery row of user ${who(username)}: attrs is text but not JSON`);
    }
  }
  if (typeof object !== 'object' || object === null || Array.isArray(object)) {
    throw rowError(`authQuery row of user ${who(username)}: attrs must be a JSON object of strings, got ${kindOf(object)}`);
  }
  const attrs: Record<string, string> = {};
  for (const [key, v] of Object.entries(object as Record<string, unknown>)) {
    if (key === ACL_RULES_ATTR) {
      throw rowError(`authQuery row of user ${who(username)}: attrs.${ACL_RULES_ATTR} is reserved for the rules of aclQuery`);
    }
    if (typeof v !== 'string') throw rowError(`authQuery row of user ${who(username)}: attrs.${key} must be a string, got ${kindOf(v)}`);
    attrs[key] = v;
  }
  return attrs;
}

/**
 * The user the auth query found for `username`: undefined when it returned no row. Throws
 * `BIFRO_AUTH_POSTGRES_ROW_INVALID` naming the user and the column when the answer cannot be
 * used: more than one row, a missing column, an empty `tenant`, a hash in no allowed format,
 * `attrs` that are not an object of strings.
 */
export function userFromRows(result: QueryRows, username: string, formats: readonly HashFormat[]): UserRecord | undefined {
  if (result.rows.length === 0) return undefined;
  for (const column of AUTH_COLUMNS.required) {
    if (!result.columns.includes(column)) {
      throw rowError(
        `authQuery returned no column ${column} (it returned ${result.columns.join(', ') || 'none'}; it must return ${AUTH_COLUMNS.required.join(', ')} and may return ${AUTH_COLUMNS.optional.join(', ')})`,
      );
    }
  }
  if (result.rows.length > 1)
    throw rowError(`authQuery returned ${result.rows.length} rows for user ${who(username)}: it must return at most one`);
  const row = result.rows[0]!;
  const tenant = row.tenant;
  if (typeof tenant !== 'string' || tenant === '') {
    throw rowError(
      `authQuery row of user ${who(username)}: tenant must be a non-empty string, got ${typeof tenant === 'string' ? 'an empty string' : kindOf(tenant)}`,
    );
  }
  const userId = row.user_id ?? username;
  if (typeof userId !== 'string' || userId === '') {
    throw rowError(
      `authQuery row of user ${who(username)}: user_id must be a non-empty string or NULL, got ${typeof userId === 'string' ? 'an empty string' : kindOf(userId)}`,
    );
  }
  const stored = row.password_hash;
  let hash: PasswordHash | null = null;
  if (stored !== null && stored !== undefined) {
    if (typeof stored !== 'string')
      throw rowError(`authQuery row of user ${who(username)}: password_hash must be text, got ${kindOf(stored)}`);
    try {
      hash = parsePasswordHash(stored, formats);
    } catch (err) {
      throw rowError(`authQuery row of user ${who(username)}: password_hash: ${err instanceof Error ? err.message : String(err)}`);
    }
  }
  return { tenantId: tenant, userId, hash, attrs: parseAttrs(row.attrs, username) };
}

/**
 * The rules the ACL query returned for `username`, in row order. Throws
 * `BIFRO_AUTH_POSTGRES_ROW_INVALID` naming the user, the row (counted from 0) and the field of
 * the first row that is not a valid rule.
 */
export function rulesFromRows(result: QueryRows, username: string): AclRule[] {
  if (result.rows.length === 0) return [];
  for (const column of ACL_COLUMNS) {
    if (!result.columns.includes(column)) {
      throw rowError(
        `aclQuery returned no column ${column} (it returned ${result.columns.join(', ') || 'none'}; it must return ${ACL_COLUMNS.join(', ')})`,
      );
    }
  }
  const rules = result.rows.map((row) => ({ permission: row.permission, action: row.action, topic: row.topic }));
  try {
    return parseAclRules(rules, `aclQuery rows of user ${who(username)}: rows`);
  } catch (err) {
    throw rowError(err instanceof Error ? err.message : String(err));
  }
}
