import { spawn } from 'node:child_process';
import { copyFileSync, existsSync, mkdirSync, mkdtempSync, readFileSync, realpathSync, rmSync, statSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';

/**
 * core/bin/bifro.js, the committed launcher npm links as `bifro` (`npx bifro`): it runs the built
 * CLI, and says what to run when the build output is missing. The `--help` case needs the build
 * (`npm test` builds first; alone, run `npx tsc -b` before jest).
 */
const REPO = path.resolve(__dirname, '..', '..', '..');
const CORE = path.join(REPO, 'core');
const LAUNCHER = path.join(CORE, 'bin', 'bifro.js');
const CLI = path.join(CORE, 'dist', 'cli', 'main.js');

interface Result {
  readonly code: number | null;
  readonly stdout: string;
  readonly stderr: string;
}

function runNode(script: string, args: readonly string[], cwd: string): Promise<Result> {
  return new Promise((resolve, reject) => {
    const env: NodeJS.ProcessEnv = {};
    for (const [k, v] of Object.entries(process.env)) if (!k.startsWith('BIFRO_')) env[k] = v;
    const child = spawn(process.execPath, [script, ...args], { cwd, env, stdio: ['ignore', 'pipe', 'pipe'] });
    let stdout = '';
    let stderr = '';
    child.stdout.on('data', (d: Buffer) => (stdout += d.toString()));
    child.stderr.on('data', (d: Buffer) => (stderr += d.toString()));
    child.on('error', reject);
    child.on('close', (code) => resolve({ code, stdout, stderr }));
  });
}

let tmp: string;
beforeEach(() => {
  // The real path: the launcher names its own (symlinks resolved) location.
  tmp = realpathSync(mkdtempSync(path.join(os.tmpdir(), 'bifro-launcher-')));
});
afterEach(() => {
  rmSync(tmp, { recursive: true, force: true });
});

describe('core/bin/bifro.js', () => {
  it('is the bin of @bifro/core, published, executable, with a node shebang', () => {
    const pkg = JSON.parse(readFileSync(path.join(CORE, 'package.json'), 'utf8')) as { bin?: Record<string, string>; files?: string[] };
    expect(pkg.bin).toEqual({ bifro: 'bin/bifro.js' });
    expect(pkg.files).toContain('bin');
    expect(readFileSync(LAUNCHER, 'utf8').startsWith('#!/usr/bin/env node\n')).toBe(true);
    if (process.platform !== 'win32') expect(statSync(LAUNCHER).mode & 0o111).not.toBe(0);
  });

  it('runs the built CLI: --help prints the usage and exits 0', async () => {
    if (!existsSync(CLI)) throw new Error(`${CLI} is missing: build first (npm run build, or npx tsc -b)`);
    const r = await runNode(LAUNCHER, ['--help'], tmp);
    expect(r.stderr).toBe('');
    expect(r.code).toBe(0);
    expect(r.stdout).toContain('Usage: bifro <command> [options]');
    expect(r.stdout).toContain('plugin verify <dir|name>');
    expect(r.stdout).toContain('Exit codes:');
  });

  it('passes the exit code of the CLI through (unknown command: 2)', async () => {
    if (!existsSync(CLI)) throw new Error(`${CLI} is missing: build first (npm run build, or npx tsc -b)`);
    const r = await runNode(LAUNCHER, ['frobnicate'], tmp);
    expect(r.code).toBe(2);
    expect(r.stderr).toContain('error BIFRO_CLI_USAGE: unknown command "frobnicate"');
  });

  it('without the build output, says to run npm run build and exits 1', async () => {
    // A copy of the launcher in a package folder that has no dist/.
    const bin = path.join(tmp, 'core', 'bin');
    mkdirSync(bin, { recursive: true });
    const copy = path.join(bin, 'bifro.js');
    copyFileSync(LAUNCHER, copy);
    const r = await runNode(copy, ['--help'], tmp);
    expect(r.code).toBe(1);
    expect(r.stdout).toBe('');
    expect(r.stderr).toContain('bifro is not built yet');
    expect(r.stderr).toContain(path.join(tmp, 'core', 'dist', 'cli', 'main.js'));
    expect(r.stderr).toContain('npm run build');
  });
});
