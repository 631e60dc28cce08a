import { execFile, spawnSync } from 'node:child_process';
import { existsSync, readdirSync, readFileSync } from 'node:fs';
import path from 'node:path';

/** The repository root. */
export const ROOT = path.resolve(__dirname, '..', '..');
export const ARCHETYPE = path.join(ROOT, 'archetype');
export const BIN = path.join(ARCHETYPE, 'bin', 'create-bifro-plugin.js');
/** The repository's node_modules: @bifro/spi (linked to spi/), jest, ts-jest, typescript. */
export const NODE_MODULES = path.join(ROOT, 'node_modules');
export const TSC = path.join(NODE_MODULES, 'typescript', 'bin', 'tsc');
export const JEST = path.join(NODE_MODULES, 'jest', 'bin', 'jest.js');

/** The environment of a child process without npm's forwarded config and jest's own variables. */
export function cleanEnv(extra: Readonly<Record<string, string>> = {}): NodeJS.ProcessEnv {
  const env: NodeJS.ProcessEnv = {};
  for (const [key, value] of Object.entries(process.env)) {
    if (/^npm_/i.test(key) || key.startsWith('JEST_')) continue;
    env[key] = value;
  }
  return { ...env, NO_COLOR: '1', FORCE_COLOR: '0', ...extra };
}

export interface RunResult {
  readonly code: number;
  readonly stdout: string;
  readonly stderr: string;
}

/** Runs a command to its end (stdin is not a terminal), never rejecting. */
export function run(
  file: string,
  args: readonly string[],
  options: { cwd: string; env?: NodeJS.ProcessEnv; timeoutMs?: number },
): Promise<RunResult> {
  return new Promise((resolve) => {
    execFile(
      file,
      args,
      { cwd: options.cwd, env: options.env ?? cleanEnv(), timeout: options.timeoutMs ?? 60_000, maxBuffer: 64 * 1024 * 1024 },
      (error, stdout, stderr) => {
        const code = error === null ? 0 : typeof error.code === 'number' ? error.code : 1;
        resolve({ code, stdout, stderr });
      },
    );
  });
}

/** Runs `create-bifro-plugin` (the real bin, with node) in `cwd`. */
export function create(args: readonly string[], cwd: string, env: Readonly<Record<string, string>> = {}): Promise<RunResult> {
  return run(process.execPath, [BIN, ...args], { cwd, env: cleanEnv(env) });
}

/**
 * Builds the archetype (and the SPI it references) so that the bin has its dist/: `tsc -b` is
 * incremental, so this costs little when they are up to date.
 */
export function buildArchetype(): void {
  const result = spawnSync(process.execPath, [TSC, '-b', path.join(ARCHETYPE, 'tsconfig.json')], { cwd: ROOT, encoding: 'utf8' });
  if (result.status !== 0) throw new Error(`tsc -b archetype failed:\n${result.stdout}\n${result.stderr}`);
  if (!existsSync(path.join(ROOT, 'spi', 'dist', 'testing', 'index.js'))) throw new Error('spi/dist is missing after the build');
}

/** Every file under `dir` (relative, `/`-separated, sorted), node_modules and dist left out. */
export function listFiles(dir: string): string[] {
  return readdirSync(dir, { recursive: true, withFileTypes: true })
    .filter((e) => e.isFile())
    .map((e) => path.relative(dir, path.join(e.parentPath, e.name)).split(path.sep).join('/'))
    .filter((f) => !/^(node_modules|dist)\//.test(f))
    .sort();
}

export function readJson<T>(file: string): T {
  return JSON.parse(readFileSync(file, 'utf8')) as T;
}
