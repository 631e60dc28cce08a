import { spawn, type ChildProcess } from 'node:child_process';
import { existsSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import net from 'node:net';
import os from 'node:os';
import path from 'node:path';

/**
 * A real npm registry for tests: verdaccio (a root devDependency) as a child process, its storage
 * in a temp folder, anything not published to it proxied from https://registry.npmjs.org/ (so
 * `npm install` of public packages works through it). Start it once per test file (beforeAll):
 * it takes a couple of seconds.
 *
 * Publishing: npm refuses to publish without credentials (ENEEDAUTH), so the .npmrc carries a
 * made-up `_authToken`. Verdaccio cannot verify that token (no user issued it) and treats the
 * request as anonymous, which `publish: $anonymous` allows. No `npm adduser` is needed. The
 * `auth` section is verdaccio's default htpasswd, stated so that no user file is looked for
 * outside the temp folder (`max_users: -1`: nobody may register).
 */

const REPO = path.resolve(__dirname, '..', '..');
const VERDACCIO = path.join(REPO, 'node_modules', 'verdaccio', 'bin', 'verdaccio');

export interface NpmRegistry {
  /** `http://127.0.0.1:<port>/`. */
  readonly url: string;
  readonly port: number;
  /** A temp .npmrc: `registry=<url>` and the (fake) token for it. */
  readonly npmrc: string;
  /** The temp folder (storage, log, config). */
  readonly dir: string;
  /** `npm publish` of the package in `dir` to this registry. */
  publish(dir: string): Promise<void>;
  /** Variables for child processes (npm, the bifro CLI) to use this registry: npm_config_registry, npm_config_userconfig. */
  env(): Record<string, string>;
  /** The verdaccio log so far (for failure messages). */
  log(): string;
  /** Stops verdaccio (by its pid) and deletes the temp folder. */
  stop(): Promise<void>;
}

/** Starts verdaccio on a free port of 127.0.0.1 and resolves once `GET /-/ping` answers. */
export async function startNpmRegistry(): Promise<NpmRegistry> {
  if (!existsSync(VERDACCIO)) throw new Error(`${VERDACCIO} is missing: run npm install at the repository root`);
  const dir = mkdtempSync(path.join(os.tmpdir(), 'bifro-registry-'));
  const port = await freePort();
  const url = `http://127.0.0.1:${port}/`;
  const logFile = path.join(dir, 'verdaccio.log');
  const config = path.join(dir, 'config.yaml');
  writeFileSync(
    config,
    [
      `storage: ${JSON.stringify(path.join(dir, 'storage'))}`,
      // Plugin tarballs are small; the default 10mb is also what a big dependency may need.
      'max_body_size: 100mb',
      'auth:',
      '  htpasswd:',
      `    file: ${JSON.stringify(path.join(dir, 'htpasswd'))}`,
      '    max_users: -1',
      'uplinks:',
      '  npmjs:',
      '    url: https://registry.npmjs.org/',
      '    cache: true',
      'packages:',
      "  '@*/*':",
      '    access: $all',
      '    publish: $anonymous',
      '    proxy: npmjs',
      "  '**':",
      '    access: $all',
      '    publish: $anonymous',
      '    proxy: npmjs',
      `log: { type: file, path: ${JSON.stringify(logFile)}, level: warn }`,
      '',
    ].join('\n'),
  );
  const npmrc = path.join(dir, '.npmrc');
  writeFileSync(npmrc, `registry=${url}\n//127.0.0.1:${port}/:_authToken=test-token\n`);

  const child = spawn(process.execPath, [VERDACCIO, '--config', config, '--listen', `127.0.0.1:${port}`], {
    cwd: dir,
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  let output = '';
  child.stdout!.on('data', (d: Buffer) => (output += d.toString()));
  child.stderr!.on('data', (d: Buffer) => (output += d.toString()));
  // Should the test process end without stop() (a crash, a timeout), verdaccio ends with it.
  const killOnExit = (): void => {
    if (child.exitCode === null && child.signalCode === null) child.kill('SIGKILL');
  };
  process.once('exit', killOnExit);
  const exited = new Promise<void>((resolve) =>
    child.once('exit', () => {
      process.off('exit', killOnExit);
      resolve();
    }),
  );
  const log = (): string => `${output}${existsSync(logFile) ? readFileSync(logFile, 'utf8') : ''}`;

  try {
    await waitForPing(url, child, log);
  } catch (err) {
    await kill(child, exited);
    rmSync(dir, { recursive: true, force: true });
    throw err;
  }

  const env = (): Record<string, string> => ({ npm_config_registry: url, npm_config_userconfig: npmrc });
  return {
    url,
    port,
    npmrc,
    dir,
    env,
    log,
    async publish(packageDir) {
      const result = await run('npm', ['publish', '--registry', url, '--userconfig', npmrc, '--ignore-scripts'], packageDir, {
        ...process.env,
        ...env(),
      });
      if (result.code !== 0)
        throw new Error(`npm publish in ${packageDir} failed (${result.code}):\n${result.output}\nverdaccio:\n${log()}`);
    },
    async stop() {
      await kill(child, exited);
      rmSync(dir, { recursive: true, force: true });
    },
  };
}

async function waitForPing(url: string, child: ChildProcess, log: () => string): Promise<void> {
  const deadline = Date.now() + 30_000;
  while (Date.now() < deadline) {
    if (child.exitCode !== null || child.signalCode !== null)
      throw new Error(`verdaccio exited (${child.exitCode ?? child.signalCode}):\n${log()}`);
    try {
      const response = await fetch(new URL('-/ping', url), { signal: AbortSignal.timeout(1000) });
      await response.body?.cancel();
      if (response.ok) return;
    } catch {
      // not listening yet
    }
    await new Promise((resolve) => setTimeout(resolve, 100));
  }
  throw new Error(`verdaccio did not answer ${url}-/ping within 30 s:\n${log()}`);
}

/** Only the process this module started, by its pid. */
async function kill(child: ChildProcess, exited: Promise<void>): Promise<void> {
  if (child.exitCode !== null || child.signalCode !== null) return;
  child.kill('SIGTERM');
  const timer = setTimeout(() => child.kill('SIGKILL'), 5000);
  await exited;
  clearTimeout(timer);
}

/** A port of 127.0.0.1 that was free a moment ago (for a server to bind, or as one nothing listens on). */
export function freePort(): Promise<number> {
  return new Promise((resolve, reject) => {
    const server = net.createServer();
    server.once('error', reject);
    server.listen(0, '127.0.0.1', () => {
      const { port } = server.address() as net.AddressInfo;
      server.close(() => resolve(port));
    });
  });
}

/** Runs a command; resolves with its exit code and combined output. Killed (by its pid) after `timeoutMs`. */
export function run(
  command: string,
  args: readonly string[],
  cwd: string,
  env: NodeJS.ProcessEnv,
  timeoutMs = 240_000,
): Promise<{ code: number; output: string }> {
  return new Promise((resolve, reject) => {
    const child = spawn(command, [...args], { cwd, env, stdio: ['ignore', 'pipe', 'pipe'] });
    let output = '';
    child.stdout.on('data', (d: Buffer) => (output += d.toString()));
    child.stderr.on('data', (d: Buffer) => (output += d.toString()));
    const timer = setTimeout(() => {
      output += `\n(killed after ${timeoutMs} ms)`;
      child.kill('SIGKILL');
    }, timeoutMs);
    child.on('error', (err) => {
      clearTimeout(timer);
      reject(err);
    });
    child.on('close', (code) => {
      clearTimeout(timer);
      resolve({ code: code ?? 1, output });
    });
  });
}
