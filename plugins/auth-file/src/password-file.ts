import { formatHash, parseHash, PBKDF2_WEAK_ITERATIONS, type PasswordHash } from './hashes';
import {
  formatScramCredentials,
  parseScramCredentials,
  SCRAM_FIELD,
  SCRAM_METHODS,
  type ScramCredentials,
  type ScramMethod,
} from './scram';

/**
 * The password file: one user per line,
 *
 *     [<tenant>:]<user>:<hash>[:<field>=<value>]...
 *
 * `#` starts a comment line; blank lines are ignored. The hash is `$scrypt$...` (new entries) or
 * mosquitto's `$7$...`, so a mosquitto password file (`user:$7$...`) is a valid file whose users
 * belong to the default tenant. Fields after the hash are SCRAM credentials
 * (`scram-sha-256=<iterations>$<salt>$<StoredKey>$<ServerKey>`, `scram-sha-512=...`) and
 * attributes (`role=admin`), percent-encoded where a value holds `%`, `:`, spaces or control
 * characters. See the README for the whole format.
 */

/** One user of the file. */
export interface PasswordEntry {
  /** 1-based line number. */
  readonly line: number;
  readonly tenantId: string;
  /** Whether the line names its tenant (else it is the default tenant, `options.tenant`). */
  readonly explicitTenant: boolean;
  readonly userId: string;
  readonly hash: PasswordHash;
  readonly scram: Readonly<Partial<Record<ScramMethod, ScramCredentials>>>;
  readonly attrs: Readonly<Record<string, string>>;
}

/** A line that is not a valid entry. */
export interface LineProblem {
  readonly line: number;
  readonly message: string;
}

/** The users of a valid file. */
export interface PasswordTable {
  readonly entries: readonly PasswordEntry[];
  /** By login name: `tenant/user` for every entry, and the bare `user` for entries of the default tenant. */
  readonly byLogin: ReadonlyMap<string, PasswordEntry>;
  /** Things to warn about (weak mosquitto iteration counts), each `file:line: ...`. */
  readonly warnings: readonly string[];
}

export type TableParse =
  { readonly ok: true; readonly table: PasswordTable } | { readonly ok: false; readonly problems: readonly LineProblem[] };

/** A check an attribute value must pass when it is read (the ACL rules attribute); a string is the problem. */
export type AttrCheck = (name: string, value: string, where: string) => string | undefined;

/** The identity part of a line (before the hash), when it can be read. */
export interface LineIdentity {
  readonly tenant?: string;
  readonly user: string;
}

/** The result of reading one line. */
export type LineParse =
  | { readonly kind: 'blank' }
  | { readonly kind: 'entry'; readonly entry: PasswordEntry }
  | { readonly kind: 'error'; readonly message: string; readonly identity?: LineIdentity };

const ATTR_NAME = /^[A-Za-z0-9_][A-Za-z0-9_.-]*$/;
// eslint-disable-next-line no-control-regex
const CONTROL = /[\x00-\x1f\x7f]/;
export const MAX_NAME_LENGTH = 1024;

/** Why `user` cannot be a user name of the file, or undefined. */
export function userNameProblem(user: string): string | undefined {
  if (user === '') return 'the user name is empty';
  if (user.length > MAX_NAME_LENGTH) return `the user name is longer than ${MAX_NAME_LENGTH} characters`;
  if (user.includes(':')) return 'a user name cannot contain ":"';
  if (CONTROL.test(user)) return 'a user name cannot contain control characters';
  if (user !== user.trim()) return 'a user name cannot start or end with white space';
  if (user.startsWith('$') || user.startsWith('#')) return 'a user name cannot start with "$" or "#"';
  return undefined;
}

/** Why `tenant` cannot be a tenant of the file, or undefined. */
export function tenantNameProblem(tenant: string): string | undefined {
  if (tenant === '') return 'the tenant is empty';
  if (tenant.length > MAX_NAME_LENGTH) return `the tenant is longer than ${MAX_NAME_LENGTH} characters`;
  if (tenant.includes(':') || tenant.includes('/')) return 'a tenant cannot contain ":" or "/"';
  if (CONTROL.test(tenant)) return 'a tenant cannot contain control characters';
  if (tenant !== tenant.trim()) return 'a tenant cannot start or end with white space';
  if (tenant.startsWith('$') || tenant.startsWith('#')) return 'a tenant cannot start with "$" or "#"';
  return undefined;
}

/** Why `name` cannot be an attribute name, or undefined. */
export function attrNameProblem(name: string): string | undefined {
  if (!ATTR_NAME.test(name)) return `attribute name "${name}" must be letters, digits, "_", "." or "-"`;
  if (name.startsWith('scram-')) return `attribute name "${name}" is reserved (scram-sha-256 and scram-sha-512 hold SCRAM credentials)`;
  return undefined;
}

/** Percent-encodes what a field value cannot hold as is: `%`, `:`, white space and control characters. */
export function encodeFieldValue(value: string): string {
  // eslint-disable-next-line no-control-regex
  return value.replace(/[%:\s\x00-\x1f\x7f]/g, (c) =>
    [...Buffer.from(c, 'utf8')].map((b) => `%${b.toString(16).toUpperCase().padStart(2, '0')}`).join(''),
  );
}

function decodeFieldValue(value: string): string | undefined {
  if (!value.includes('%')) return value;
  if (/%(?![0-9A-Fa-f]{2})/.test(value)) return undefined;
  try {
    return decodeURIComponent(value);
  } catch {
    return undefined;
  }
}

/** Reads the tenant and user of a line without checking the rest (for `bifro passwd` on a file with bad lines). */
export function lineIdentity(raw: string): LineIdentity | undefined {
  const text = raw.trim();
  if (text === '' || text.startsWith('#')) return undefined;
  const fields = text.split(':');
  const at = fields.findIndex((f) => f.startsWith('$'));
  const names = at < 0 ? fields.slice(0, fields.length >= 3 ? 2 : 1) : fields.slice(0, at);
  if (names.length === 1 && userNameProblem(names[0]!) === undefined) return { user: names[0]! };
  if (names.length === 2 && tenantNameProblem(names[0]!) === undefined && userNameProblem(names[1]!) === undefined)
    return { tenant: names[0]!, user: names[1]! };
  return undefined;
}

/** Reads one line (1-based `lineNo`); `defaultTenant` is the tenant of lines that name none. */
export function parseLine(raw: string, lineNo: number, defaultTenant: string, checkAttr?: AttrCheck, where = ''): LineParse {
  const text = raw.trim();
  if (text === '' || text.startsWith('#')) return { kind: 'blank' };
  const identity = lineIdentity(text);
  const error = (message: string): LineParse => ({ kind: 'error', message, ...(identity === undefined ? {} : { identity }) });
  const fields = text.split(':');
  const at = fields.findIndex((f) => f.startsWith('$'));
  if (at < 0) {
    if (fields.length === 1) return error('no password hash: expected [tenant:]user:$scrypt$... or user:$7$...');
    return error(
      'the password is not hashed (plain text is refused): hash it with `bifro passwd`, or mosquitto_passwd -U for a whole mosquitto file',
    );
  }
  if (at === 0) return error('the line starts with a hash: expected [tenant:]user: before it');
  if (at > 2) return error('too many fields before the hash: expected [tenant:]user:<hash>');
  const tenantField = at === 2 ? fields[0]! : undefined;
  const user = fields[at - 1]!;
  if (tenantField !== undefined) {
    const problem = tenantNameProblem(tenantField);
    if (problem !== undefined) return error(problem);
  }
  const userProblem = userNameProblem(user);
  if (userProblem !== undefined) return error(userProblem);
  const parsed = parseHash(fields[at]!);
  if (!parsed.ok) return error(`user ${user}: ${parsed.problem}`);
  const scram: Partial<Record<ScramMethod, ScramCredentials>> = {};
  const attrs: Record<string, string> = {};
  for (const field of fields.slice(at + 1)) {
    const eq = field.indexOf('=');
    if (eq <= 0) return error(`field "${field}" after the hash must be <name>=<value>`);
    const name = field.slice(0, eq);
    const value = field.slice(eq + 1);
    const method = SCRAM_METHODS.find((m) => SCRAM_FIELD[m] === name);
    if (method !== undefined) {
      if (scram[method] !== undefined) return error(`${name} given twice`);
      const creds = parseScramCredentials(method, value);
      if (typeof creds === 'string') return error(`user ${user}: ${creds}`);
      scram[method] = creds;
      continue;
    }
    const nameProblem = attrNameProblem(name);
    if (nameProblem !== undefined) return error(nameProblem);
    if (Object.prototype.hasOwnProperty.call(attrs, name)) return error(`attribute ${name} given twice`);
    const decoded = decodeFieldValue(value);
    if (decoded === undefined) return error(`attribute ${name}: bad percent-encoding in "${value}"`);
    const attrProblem = checkAttr?.(name, decoded, `${where}${lineNo}`);
    if (attrProblem !== undefined) return error(`attribute ${name}: ${attrProblem}`);
    attrs[name] = decoded;
  }
  return {
    kind: 'entry',
    entry: {
      line: lineNo,
      tenantId: tenantField ?? defaultTenant,
      explicitTenant: tenantField !== undefined,
      userId: user,
      hash: parsed.hash,
      scram,
      attrs,
    },
  };
}

/** Splits a file's text into lines (LF or CRLF, a leading BOM dropped). */
export function splitLines(text: string): string[] {
  const body = text.startsWith('\uFEFF') ? text.slice(1) : text;
  const lines = body.split(/\r?\n/);
  if (lines.length > 0 && lines[lines.length - 1] === '') lines.pop();
  return lines;
}

/** The login names an entry answers to. */
export function loginNames(entry: { tenantId: string; userId: string }, defaultTenant: string): string[] {
  const qualified = `${entry.tenantId}/${entry.userId}`;
  return entry.tenantId === defaultTenant ? [qualified, entry.userId] : [qualified];
}

/**
 * Reads a whole file. Valid only when every line is: a problem anywhere makes the file invalid
 * (the caller keeps the users it had), and every problem is reported with its line number.
 */
export function parsePasswordFile(
  text: string,
  options: { readonly file: string; readonly defaultTenant: string; readonly checkAttr?: AttrCheck },
): TableParse {
  const problems: LineProblem[] = [];
  const entries: PasswordEntry[] = [];
  const byIdentity = new Map<string, PasswordEntry>();
  const byLogin = new Map<string, PasswordEntry>();
  const warnings: string[] = [];
  const lines = splitLines(text);
  for (let i = 0; i < lines.length; i++) {
    const result = parseLine(lines[i]!, i + 1, options.defaultTenant, options.checkAttr, `${options.file}:`);
    if (result.kind === 'blank') continue;
    if (result.kind === 'error') {
      problems.push({ line: i + 1, message: result.message });
      continue;
    }
    const entry = result.entry;
    const identity = `${entry.tenantId}\u0000${entry.userId}`;
    const twin = byIdentity.get(identity);
    if (twin !== undefined) {
      problems.push({ line: entry.line, message: `user ${entry.userId} of tenant ${entry.tenantId} is already on line ${twin.line}` });
      continue;
    }
    const clash = loginNames(entry, options.defaultTenant)
      .map((n) => [n, byLogin.get(n)] as const)
      .find(([, e]) => e !== undefined);
    if (clash !== undefined) {
      problems.push({ line: entry.line, message: `login name ${clash[0]} is ambiguous: line ${clash[1]!.line} answers to it too` });
      continue;
    }
    byIdentity.set(identity, entry);
    for (const name of loginNames(entry, options.defaultTenant)) byLogin.set(name, entry);
    entries.push(entry);
    if (entry.hash.scheme === 'pbkdf2-sha512' && entry.hash.iterations < PBKDF2_WEAK_ITERATIONS)
      warnings.push(
        `${options.file}:${entry.line}: user ${entry.userId} has a $7$ hash of only ${entry.hash.iterations} PBKDF2 iterations (mosquitto's default is 101); set the password again with \`bifro passwd\` for a scrypt hash`,
      );
  }
  if (problems.length > 0) return { ok: false, problems };
  return { ok: true, table: { entries, byLogin, warnings } };
}

/** What a line is made of. */
export interface EntryFields {
  readonly tenant?: string;
  readonly user: string;
  readonly hash: PasswordHash;
  readonly scram?: Readonly<Partial<Record<ScramMethod, ScramCredentials>>>;
  readonly attrs?: Readonly<Record<string, string>>;
}

/** The line of an entry, as `bifro passwd` writes it. */
export function formatEntryLine(fields: EntryFields): string {
  const parts: string[] = [];
  if (fields.tenant !== undefined) parts.push(fields.tenant);
  parts.push(fields.user, formatHash(fields.hash));
  for (const method of SCRAM_METHODS) {
    const creds = fields.scram?.[method];
    if (creds !== undefined) parts.push(`${SCRAM_FIELD[method]}=${formatScramCredentials(creds)}`);
  }
  for (const [name, value] of Object.entries(fields.attrs ?? {})) parts.push(`${name}=${encodeFieldValue(value)}`);
  return parts.join(':');
}
