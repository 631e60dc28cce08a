import { spawn } from 'node:child_process';
import { promises as fs } from 'node:fs';
import path from 'node:path';
import { BifroError } from '../base/errors';
import type { PluginErrorCode } from './plugin-errors';

/**
 * Runs the npm client for `bifro plugin install` and `search`: the user's npm, with the user's
 * environment, so that npm's own configuration applies (`.npmrc` files, `npm_config_*`
 * variables, proxies, scoped registries, auth tokens). Bifro passes only what the command needs.
 */

export interface NpmResult {
  readonly code: number;
  readonly stdout: string;
  readonly stderr: string;
}

export interface NpmRunOptions {
  readonly cwd: string;
  readonly env: NodeJS.ProcessEnv;
}

/** The npm executable: `npm` on PATH (`npm.cmd`, run through the shell, on Windows). */
const NPM = process.platform === 'win32' ? 'npm.cmd' : 'npm';

/** Runs `npm <args>` and resolves with its exit code and output; rejects only when npm cannot be started. */
export function runNpm(args: readonly string[], opts: NpmRunOptions): Promise<NpmResult> {
  return new Promise((resolve, reject) => {
    const child = spawn(NPM, [...args], {
      cwd: opts.cwd,
      env: opts.env,
      stdio: ['ignore', 'pipe', 'pipe'],
      shell: process.platform === 'win32',
    });
    let stdout = '';
    let stderr = '';
    child.stdout.on('data', (d: Buffer) => (stdout += d.toString()));
    child.stderr.on('data', (d: Buffer) => (stderr += d.toString()));
    child.on('error', (err: NodeJS.ErrnoException) => {
      if (err.code === 'ENOENT') {
        reject(
          new BifroError(
            'BIFRO_PLUGIN_NPM_MISSING' satisfies PluginErrorCode,
            `cannot run npm: "${NPM}" is not on the PATH`,
            {},
            { cause: err },
          ),
        );
      } else reject(err);
    });
    child.on('close', (code, signal) => resolve({ code: code ?? (signal === null ? 1 : 128), stdout, stderr }));
  });
}

/**
 * What npm said when it failed, trimmed to the point: the `error` object of `--json` output
 * (`E404: Not Found - GET ... (first line of the detail)`), else its `npm error` lines without
 * the pointer to the debug log.
 */
export function npmFailure(result: NpmResult): string {
  const json = parseJsonOutput(result.stdout) as { error?: { code?: unknown; summary?: unknown; detail?: unknown } } | undefined;
  const error = json?.error;
  if (error !== undefined && typeof error.summary === 'string' && error.summary !== '') {
    const code = typeof error.code === 'string' || typeof error.code === 'number' ? `${error.code}: ` : '';
    const detail = typeof error.detail === 'string' ? firstLine(error.detail) : '';
    return `${code}${oneLine(error.summary)}${detail === '' ? '' : ` (${detail})`}`;
  }
  const lines = result.stderr
    .split('\n')
    .filter((line) => line.startsWith('npm error') || line.startsWith('npm ERR!'))
    .map((line) => line.replace(/^npm (error|ERR!)\s*/, '').trim())
    .filter((line) => line !== '' && !line.startsWith('A complete log of this run') && !/^\d{3}$/.test(line));
  const unique = [...new Set(lines)].slice(0, 6);
  if (unique.length > 0) return unique.join('; ');
  const tail = result.stderr.trim().split('\n').slice(-3).join('; ');
  return tail === '' ? `npm exited with code ${result.code}` : tail;
}

/** The JSON value npm printed with `--json` (after any other output); undefined when there is none. */
export function parseJsonOutput(stdout: string): unknown {
  const start = stdout.search(/^[[{]/m);
  if (start < 0) return undefined;
  try {
    return JSON.parse(stdout.slice(start)) as unknown;
  } catch {
    return undefined;
  }
}

/** Several npm settings as npm resolves them in `cwd` (`npm config get a b c`); npm's "null"/"undefined" become undefined. */
export async function npmConfig(
  keys: readonly string[],
  opts: NpmRunOptions & { readonly registry?: string },
): Promise<Map<string, string>> {
  const asked = keys.length === 1 ? [...keys, 'registry'] : keys; // with one key, npm prints the bare value
  const result = await runNpm(['config', 'get', ...asked, ...(opts.registry === undefined ? [] : ['--registry', opts.registry])], opts);
  const values = new Map<string, string>();
  if (result.code !== 0) return values;
  for (const line of result.stdout.split('\n')) {
    const eq = line.indexOf('=');
    if (eq <= 0) continue;
    const value = line.slice(eq + 1).trim();
    if (value !== '' && value !== 'null' && value !== 'undefined') values.set(line.slice(0, eq).trim(), value);
  }
  return values;
}

/**
 * The project `.npmrc` npm reads when run in `cwd`: the one in the nearest folder holding a
 * package.json or node_modules (npm's local prefix), else in `cwd`. Undefined when there is none.
 */
export async function projectNpmrc(cwd: string): Promise<string | undefined> {
  let prefix = path.resolve(cwd);
  for (let dir = prefix; ; dir = path.dirname(dir)) {
    if ((await exists(path.join(dir, 'package.json'))) || (await exists(path.join(dir, 'node_modules')))) {
      prefix = dir;
      break;
    }
    if (dir === path.dirname(dir)) break;
  }
  const file = path.join(prefix, '.npmrc');
  return (await exists(file)) ? file : undefined;
}

async function exists(file: string): Promise<boolean> {
  return fs.stat(file).then(
    () => true,
    () => false,
  );
}

function firstLine(text: string): string {
  return oneLine(text.split(/\n\s*\n/)[0] ?? '');
}

function oneLine(text: string): string {
  return text.replace(/\s*\n\s*/g, ' ').trim();
}
