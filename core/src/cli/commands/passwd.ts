import path from 'node:path';
import { parseArgs } from 'node:util';
import { BifroError, describeError, registerPluginErrors, type ErrorSpec } from '../../base/errors';
import { UsageError } from '../cli-errors';
import { EXIT, type CliIo } from '../cli-io';

/**
 * `bifro passwd`: creates and edits the password file of @bifro/plugin-auth-file, like
 * mosquitto_passwd. The file format and the hashing live in the plugin package; core imports no
 * plugin statically, so the package is resolved from core's folder and loaded at run time.
 *
 *   bifro passwd [-c [--force]] [--tenant T] [--password-stdin] [--scram] [--attr NAME=VALUE]... FILE USER
 *   bifro passwd -D [--tenant T] FILE USER
 *
 * The password is read from the terminal without echo (asked twice), or as one line of standard
 * input with --password-stdin; never from the command line.
 */

/** The package that owns the password file format. */
export const AUTH_FILE_PACKAGE = '@bifro/plugin-auth-file';

/** The request the plugin's `passwordFile` API takes (its `PasswdRequest`, restated: core names no plugin type). */
interface PasswdRequest {
  readonly file: string;
  readonly user: string;
  readonly tenant?: string;
  readonly create?: boolean;
  readonly force?: boolean;
  readonly delete?: boolean;
  readonly scram?: boolean;
  readonly scramIterations?: number;
  readonly attrs?: Readonly<Record<string, string | null>>;
}

interface PasswdOutcome {
  readonly action: 'created' | 'added' | 'updated' | 'deleted';
  readonly file: string;
  readonly notes: readonly string[];
}

interface PasswordFileApi {
  precheck(req: PasswdRequest): Promise<void>;
  apply(req: PasswdRequest, password?: string): Promise<PasswdOutcome>;
}

/** Where the password comes from. main.ts passes the process's stdin and stderr; tests pass their own. */
export interface PasswdInput {
  readonly stdin: NodeJS.ReadableStream & { readonly isTTY?: boolean; setRawMode?(mode: boolean): unknown };
  /** Where prompts go (stderr, so that stdout stays for the result). */
  readonly prompt: NodeJS.WritableStream;
}

/** The longest password line read from standard input. */
export const MAX_PASSWORD_BYTES = 4096;

const OPTIONS = {
  create: { type: 'boolean', short: 'c' },
  delete: { type: 'boolean', short: 'D' },
  force: { type: 'boolean' },
  tenant: { type: 'string' },
  'password-stdin': { type: 'boolean' },
  scram: { type: 'boolean' },
  'scram-iterations': { type: 'string' },
  attr: { type: 'string', multiple: true },
  help: { type: 'boolean', short: 'h' },
} as const;

function passwordError(message: string): BifroError {
  return new BifroError('BIFRO_AUTH_FILE_PASSWORD_INVALID', message);
}

/** Loads the plugin's password-file API from core's own dependencies. */
export function loadPasswordFileApi(coreDir: string = path.resolve(__dirname, '..', '..', '..')): PasswordFileApi {
  let mod: unknown;
  try {
    const entry = require.resolve(AUTH_FILE_PACKAGE, { paths: [coreDir] });
    // The package is a run-time dependency of core, loaded by name: a dynamic require is the point here.
    // eslint-disable-next-line @typescript-eslint/no-require-imports
    mod = require(entry) as unknown;
  } catch (err) {
    throw new BifroError(
      'BIFRO_PLUGIN_NOT_FOUND',
      `bifro passwd needs ${AUTH_FILE_PACKAGE} (a dependency of @bifro/core): it cannot be loaded from ${coreDir}: ${describeError(err)}`,
      { plugin: AUTH_FILE_PACKAGE },
    );
  }
  const m = (mod ?? {}) as { passwordFile?: Partial<PasswordFileApi>; default?: { errors?: Readonly<Record<string, ErrorSpec>> } };
  const api = m.passwordFile;
  if (typeof api?.precheck !== 'function' || typeof api.apply !== 'function')
    throw new BifroError(
      'BIFRO_PLUGIN_SHAPE_INVALID',
      `${AUTH_FILE_PACKAGE} has no passwordFile API (precheck, apply): is it an older version?`,
      {
        plugin: AUTH_FILE_PACKAGE,
      },
    );
  if (m.default?.errors !== undefined) registerPluginErrors(AUTH_FILE_PACKAGE, m.default.errors);
  return api as PasswordFileApi;
}

/** A plugin error (message `CODE: ...`, `code` set) as the CLI's coded error; anything else unchanged. */
function coded(err: unknown): unknown {
  const code = (err as { code?: unknown } | undefined)?.code;
  if (!(err instanceof Error) || err instanceof BifroError || typeof code !== 'string' || !err.message.startsWith(`${code}: `)) return err;
  return new BifroError(code, err.message.slice(code.length + 2), {}, { cause: err });
}

function parsePasswdArgs(argv: readonly string[]) {
  try {
    return parseArgs({ args: [...argv], options: OPTIONS, allowPositionals: true, strict: true });
  } catch (err) {
    const quoted = /'([^']+)'/.exec(describeError(err))?.[1];
    const code = (err as NodeJS.ErrnoException).code;
    if (code === 'ERR_PARSE_ARGS_UNKNOWN_OPTION' && quoted !== undefined) throw new UsageError(`bifro passwd: unknown option "${quoted}"`);
    if (code === 'ERR_PARSE_ARGS_INVALID_OPTION_VALUE' && quoted !== undefined)
      throw new UsageError(`bifro passwd: option ${quoted} needs a value`);
    throw new UsageError(`bifro passwd: ${describeError(err).split(/\.\s|\n/)[0]}`);
  }
}

/** `bifro passwd ...` (argv after the command name). */
export async function passwdCommand(
  argv: readonly string[],
  io: CliIo,
  input: PasswdInput = { stdin: process.stdin, prompt: process.stderr },
  usage = '',
): Promise<number> {
  const { values, positionals } = parsePasswdArgs(argv);
  if (values.help === true) {
    io.out(usage);
    return EXIT.OK;
  }
  if (positionals.length !== 2) throw new UsageError(`bifro passwd: expected FILE and USER, got ${positionals.length} argument(s)`);
  if (values.create === true && values.delete === true) throw new UsageError('bifro passwd: -c and -D cannot be used together');
  if (values.delete === true && (values['password-stdin'] === true || values.scram === true || values.attr !== undefined))
    throw new UsageError('bifro passwd: -D takes no password, --scram or --attr');
  if (values.force === true && values.create !== true) throw new UsageError('bifro passwd: --force only goes with -c');
  let scramIterations: number | undefined;
  const iterationsText = values['scram-iterations'];
  if (iterationsText !== undefined) {
    if (!/^\d{1,8}$/.test(iterationsText))
      throw new UsageError(`bifro passwd: --scram-iterations: expected an integer, got ${JSON.stringify(iterationsText)}`);
    scramIterations = Number(iterationsText);
  }
  let attrs: Record<string, string | null> | undefined;
  for (const item of values.attr ?? []) {
    attrs ??= {};
    const eq = item.indexOf('=');
    if (eq === 0) throw new UsageError(`bifro passwd: --attr ${JSON.stringify(item)}: expected NAME=VALUE (or NAME to remove it)`);
    if (eq < 0) attrs[item] = null;
    else attrs[item.slice(0, eq)] = item.slice(eq + 1);
  }
  const tenant = values.tenant;
  if (tenant !== undefined && tenant.trim() === '') throw new UsageError('bifro passwd: --tenant needs a value');
  const request: PasswdRequest = {
    file: path.resolve(io.cwd, positionals[0]!),
    user: positionals[1]!,
    ...(tenant === undefined ? {} : { tenant }),
    create: values.create === true,
    force: values.force === true,
    delete: values.delete === true,
    scram: values.scram === true,
    ...(scramIterations === undefined ? {} : { scramIterations }),
    ...(attrs === undefined ? {} : { attrs }),
  };

  const api = loadPasswordFileApi();
  try {
    await api.precheck(request);
    let password: string | undefined;
    if (request.delete !== true)
      password = values['password-stdin'] === true ? await readPasswordLine(input.stdin) : await promptTwice(input);
    const outcome = await api.apply(request, password);
    for (const note of outcome.notes) io.err(`note: ${note}`);
    const who = tenant === undefined ? `user ${request.user}` : `user ${request.user} (tenant ${tenant})`;
    const what = { created: `created ${outcome.file} with`, added: 'added', updated: 'changed the password of', deleted: 'deleted' }[
      outcome.action
    ];
    io.out(`${what} ${who}${outcome.action === 'created' ? '' : ` in ${outcome.file}`}`);
    return EXIT.OK;
  } catch (err) {
    throw coded(err);
  }
}

/** One line of standard input (the password of --password-stdin), without its line ending. */
export function readPasswordLine(stdin: NodeJS.ReadableStream): Promise<string> {
  return new Promise((resolve, reject) => {
    const chunks: Buffer[] = [];
    let size = 0;
    const done = (err: BifroError | undefined, value?: string): void => {
      stdin.off('data', onData);
      stdin.off('end', onEnd);
      stdin.off('error', onError);
      stdin.pause();
      if (err !== undefined) reject(err);
      else resolve(value!);
    };
    const finish = (): void => {
      const text = Buffer.concat(chunks).toString('utf8');
      const newline = text.indexOf('\n');
      const line = (newline < 0 ? text : text.slice(0, newline)).replace(/\r$/, '');
      if (line === '') done(passwordError('--password-stdin: standard input has no password (an empty first line)'));
      else done(undefined, line);
    };
    const onData = (chunk: Buffer | string): void => {
      const bytes = typeof chunk === 'string' ? Buffer.from(chunk, 'utf8') : chunk;
      chunks.push(bytes);
      size += bytes.length;
      if (bytes.includes(0x0a)) finish();
      else if (size > MAX_PASSWORD_BYTES)
        done(passwordError(`--password-stdin: the password line is longer than ${MAX_PASSWORD_BYTES} bytes`));
    };
    const onEnd = (): void => finish();
    const onError = (err: Error): void => done(passwordError(`--password-stdin: cannot read standard input: ${err.message}`));
    stdin.on('data', onData);
    stdin.on('end', onEnd);
    stdin.on('error', onError);
    stdin.resume();
  });
}

async function promptTwice(input: PasswdInput): Promise<string> {
  if (input.stdin.isTTY !== true || input.stdin.setRawMode === undefined)
    throw passwordError('standard input is not a terminal: pipe the password in with --password-stdin');
  // Raw mode (no echo) before the first prompt and until the second answer: nothing typed is ever echoed.
  input.stdin.setRawMode(true);
  try {
    const first = await promptHidden(input, 'Password: ');
    if (first === '') throw passwordError('the password is empty');
    const second = await promptHidden(input, 'Reenter password: ');
    if (first !== second) throw passwordError('the passwords do not match');
    return first;
  } finally {
    input.stdin.setRawMode(false);
    input.stdin.pause();
  }
}

/** Reads a line from the terminal (in raw mode: nothing is echoed). Ctrl-C, or Ctrl-D on an empty line, aborts. */
function promptHidden(input: PasswdInput, prompt: string): Promise<string> {
  const stdin = input.stdin;
  return new Promise((resolve, reject) => {
    let text = '';
    input.prompt.write(prompt);
    const finish = (err?: BifroError): void => {
      stdin.off('data', onData);
      input.prompt.write('\n');
      if (err === undefined) resolve(text);
      else reject(err);
    };
    const onData = (chunk: Buffer | string): void => {
      for (const ch of typeof chunk === 'string' ? chunk : chunk.toString('utf8')) {
        if (ch === '\r' || ch === '\n') return finish();
        if (ch === '\u0003') return finish(passwordError('aborted'));
        if (ch === '\u0004') return text === '' ? finish(passwordError('aborted')) : finish();
        if (ch === '\u007f' || ch === '\b') text = [...text].slice(0, -1).join('');
        else if (ch >= ' ') text += ch;
        if (Buffer.byteLength(text) > MAX_PASSWORD_BYTES)
          return finish(passwordError(`the password is longer than ${MAX_PASSWORD_BYTES} bytes`));
      }
    };
    stdin.on('data', onData);
    stdin.resume();
  });
}
