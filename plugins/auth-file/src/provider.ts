import * as fs from 'node:fs';
import {
  ACL_RULES_ATTR,
  parseAclRules,
  type AuthProvider,
  type AuthRequest,
  type AuthResult,
  type ExtendedAuthRequest,
  type ExtendedAuthResult,
  type MaybePromise,
  type PluginLogger,
  FileWatcher,
  serialized,
} from '@bifro/spi';
import { certificateIdentity } from './certificate';
import { AuthFileError } from './errors';
import { randomBytes } from 'node:crypto';
import { SCRYPT_DEFAULTS, SCRYPT_KEY_BYTES, SCRYPT_SALT_BYTES, verifyPassword, type PasswordHash } from './hashes';
import type { AuthFileOptions } from './options';
import { parsePasswordFile, type AttrCheck, type PasswordEntry, type PasswordTable } from './password-file';
import {
  isScramMethod,
  mockScramCredentials,
  parseClientFirst,
  SCRAM_METHODS,
  serverFirst,
  verifyClientFinal,
  type ScramServerExchange,
} from './scram';
import { KdfLimiter, VerifyCache } from './verify-cache';

/** KDFs at once, and queued at most per tenant (see {@link KdfLimiter}). */
export const MAX_CONCURRENT_KDF = 2;
export const MAX_QUEUED_KDF_PER_TENANT = 64;
/** The KDF queue of unknown users whose login names no tenant of the file (one queue, however many names are made up). */
const UNKNOWN_TENANT_QUEUE = '';
/** Problems listed in one log line of an invalid file. */
const MAX_PROBLEMS_LOGGED = 10;

/** A `bifro.acl` attribute must be rules the SPI's parser accepts (JSON text of an array). */
export const checkAclAttr: AttrCheck = (name, value, where) => {
  if (name !== ACL_RULES_ATTR) return undefined;
  let json: unknown;
  try {
    json = JSON.parse(value);
  } catch (err) {
    return `not JSON: ${(err as Error).message}`;
  }
  try {
    parseAclRules(json, where);
    return undefined;
  } catch (err) {
    return (err as Error).message;
  }
};

let instances = 0;

/**
 * The auth provider over a password file: passwords (scrypt, mosquitto `$7$`) on CONNECT,
 * SCRAM-SHA-256/512 over MQTT 5 AUTH (start, continue, re-authentication), and, when configured,
 * the identity of a verified client certificate. The file is read at `init` and again whenever it
 * changes; an invalid version is logged (`file:line: problem`) and the previous users stay.
 */
export class FileAuthProvider implements AuthProvider {
  readonly authMethods: readonly string[];
  private table: PasswordTable | undefined;
  private lastText: string | undefined;
  private watcher: FileWatcher | undefined;
  /** One reload at a time; a change seen during one is read by the next. */
  private readonly reloads = serialized(
    () => this.reloadOnce(),
    () => this.closed,
  );
  private closed = false;
  private readonly cache: VerifyCache<PasswordEntry>;
  private readonly inFlight = new Map<string, Promise<boolean>>();
  private kdfCount = 0;
  private readonly limiter = new KdfLimiter(MAX_CONCURRENT_KDF, MAX_QUEUED_KDF_PER_TENANT);
  /** Checked against the password of an unknown user: a KDF of the cost most users of the file have (see {@link dummyHashOf}). */
  private dummyHash: PasswordHash = dummyHashOf([]);
  /** Tenants of the file (their own KDF queues). */
  private tenants: ReadonlySet<string> = new Set();
  /** Salts SCRAM answers for unknown users, so that the same name always gets the same made-up salt. */
  private readonly mockKey = randomBytes(32);
  /** Key of this instance's step in the broker's per-exchange state (the map is shared by the chain). */
  private readonly stateKey = `@bifro/plugin-auth-file#${++instances}`;

  constructor(
    readonly options: AuthFileOptions,
    private readonly logger: PluginLogger,
  ) {
    this.authMethods = options.scram ? [...SCRAM_METHODS] : [];
    this.cache = new VerifyCache(options.cacheTtlMs, options.cacheMaxEntries);
  }

  /** The password file, as an absolute path. */
  get file(): string {
    return this.options.file;
  }

  /** How many users the current table has (0 before init). */
  get userCount(): number {
    return this.table?.entries.length ?? 0;
  }

  /** How many password KDFs this instance ran (cache misses that were not shared with a check in flight). */
  get kdfRuns(): number {
    return this.kdfCount;
  }

  /** How many successful checks are remembered now. */
  get cachedVerifications(): number {
    return this.cache.size;
  }

  /** Reads the file (it must exist and be valid) and starts watching it. */
  async init(): Promise<void> {
    const watcher = new FileWatcher({
      file: this.options.file,
      pollMs: this.options.pollMs,
      debounceMs: this.options.debounceMs,
      watch: this.options.watch,
      logger: this.logger,
      onChange: () => void this.reload(),
    });
    let text: string;
    try {
      text = await fs.promises.readFile(this.options.file, 'utf8');
    } catch (err) {
      throw new AuthFileError(
        'BIFRO_AUTH_FILE_UNREADABLE',
        `cannot read the password file ${this.options.file}: ${(err as Error).message}`,
        {
          cause: err,
        },
      );
    }
    const parsed = this.parse(text);
    if (!parsed.ok)
      throw new AuthFileError('BIFRO_AUTH_FILE_INVALID', `the password file is invalid: ${this.describeProblems(parsed.problems)}`);
    this.install(parsed.table, text, false);
    if (this.closed) return;
    this.watcher = watcher;
    watcher.start();
  }

  close(): void {
    this.closed = true;
    this.watcher?.close();
    this.watcher = undefined;
    this.cache.clear();
  }

  authenticate(request: AuthRequest): MaybePromise<AuthResult> {
    const table = this.table;
    if (table === undefined) return { type: 'reject', reason: 'error', text: 'the password file is not loaded' };
    const certOptions = this.options.certificate;
    if (certOptions !== undefined && request.clientCertificate !== undefined) {
      const identity = certificateIdentity(request.clientCertificate, certOptions);
      if (identity.ok) {
        const entry = table.byLogin.get(`${identity.tenantId}/${identity.userId}`);
        if (entry === undefined && certOptions.requireListed)
          return this.unknown(`certificate user ${identity.userId} is not in the password file`);
        return { type: 'ok', tenantId: identity.tenantId, userId: identity.userId, attrs: { ...(entry?.attrs ?? {}) } };
      }
      this.logger.debug(`auth-file: no identity from the client certificate: ${identity.problem}`, { clientId: request.clientId });
    }
    const login = request.username;
    if (login === undefined || login === '') return { type: 'defer' };
    const entry = table.byLogin.get(login);
    const password = request.password;
    if (password === undefined || password.length === 0)
      return entry === undefined
        ? this.unknown(`unknown user ${login}`)
        : { type: 'reject', reason: 'badCredentials', text: 'no password' };
    const key = this.cache.keyOf(login, password);
    if (entry !== undefined && this.cache.get(key) === entry) return ok(entry);
    let pending = this.inFlight.get(key);
    if (pending === undefined) {
      // An unknown user costs the same KDF as a known one (against a made-up hash), in the queue of
      // the tenant its login names: neither the answer's time nor its code tells whether it exists.
      const hash = entry?.hash ?? this.dummyHash;
      const started = this.limiter.run(entry?.tenantId ?? this.queueOf(login), () => {
        this.kdfCount++;
        return verifyPassword(hash, password);
      });
      if (started === undefined) return { type: 'reject', reason: 'error', text: 'too many password checks under way' };
      const mine: Promise<boolean> = started.finally(() => {
        if (this.inFlight.get(key) === mine) this.inFlight.delete(key);
      });
      pending = mine;
      this.inFlight.set(key, mine);
    }
    const generation = this.table;
    return pending.then((valid) => {
      if (entry === undefined) return this.unknown(`unknown user ${login}`);
      if (!valid) return { type: 'reject', reason: 'badCredentials', text: 'wrong password' };
      if (this.table === generation) this.cache.set(key, entry);
      return ok(entry);
    });
  }

  extendedAuth(request: ExtendedAuthRequest): MaybePromise<ExtendedAuthResult> {
    const method = request.method;
    if (!this.options.scram || !isScramMethod(method)) return { type: 'defer' };
    if (request.phase === 'continue') {
      const exchange = request.state.get(this.stateKey) as { exchange: ScramServerExchange; entry: PasswordEntry | undefined } | undefined;
      if (exchange === undefined) return { type: 'defer' };
      request.state.delete(this.stateKey);
      const check = verifyClientFinal(exchange.exchange, request.data);
      const entry = exchange.entry;
      if (!check.ok)
        return { type: 'failed', reason: check.badProof ? 'badCredentials' : 'notAuthorized', text: `${method}: ${check.problem}` };
      if (entry === undefined) return { type: 'failed', reason: 'badCredentials', text: `${method}: wrong client proof` };
      return {
        type: 'success',
        tenantId: entry.tenantId,
        userId: entry.userId,
        attrs: { ...entry.attrs },
        data: Buffer.from(check.serverFinal, 'utf8'),
      };
    }
    const table = this.table;
    if (table === undefined) return { type: 'failed', reason: 'error', text: 'the password file is not loaded' };
    const first = parseClientFirst(request.data);
    if (typeof first === 'string') return { type: 'failed', reason: 'notAuthorized', text: `${method}: ${first}` };
    if (first.authzid !== undefined && first.authzid !== first.username)
      return { type: 'failed', reason: 'notAuthorized', text: `${method}: acting as another user (authzid) is not supported` };
    const entry = table.byLogin.get(first.username);
    const credentials = entry?.scram[method];
    if (entry === undefined || credentials === undefined) {
      if (this.options.unknownUser === 'defer') return { type: 'defer' };
      // Refusing at once would tell that the user has no credentials: the exchange goes on with
      // made-up ones (RFC 5802 § 5.1) and fails at the proof, as a wrong password does.
      const exchange = serverFirst(mockScramCredentials(method, first.username, this.mockKey), first);
      request.state.set(this.stateKey, { exchange, entry: undefined });
      return { type: 'continue', data: Buffer.from(exchange.serverFirst, 'utf8') };
    }
    const client = request.client;
    if (request.phase === 'reauth' && client !== undefined && (client.tenantId !== entry.tenantId || client.userId !== entry.userId))
      return { type: 'failed', reason: 'notAuthorized', text: `${method}: re-authentication must be as the connected user` };
    const exchange = serverFirst(credentials, first);
    request.state.set(this.stateKey, { exchange, entry });
    return { type: 'continue', data: Buffer.from(exchange.serverFirst, 'utf8') };
  }

  /** Reads the file again now (what a detected change does). Resolves when the new users apply, or the invalid file was logged. */
  reload(): Promise<void> {
    return this.reloads();
  }

  private async reloadOnce(): Promise<void> {
    let text: string;
    try {
      text = await fs.promises.readFile(this.options.file, 'utf8');
    } catch (err) {
      if (this.closed) return;
      const code = (err as NodeJS.ErrnoException).code;
      // A missing file between an editor's delete and write is normal: keep the users, say it once.
      if (this.lastText !== undefined) {
        this.logger.warn(`password file ${this.options.file} cannot be read (${code ?? (err as Error).message}); the previous users stay`, {
          file: this.options.file,
          err: (err as Error).message,
        });
        this.lastText = undefined;
      }
      return;
    }
    if (this.closed || text === this.lastText) return;
    const parsed = this.parse(text);
    if (!parsed.ok) {
      this.lastText = text;
      const message = `password file ${this.options.file} is invalid; the previous ${this.userCount} user(s) stay: ${this.describeProblems(parsed.problems)}`;
      this.logger.warn(message, {
        file: this.options.file,
        code: 'BIFRO_AUTH_FILE_INVALID',
        problems: parsed.problems.slice(0, MAX_PROBLEMS_LOGGED).map((p) => `${this.options.file}:${p.line}: ${p.message}`),
      });
      return;
    }
    this.install(parsed.table, text, true);
  }

  private parse(text: string): ReturnType<typeof parsePasswordFile> {
    return parsePasswordFile(text, { file: this.options.file, defaultTenant: this.options.tenant, checkAttr: checkAclAttr });
  }

  private install(table: PasswordTable, text: string, reload: boolean): void {
    this.table = table;
    this.dummyHash = dummyHashOf(table.entries);
    this.tenants = new Set(table.entries.map((e) => e.tenantId));
    this.lastText = text;
    this.cache.clear();
    this.inFlight.clear();
    const scram = table.entries.filter((e) => Object.keys(e.scram).length > 0).length;
    this.logger.info(
      `password file ${this.options.file} ${reload ? 'reloaded' : 'loaded'}: ${table.entries.length} user(s), ${scram} with SCRAM credentials`,
      {
        file: this.options.file,
        users: table.entries.length,
        scram,
      },
    );
    for (const warning of table.warnings) this.logger.warn(warning, { file: this.options.file });
  }

  private describeProblems(problems: readonly { line: number; message: string }[]): string {
    const shown = problems.slice(0, MAX_PROBLEMS_LOGGED).map((p) => `${this.options.file}:${p.line}: ${p.message}`);
    const more = problems.length > MAX_PROBLEMS_LOGGED ? `; and ${problems.length - MAX_PROBLEMS_LOGGED} more` : '';
    return `${shown.join('; ')}${more}`;
  }

  private unknown(why: string): AuthResult {
    if (this.options.unknownUser === 'defer') return { type: 'defer' };
    return { type: 'reject', reason: 'badCredentials', text: why };
  }

  /** The KDF queue of an unknown login: the tenant it names when the file has it, else the one queue of made-up tenants. */
  private queueOf(login: string): string {
    const slash = login.indexOf('/');
    const tenant = slash < 0 ? this.options.tenant : login.slice(0, slash);
    return this.tenants.has(tenant) ? tenant : UNKNOWN_TENANT_QUEUE;
  }
}

/**
 * A hash nobody's password matches (random key), with the parameters most entries of the file have
 * (scrypt's ln/r/p, or $7$ iterations), so that checking it costs what checking a real user does.
 */
export function dummyHashOf(entries: readonly PasswordEntry[]): PasswordHash {
  const counts = new Map<string, { hash: PasswordHash; n: number }>();
  for (const { hash } of entries) {
    const shape =
      hash.scheme === 'scrypt' ? `s${hash.ln},${hash.r},${hash.p},${hash.key.length}` : `p${hash.iterations},${hash.key.length}`;
    const seen = counts.get(shape);
    if (seen === undefined) counts.set(shape, { hash, n: 1 });
    else seen.n++;
  }
  let common: PasswordHash | undefined;
  let most = 0;
  for (const { hash, n } of counts.values()) if (n > most) [common, most] = [hash, n];
  const salt = randomBytes(SCRYPT_SALT_BYTES);
  if (common === undefined) return { scheme: 'scrypt', ...SCRYPT_DEFAULTS, salt, key: randomBytes(SCRYPT_KEY_BYTES) };
  return { ...common, salt, key: randomBytes(common.key.length) };
}

function ok(entry: PasswordEntry): AuthResult {
  return { type: 'ok', tenantId: entry.tenantId, userId: entry.userId, attrs: { ...entry.attrs } };
}
