import { randomBytes } from 'node:crypto';
import * as fs from 'node:fs';
import * as path from 'node:path';
import { AuthFileError } from './errors';
import { hashPassword } from './hashes';
import { DEFAULT_TENANT } from './options';
import {
  attrNameProblem,
  formatEntryLine,
  lineIdentity,
  parseLine,
  splitLines,
  tenantNameProblem,
  userNameProblem,
  type PasswordEntry,
} from './password-file';
import {
  deriveScramCredentials,
  SCRAM_MAX_ITERATIONS,
  SCRAM_METHODS,
  SCRAM_MIN_ITERATIONS,
  type ScramCredentials,
  type ScramMethod,
} from './scram';

/**
 * What `bifro passwd` does to a password file, as a library: the core CLI loads this package at
 * run time and calls {@link precheckPasswd} (before asking for a password) and {@link applyPasswd}.
 * Other lines of the file (comments, other users, even invalid lines) are kept as they are.
 */

/** One `bifro passwd` run. */
export interface PasswdRequest {
  /** The password file (absolute, or relative to the process' cwd). */
  readonly file: string;
  readonly user: string;
  /** The tenant written on the line; absent: a line without tenant (the plugin's `tenant` option applies). */
  readonly tenant?: string;
  /** `-c`: create the file (refused when it exists, unless `force`). */
  readonly create?: boolean;
  /** `--force`: with `-c`, replace an existing file. */
  readonly force?: boolean;
  /** `-D`: delete the user. */
  readonly delete?: boolean;
  /** `--scram`: also write SCRAM-SHA-256 and SCRAM-SHA-512 credentials (kept up to date when the line had them). */
  readonly scram?: boolean;
  /** `--scram-iterations N` (default 4096). */
  readonly scramIterations?: number;
  /** `--attr name=value` sets an attribute; `null` (`--attr name`) removes it. Others are kept. */
  readonly attrs?: Readonly<Record<string, string | null>>;
}

/** What {@link applyPasswd} did. */
export interface PasswdOutcome {
  readonly action: 'created' | 'added' | 'updated' | 'deleted';
  readonly file: string;
  readonly user: string;
  readonly tenant?: string;
  /** Lines worth telling about (invalid lines left as they are), `file:line: problem`. */
  readonly notes: readonly string[];
}

const HEADER = [
  '# bifro password file (@bifro/plugin-auth-file): [tenant:]user:$scrypt$...[:scram-sha-256=...][:name=value]...',
  '# Edit with `bifro passwd FILE USER`; mosquitto lines (user:$7$...) belong to the plugin option `tenant`.',
];

function describe(req: PasswdRequest): string {
  return req.tenant === undefined ? `user ${req.user}` : `user ${req.user} of tenant ${req.tenant}`;
}

function checkNames(req: PasswdRequest): void {
  const userProblem = userNameProblem(req.user);
  if (userProblem !== undefined) throw new AuthFileError('BIFRO_AUTH_FILE_INVALID', `${userProblem}: ${JSON.stringify(req.user)}`);
  const slash = req.delete === true ? undefined : defaultTenantSlashProblem(req);
  if (slash !== undefined) throw new AuthFileError('BIFRO_AUTH_FILE_INVALID', slash);
  if (req.tenant !== undefined) {
    const problem = tenantNameProblem(req.tenant);
    if (problem !== undefined) throw new AuthFileError('BIFRO_AUTH_FILE_INVALID', `${problem}: ${JSON.stringify(req.tenant)}`);
  }
  for (const name of Object.keys(req.attrs ?? {})) {
    const problem = attrNameProblem(name);
    if (problem !== undefined) throw new AuthFileError('BIFRO_AUTH_FILE_INVALID', problem);
  }
  const it = req.scramIterations;
  if (it !== undefined && (!Number.isInteger(it) || it < SCRAM_MIN_ITERATIONS || it > SCRAM_MAX_ITERATIONS))
    throw new AuthFileError(
      'BIFRO_AUTH_FILE_INVALID',
      `SCRAM iterations must be an integer from ${SCRAM_MIN_ITERATIONS} to ${SCRAM_MAX_ITERATIONS}, got ${it}`,
    );
}

/**
 * A user of the default tenant logs in by its bare name as well as by `default/user`, and a login
 * `acme/bob` is user bob of tenant acme: a default-tenant user named `acme/bob` would answer to
 * the same login, and the plugin refuses such a file when it loads it (the login is ambiguous),
 * so the broker would not start. Refused here, when it is written, rather than at the next start.
 * Deleting such a line (-D) stays possible. A line without tenant belongs to the plugin's
 * `tenant` option, `default` unless set.
 */
function defaultTenantSlashProblem(req: PasswdRequest): string | undefined {
  if (!req.user.includes('/') || (req.tenant !== undefined && req.tenant !== DEFAULT_TENANT)) return undefined;
  const slash = req.user.indexOf('/');
  const [tenant, user] = [req.user.slice(0, slash), req.user.slice(slash + 1)];
  const whose = req.tenant === undefined ? 'a user of the default tenant (a line without --tenant)' : `a user of tenant ${DEFAULT_TENANT}`;
  return (
    `user name ${JSON.stringify(req.user)} contains "/": ${whose} also logs in by its bare name, but the login ` +
    `${req.user} names user ${JSON.stringify(user)} of tenant ${JSON.stringify(tenant)}: the two are ambiguous, and the plugin ` +
    `refuses a file holding both (the broker would not start). For user ${user} of tenant ${tenant}, run ` +
    `\`bifro passwd --tenant ${tenant} FILE ${user}\`; otherwise choose a user name without "/"`
  );
}

/** The file's lines; undefined when it does not exist. */
async function readLines(file: string): Promise<string[] | undefined> {
  try {
    return splitLines(await fs.promises.readFile(file, 'utf8'));
  } catch (err) {
    const code = (err as NodeJS.ErrnoException).code;
    if (code === 'ENOENT') return undefined;
    throw new AuthFileError('BIFRO_AUTH_FILE_UNREADABLE', `cannot read ${file}: ${(err as Error).message}`, { cause: err });
  }
}

function matches(raw: string, req: PasswdRequest): boolean {
  const id = lineIdentity(raw);
  return id !== undefined && id.user === req.user && id.tenant === req.tenant;
}

/**
 * Checks what can be checked before a password is asked: names, the file exists (or `create`),
 * `create` does not overwrite (unless `force`), the user to delete is there.
 */
export async function precheckPasswd(req: PasswdRequest): Promise<void> {
  checkNames(req);
  const file = path.resolve(req.file);
  if (req.create === true && req.delete === true) throw new AuthFileError('BIFRO_AUTH_FILE_INVALID', '-c and -D cannot be used together');
  const lines = await readLines(file);
  if (lines === undefined) {
    if (req.create !== true) throw new AuthFileError('BIFRO_AUTH_FILE_NOT_FOUND', `${file} does not exist (add -c to create it)`);
    return;
  }
  if (req.create === true && req.force !== true)
    throw new AuthFileError(
      'BIFRO_AUTH_FILE_EXISTS',
      `${file} exists; -c would replace all of its users (drop -c to change it, or add --force)`,
    );
  if (req.delete === true && !lines.some((l) => matches(l, req)))
    throw new AuthFileError('BIFRO_AUTH_FILE_USER_NOT_FOUND', `${file} has no ${describe(req)}`);
}

/** Applies the request: `password` is needed unless deleting. Writes the file atomically (temp file + rename, mode 0600). */
export async function applyPasswd(req: PasswdRequest, password?: string): Promise<PasswdOutcome> {
  await precheckPasswd(req);
  const file = path.resolve(req.file);
  const existing = req.create === true ? undefined : await readLines(file);
  const lines = existing ?? [...HEADER];
  const index = lines.findIndex((l) => matches(l, req));
  const notes: string[] = [];
  let action: PasswdOutcome['action'];
  if (req.delete === true) {
    lines.splice(index, 1);
    action = 'deleted';
  } else {
    if (password === undefined || password === '') throw new AuthFileError('BIFRO_AUTH_FILE_PASSWORD_INVALID', 'the password is empty');
    const previous = index < 0 ? undefined : parseLine(lines[index]!, index + 1, req.tenant ?? 'default');
    const old: PasswordEntry | undefined = previous?.kind === 'entry' ? previous.entry : undefined;
    const secret = Buffer.from(password, 'utf8');
    const scram: Partial<Record<ScramMethod, ScramCredentials>> = {};
    for (const method of SCRAM_METHODS) {
      const had = old?.scram[method];
      if (req.scram === true || had !== undefined)
        scram[method] = await deriveScramCredentials(method, secret, req.scramIterations ?? had?.iterations);
    }
    const attrs: Record<string, string> = { ...(old?.attrs ?? {}) };
    for (const [name, value] of Object.entries(req.attrs ?? {})) {
      if (value === null) delete attrs[name];
      else attrs[name] = value;
    }
    const line = formatEntryLine({
      ...(req.tenant === undefined ? {} : { tenant: req.tenant }),
      user: req.user,
      hash: await hashPassword(secret),
      scram,
      attrs,
    });
    if (index < 0) {
      lines.push(line);
      action = existing === undefined ? 'created' : 'added';
    } else {
      lines[index] = line;
      action = 'updated';
    }
  }
  for (let i = 0; i < lines.length; i++) {
    const result = parseLine(lines[i]!, i + 1, req.tenant ?? 'default');
    if (result.kind === 'error') notes.push(`${file}:${i + 1}: ${result.message} (left as it is)`);
  }
  await writeFileAtomic(file, lines.length === 0 ? '' : `${lines.join('\n')}\n`);
  return { action, file, user: req.user, ...(req.tenant === undefined ? {} : { tenant: req.tenant }), notes };
}

/** Writes `text` to `file` through a temporary file in the same folder, synced, then renamed over it; mode 0600. */
export async function writeFileAtomic(file: string, text: string): Promise<void> {
  const tmp = path.join(path.dirname(file), `.${path.basename(file)}.${process.pid}.${randomBytes(4).toString('hex')}.tmp`);
  try {
    const handle = await fs.promises.open(tmp, 'wx', 0o600);
    try {
      await handle.writeFile(text, 'utf8');
      await handle.sync();
    } finally {
      await handle.close();
    }
    await fs.promises.chmod(tmp, 0o600);
    await fs.promises.rename(tmp, file);
  } catch (err) {
    await fs.promises.rm(tmp, { force: true }).catch(() => undefined);
    throw new AuthFileError('BIFRO_AUTH_FILE_WRITE_FAILED', `cannot write ${file}: ${(err as Error).message}`, { cause: err });
  }
}
