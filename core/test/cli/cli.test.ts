import { spawn, type ChildProcess } from 'node:child_process';
import { existsSync, mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import net from 'node:net';
import os from 'node:os';
import path from 'node:path';

/** These tests run the built CLI: `npm test` builds first; alone, run `npx tsc -b` before jest. */
const REPO = path.resolve(__dirname, '..', '..', '..');
const CLI = path.join(REPO, 'core', 'dist', 'cli', 'main.js');
const PLUGINS = path.join(REPO, 'plugins');
const CORE_VERSION = (JSON.parse(readFileSync(path.join(REPO, 'core', 'package.json'), 'utf8')) as { version: string }).version;

interface Result {
  readonly code: number | null;
  readonly stdout: string;
  readonly stderr: string;
}

/** The environment without BIFRO_* variables of whoever runs the tests, plus `extra`. */
function cleanEnv(extra: Record<string, string> = {}): NodeJS.ProcessEnv {
  const env: NodeJS.ProcessEnv = {};
  for (const [k, v] of Object.entries(process.env)) if (!k.startsWith('BIFRO_')) env[k] = v;
  return { ...env, BIFRO_LOG_PRETTY: 'false', ...extra };
}

function run(args: readonly string[], opts: { cwd?: string; env?: Record<string, string> } = {}): Promise<Result> {
  return new Promise((resolve, reject) => {
    const child = spawn(process.execPath, [CLI, ...args], {
      cwd: opts.cwd ?? tmp,
      env: cleanEnv(opts.env),
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    let stdout = '';
    let stderr = '';
    child.stdout.on('data', (d: Buffer) => (stdout += d.toString()));
    child.stderr.on('data', (d: Buffer) => (stderr += d.toString()));
    child.on('error', reject);
    child.on('close', (code) => resolve({ code, stdout, stderr }));
  });
}

let tmp: string;
const started: ChildProcess[] = [];

beforeAll(() => {
  if (!existsSync(CLI)) throw new Error(`${CLI} is missing: build first (npm run build, or npx tsc -b)`);
});
beforeEach(() => {
  tmp = mkdtempSync(path.join(os.tmpdir(), 'bifro-cli-'));
});
afterEach(async () => {
  // Only processes these tests started, by pid.
  for (const child of started.splice(0)) {
    if (child.exitCode === null && child.signalCode === null && child.pid !== undefined) {
      child.kill('SIGKILL');
      await new Promise((resolve) => child.once('exit', resolve));
    }
  }
  rmSync(tmp, { recursive: true, force: true });
});

/** A config binding 127.0.0.1 only, with the repository's plugins (for the memory storage). */
function writeConfig(extra = ''): string {
  const file = path.join(tmp, 'bifro.yml');
  writeFileSync(file, `pluginsDir: ${JSON.stringify(PLUGINS)}\nlisteners:\n  - { name: tcp, host: 127.0.0.1, port: 1883 }\n${extra}`);
  return file;
}

interface Started {
  readonly child: ChildProcess;
  readonly port: number;
  readonly output: () => string;
  readonly exited: Promise<number | null>;
}

/** `bifro start` in the foreground; resolves once the "bifro started" log line is out. */
function startForeground(args: readonly string[]): Promise<Started> {
  const child = spawn(process.execPath, [CLI, 'start', ...args], { cwd: tmp, env: cleanEnv(), stdio: ['ignore', 'pipe', 'pipe'] });
  started.push(child);
  let out = '';
  const exited = new Promise<number | null>((resolve) => child.on('exit', (code) => resolve(code)));
  return new Promise((resolve, reject) => {
    const onData = (d: Buffer): void => {
      out += d.toString();
      for (const line of out.split('\n')) {
        if (!line.startsWith('{')) continue;
        const entry = JSON.parse(line) as { msg?: string; listeners?: { port: number }[] };
        if (entry.msg?.startsWith('bifro started') && entry.listeners?.[0]) {
          child.stdout?.off('data', onData);
          child.stdout?.on('data', (more: Buffer) => (out += more.toString()));
          resolve({ child, port: entry.listeners[0].port, output: () => out, exited });
          return;
        }
      }
    };
    child.stdout?.on('data', onData);
    child.stderr?.on('data', (d: Buffer) => (out += d.toString()));
    void exited.then((code) => reject(new Error(`bifro start exited with ${code} before it was ready:\n${out}`)));
  });
}

function connect(port: number): Promise<void> {
  return new Promise((resolve, reject) => {
    const socket = net.connect({ host: '127.0.0.1', port }, () => {
      socket.destroy();
      resolve();
    });
    socket.on('error', reject);
  });
}

describe('bifro: usage', () => {
  it('prints help with --help and exits 0', async () => {
    const r = await run(['--help']);
    expect(r.code).toBe(0);
    expect(r.stdout).toContain('Usage: bifro <command> [options]');
    expect(r.stdout).toContain('plugin verify <dir|name>');
    expect(r.stdout).toContain('Exit codes:');
  });

  it('prints command help', async () => {
    const r = await run(['stop', '--help']);
    expect(r.code).toBe(0);
    expect(r.stdout).toContain('Usage: bifro stop');
    expect((await run(['help', 'plugin'])).stdout).toContain('bifro plugin verify');
  });

  it('prints the version with --version', async () => {
    const r = await run(['--version']);
    expect(r.code).toBe(0);
    expect(r.stdout).toMatch(new RegExp(`^bifro ${CORE_VERSION.replace(/\./g, '\\.')} \\(SPI \\d+\\.\\d+\\.\\d+`));
  });

  it('exits 2 without a command', async () => {
    const r = await run([]);
    expect(r.code).toBe(2);
    expect(r.stderr).toContain('Usage: bifro');
  });

  it('token create refuses a --tenant no client can log into (exit 2, naming the rule) and accepts a valid one', async () => {
    for (const tenant of ['acme/x', 'acme x', '.acme', 'a'.repeat(65), '']) {
      const r = await run(['token', 'create', '--name', 'ops', '--tenant', tenant]);
      expect(r.code).toBe(2);
      expect(r.stderr).toMatch(/--tenant .*a tenant id (holds only|is longer|is empty)/);
      expect(r.stdout).toBe('');
    }
    const ok = await run(['token', 'create', '--name', 'ops', '--tenant', 'acme-eu.1']);
    expect(ok.code).toBe(0);
    expect(ok.stderr).toContain('tenant: "acme-eu.1"');
  });

  it('exits 2 on an unknown command', async () => {
    const r = await run(['frobnicate']);
    expect(r.code).toBe(2);
    expect(r.stderr).toContain('error BIFRO_CLI_USAGE: unknown command "frobnicate"');
  });

  it('exits 2 on an unknown option or a bad value', async () => {
    const unknown = await run(['status', '--colour']);
    expect(unknown.code).toBe(2);
    expect(unknown.stderr).toContain('bifro status: unknown option "--colour"');
    const port = await run(['start', '--port', 'abc']);
    expect(port.code).toBe(2);
    expect(port.stderr).toContain('--port: expected integer 0..65535, got "abc"');
    expect((await run(['plugin', 'frob'])).code).toBe(2);
  });
});

describe('bifro: configuration errors', () => {
  it('exits 2 naming the file, line and key of a bad config, without a stack trace', async () => {
    const file = path.join(tmp, 'bad.yml');
    writeFileSync(file, 'listeners:\n  - name: tcp\n    prot: 1883\n');
    const r = await run(['status', '--config', file]);
    expect(r.code).toBe(2);
    expect(r.stderr).toContain(`error BIFRO_CONFIG_UNKNOWN_KEY: ${file}:3:5: listeners[0].prot: unknown key`);
    expect(r.stderr).toContain('hint:');
    expect(r.stderr).not.toMatch(/\n\s+at /);
  });

  it('exits 2 on a missing --config file and on an invalid BIFRO_* variable', async () => {
    const missing = await run(['start', '--config', 'nope.yml']);
    expect(missing.code).toBe(2);
    expect(missing.stderr).toContain('error BIFRO_CONFIG_NOT_FOUND');
    const env = await run(['status'], { env: { BIFRO_LOG_LEVEL: 'loud' } });
    expect(env.code).toBe(2);
    expect(env.stderr).toContain('error BIFRO_CONFIG_ENV_INVALID: environment variable BIFRO_LOG_LEVEL');
  });
});

describe('bifro: status and stop without a broker', () => {
  it('status exits 3 when not running', async () => {
    const r = await run(['status', '--data-dir', 'data']);
    expect(r.code).toBe(3);
    expect(r.stdout).toContain(`bifro is not running (no pid file at ${path.join(tmp, 'data', 'bifro.pid')})`);
  });

  it('stop exits 1 with a clear message when not running', async () => {
    const r = await run(['stop', '--data-dir', 'data']);
    expect(r.code).toBe(1);
    expect(r.stderr).toContain('error BIFRO_CLI_NOT_RUNNING: bifro is not running');
  });

  it('recognises and clears a stale pid file', async () => {
    mkdirSync(path.join(tmp, 'data'));
    const pidFile = path.join(tmp, 'data', 'bifro.pid');
    // A pid that cannot exist on Linux (above pid_max).
    writeFileSync(pidFile, '99999999\n');
    const status = await run(['status', '--data-dir', 'data']);
    expect(status.code).toBe(3);
    expect(status.stdout).toContain('stale pid file');
    const stop = await run(['stop', '--data-dir', 'data']);
    expect(stop.code).toBe(1);
    expect(stop.stderr).toContain('removed stale pid file');
    expect(existsSync(pidFile)).toBe(false);
  });

  it('a pid file naming a live process that is not a bifro (this test process) does not block: status, stop, start', async () => {
    mkdirSync(path.join(tmp, 'data'));
    const pidFile = path.join(tmp, 'data', 'bifro.pid');
    // As PID 1 after a container restart: the pid runs, but it is not the broker that wrote the file.
    writeFileSync(pidFile, `${process.pid}\n`);
    const status = await run(['status', '--data-dir', 'data']);
    expect(status.code).toBe(3);
    expect(status.stdout).toContain(`stale pid file ${pidFile} names pid ${process.pid}, but pid ${process.pid} is not a bifro process (`);
    // stop must not signal it (this very test would be the one stopped).
    const stop = await run(['stop', '--data-dir', 'data']);
    expect(stop.code).toBe(1);
    expect(stop.stderr).toContain(`removed stale pid file ${pidFile} naming pid ${process.pid}: pid ${process.pid} is not a bifro process`);
    expect(stop.stderr).toContain('it was not signalled');
    expect(existsSync(pidFile)).toBe(false);

    writeFileSync(pidFile, `${process.pid}\n`);
    const broker = await startForeground(['--config', writeConfig(), '--port', '0', '--data-dir', 'data']);
    expect(readFileSync(pidFile, 'utf8').trim()).toBe(String(broker.child.pid));
    const warning = broker
      .output()
      .split('\n')
      .find((line) => line.includes('took over the stale pid file'));
    expect(warning).toContain(`took over the stale pid file ${pidFile}: pid ${process.pid} is not a bifro process`);
    expect(warning).toContain('"level":40');
  });
});

describe('bifro: plugin commands', () => {
  function writePlugin(dir: string, spi: string, name = 'bifro-test-future'): void {
    mkdirSync(dir, { recursive: true });
    writeFileSync(
      path.join(dir, 'package.json'),
      JSON.stringify({ name, version: '3.0.0', main: 'index.js', bifro: { kinds: ['events'], spi } }),
    );
    writeFileSync(path.join(dir, 'index.js'), 'module.exports = { events: () => ({ wants: () => true, report() {} }) };\n');
  }

  it('verify passes every phase of the memory storage plugin', async () => {
    const r = await run(['plugin', 'verify', path.join(PLUGINS, 'storage-memory')]);
    expect(r.stderr).toBe('');
    expect(r.code).toBe(0);
    expect(r.stdout).toMatch(/init\s+storage\s+ok/);
    expect(r.stdout).toContain('passed every phase');
  });

  it('verify exits 1 naming the failing phase, code and message', async () => {
    writePlugin(path.join(tmp, 'plugins', 'future'), '^9.0.0');
    const r = await run(['plugin', 'verify', 'future', '--plugins-dir', 'plugins']);
    expect(r.code).toBe(1);
    expect(r.stdout).toMatch(/version\s+failed\s+BIFRO_PLUGIN_SPI_MISMATCH/);
    expect(r.stderr).toContain('error BIFRO_PLUGIN_SPI_MISMATCH: phase version failed:');
    expect(r.stderr).toContain('^9.0.0');
  });

  it('list shows discovered plugins with version, kinds, SPI range, compatibility and whether they load; exits 1 for one that cannot', async () => {
    writePlugin(path.join(tmp, 'plugins', 'future'), '^9.0.0');
    const r = await run(['plugin', 'list', '--plugins-dir', 'plugins']);
    expect(r.code).toBe(1);
    expect(r.stdout).toMatch(/NAME\s+VERSION\s+KINDS\s+SPI\s+COMPATIBLE\s+LOADABLE\s+SOURCE\s+USED FOR/);
    expect(r.stdout).toMatch(/bifro-test-future\s+3\.0\.0\s+events\s+\^9\.0\.0\s+no\s+no\s+plugins-dir\s+-/);
    expect(r.stdout).toContain('bifro-test-future: BIFRO_PLUGIN_SPI_MISMATCH');
    expect(r.stderr).toContain('cannot be loaded (not used by the config): bifro-test-future');
  });

  it('list calls a compatible plugin whose module does not load not loadable, with the reason', async () => {
    writePlugin(path.join(tmp, 'plugins', 'unbuilt'), '^1.0.0', 'bifro-test-unbuilt');
    rmSync(path.join(tmp, 'plugins', 'unbuilt', 'index.js'));
    const r = await run(['plugin', 'list', '--plugins-dir', 'plugins']);
    expect(r.code).toBe(1);
    expect(r.stdout).toMatch(/bifro-test-unbuilt\s+3\.0\.0\s+events\s+\^1\.0\.0\s+yes\s+no\s+plugins-dir/);
    expect(r.stdout).toContain('bifro-test-unbuilt: BIFRO_PLUGIN_IMPORT_FAILED');
  });
});

describe('bifro: start, status, stop', () => {
  it('starts in the foreground on --port 0, reports status, and stops on `bifro stop`', async () => {
    const config = writeConfig();
    const broker = await startForeground(['--config', config, '--port', '0', '--data-dir', 'data']);
    expect(broker.port).toBeGreaterThan(0);
    await connect(broker.port);
    expect(broker.output()).toContain('plugin loaded: @bifro/plugin-storage-level@');
    const pidFile = path.join(tmp, 'data', 'bifro.pid');
    expect(readFileSync(pidFile, 'utf8').trim()).toBe(String(broker.child.pid));

    const status = await run(['status', '--config', config, '--data-dir', 'data']);
    expect(status.code).toBe(0);
    expect(status.stdout).toContain(`bifro is running (pid ${broker.child.pid}`);

    const second = await run(['start', '--config', config, '--port', '0', '--data-dir', 'data']);
    expect(second.code).toBe(1);
    expect(second.stderr).toContain(
      `error BIFRO_PID_ALREADY_RUNNING: a broker is already running with pid ${broker.child.pid} (pid file ${pidFile})`,
    );

    const stop = await run(['stop', '--config', config, '--data-dir', 'data']);
    expect(stop.code).toBe(0);
    expect(stop.stdout).toContain(`bifro stopped (pid ${broker.child.pid})`);
    expect(await broker.exited).toBe(0);
    expect(existsSync(pidFile)).toBe(false);
    expect((await run(['status', '--config', config, '--data-dir', 'data'])).code).toBe(3);
  });

  it('runs two brokers side by side with their own --port and --data-dir', async () => {
    const config = writeConfig();
    const a = await startForeground(['--config', config, '--port', '0', '--data-dir', 'a']);
    const b = await startForeground(['--config', config, '--port', '0', '--data-dir', 'b']);
    expect(a.port).not.toBe(b.port);
    await connect(a.port);
    await connect(b.port);
    for (const dir of ['a', 'b']) expect((await run(['status', '--config', config, '--data-dir', dir])).code).toBe(0);
    expect((await run(['stop', '--config', config, '--data-dir', 'a'])).code).toBe(0);
    expect(await a.exited).toBe(0);
    expect((await run(['status', '--config', config, '--data-dir', 'b'])).code).toBe(0);
    await connect(b.port);
    expect((await run(['stop', '--config', config, '--data-dir', 'b'])).code).toBe(0);
    expect(await b.exited).toBe(0);
  });

  it('stops gracefully on SIGINT with exit code 0', async () => {
    const broker = await startForeground(['--config', writeConfig(), '--port', '0', '--data-dir', 'data']);
    broker.child.kill('SIGINT');
    expect(await broker.exited).toBe(0);
    expect(broker.output()).toContain('received SIGINT: stopping');
    expect(existsSync(path.join(tmp, 'data', 'bifro.pid'))).toBe(false);
  });

  it('exits 1 with the coded reason when a required plugin is missing', async () => {
    const config = writeConfig('plugins:\n  auth: [bifro-no-such-plugin]\n');
    const r = await run(['start', '--config', config, '--port', '0', '--data-dir', 'data']);
    expect(r.code).toBe(1);
    expect(r.stderr).toContain('error BIFRO_PLUGIN_NOT_FOUND');
    expect(r.stderr).toContain('bifro-no-such-plugin');
    expect(r.stderr).not.toMatch(/\n\s+at /);
    expect(existsSync(path.join(tmp, 'data', 'bifro.pid'))).toBe(false);
  });

  it('--daemon starts in the background, then status and stop work on it', async () => {
    const config = writeConfig();
    const r = await run(['start', '--daemon', '--config', config, '--port', '0', '--data-dir', 'data']);
    expect(r.stderr).toBe('');
    expect(r.code).toBe(0);
    const pid = Number(/started in the background \(pid (\d+)\)/.exec(r.stdout)?.[1]);
    const port = Number(/tcp:\/\/127\.0\.0\.1:(\d+)/.exec(r.stdout)?.[1]);
    expect(pid).toBeGreaterThan(0);
    try {
      await connect(port);
      expect(readFileSync(path.join(tmp, 'data', 'bifro.pid'), 'utf8').trim()).toBe(String(pid));
      const status = await run(['status', '--config', config, '--data-dir', 'data']);
      expect(status.code).toBe(0);
      expect(status.stdout).toContain(`pid ${pid}`);
      const stop = await run(['stop', '--config', config, '--data-dir', 'data']);
      expect(stop.code).toBe(0);
      expect(stop.stdout).toContain(`bifro stopped (pid ${pid})`);
      expect(readFileSync(path.join(tmp, 'data', 'bifro.log'), 'utf8')).toContain('bifro started');
    } finally {
      // If an assertion failed, do not leave the background broker (started by this test) running.
      try {
        process.kill(pid, 'SIGKILL');
      } catch {
        // already gone
      }
    }
  });

  it('--daemon exits 1 with the reason and the log when the broker cannot start', async () => {
    const blocker = net.createServer();
    await new Promise<void>((resolve) => blocker.listen(0, '127.0.0.1', resolve));
    const port = (blocker.address() as net.AddressInfo).port;
    try {
      const r = await run(['start', '--daemon', '--config', writeConfig(), '--port', String(port), '--data-dir', 'data']);
      expect(r.code).toBe(1);
      expect(r.stderr).toContain(`error BIFRO_LISTENER_BIND_FAILED: listener "tcp" cannot listen on 127.0.0.1:${port}`);
      expect(r.stderr).toContain(`log: ${path.join(tmp, 'data', 'bifro.log')}`);
      expect(existsSync(path.join(tmp, 'data', 'bifro.pid'))).toBe(false);
    } finally {
      blocker.close();
    }
  });
});
