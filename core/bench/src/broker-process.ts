/**
 * The brokers compared, each started as a child process on its own free 127.0.0.1 port, and
 * stopped by the pid of that child only. Every child started here is remembered until it exits,
 * so `stopAllBrokers()` (or `killAllBrokersNow()` at exit) can clean up after an interruption.
 */
import { spawn, spawnSync, type ChildProcess } from 'node:child_process';
import { createHash, randomBytes } from 'node:crypto';
import { accessSync, constants, mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import net from 'node:net';
import os from 'node:os';
import path from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import { BenchClient } from './bench-client';
import { encodeConnect } from './packets';

export const BROKER_NAMES = ['bifro', 'aedes', 'mosquitto'] as const;
/**
 * Run only when named with --brokers. `bifro-api`: Bifro with the admin API on, `$SYS` published
 * every second and `/metrics` scraped every second while it runs (the API's cost on the MQTT path).
 */
export const OPTIONAL_BROKERS = ['bifro-api'] as const;
/**
 * A compared broker, or a reference server: `node-net`, the memory reference, a bare Node.js net
 * server that only answers CONNECT with CONNACK (core/bench/net-connack-server.mjs), run for
 * idle-connections only; `node-forward`, the CPU reference, a bare Node.js net server that only
 * forwards PUBLISH packets to matching subscribers (core/bench/node-forward.mjs), run for
 * fixed-rate scenarios with `--cpu-floor`.
 */
export type ReferenceName = 'node-net' | 'node-forward';
export type BrokerName = (typeof BROKER_NAMES)[number] | (typeof OPTIONAL_BROKERS)[number] | ReferenceName;

export function isBrokerName(name: string): name is BrokerName {
  return (BROKER_NAMES as readonly string[]).includes(name) || (OPTIONAL_BROKERS as readonly string[]).includes(name);
}

/** How often `bifro-api` is scraped: far more often than Prometheus' usual 15 s, to make the cost visible. */
const SCRAPE_MS = 1000;

export interface BrokerProcess {
  readonly name: BrokerName;
  readonly host: string;
  readonly port: number;
  readonly pid: number;
  /** `bifro-api`: its admin API (port and an admin token). */
  readonly api?: ScrapedApi;
  /** Null while it runs, else how it ended (`exit code 1`, `signal SIGKILL`). */
  exited(): string | null;
  /** SIGTERM, then SIGKILL after 5 s; removes the temporary folder. */
  stop(): Promise<void>;
}

export interface LaunchOptions {
  /** The repository root (holds core/dist and plugins/). */
  readonly repoRoot: string;
  /** CPU list for `taskset -c`, or null to leave the broker unpinned. */
  readonly cpus: string | null;
  /** Time allowed until the broker answers CONNECT. */
  readonly readyTimeoutMs?: number;
  /** `bifro-api` only: scrape /metrics every second while it runs (default true). */
  readonly scrape?: boolean;
  /**
   * `mosquitto` only: `persistence true`, its database in the broker's temporary folder (default
   * false). mosquitto keeps its state in memory either way and writes it out as a snapshot every
   * `autosave_interval` (1800 s by default) and at exit, with no per-message fsync.
   */
  readonly mosquittoPersistence?: boolean;
  /** `bifro` only: cluster mode on these NATS servers, as this node (docs/cluster.md). */
  readonly cluster?: { readonly servers: readonly string[]; readonly nodeId: string; readonly replicas?: number };
}

const HOST = '127.0.0.1';
const live = new Map<number, { child: ChildProcess; dir: string }>();
const tempDirs = new Set<string>();
let shuttingDown = false;

/** True once stopAllBrokers() was called: no broker is started any more. */
export function isShuttingDown(): boolean {
  return shuttingDown;
}

function removeDir(dir: string): void {
  rmSync(dir, { recursive: true, force: true });
  tempDirs.delete(dir);
}

/** An executable found on PATH (or at an absolute path), or null. */
export function findExecutable(name: string, extra: readonly string[] = []): string | null {
  const dirs = [...extra, ...(process.env.PATH ?? '').split(path.delimiter).filter((d) => d !== '')];
  for (const dir of dirs) {
    const file = path.join(dir, name);
    try {
      accessSync(file, constants.X_OK);
      return file;
    } catch {
      // not here
    }
  }
  return null;
}

export function findMosquitto(): string | null {
  return findExecutable('mosquitto', ['/usr/sbin', '/usr/local/sbin']);
}

export function findTaskset(): string | null {
  return findExecutable('taskset');
}

/** Pins this process (the generator) to a CPU list; returns false when taskset failed. */
export function pinSelf(cpus: string): boolean {
  const taskset = findTaskset();
  if (taskset === null) return false;
  return spawnSync(taskset, ['-cp', cpus, String(process.pid)], { stdio: 'ignore' }).status === 0;
}

/** A port free on 127.0.0.1 right now. */
export function freePort(): Promise<number> {
  return new Promise((resolve, reject) => {
    const server = net.createServer();
    server.once('error', reject);
    server.listen(0, HOST, () => {
      const { port } = server.address() as net.AddressInfo;
      server.close(() => resolve(port));
    });
  });
}

/** The admin API of a `bifro-api` broker, scraped while it runs. */
export interface ScrapedApi {
  readonly port: number;
  readonly token: string;
}

/** The command line of each broker, writing whatever configuration it needs into `dir`. */
function commandLine(name: BrokerName, port: number, dir: string, opts: LaunchOptions, api?: ScrapedApi): string[] {
  const repoRoot = opts.repoRoot;
  switch (name) {
    case 'bifro':
    case 'bifro-api': {
      const config = path.join(dir, 'bifro.yml');
      writeFileSync(
        config,
        [
          `pluginsDir: ${JSON.stringify(path.join(repoRoot, 'plugins'))}`,
          'listeners:',
          '  - name: tcp',
          '    type: tcp',
          `    host: ${HOST}`,
          `    port: ${port}`,
          // Every generated connection comes from 127.0.0.1: stated even though it is the default
          // (off), so that a run measures no per-address limit whatever the defaults become.
          'security:',
          '  connectionRate: { perAddressPerSecond: 0 }',
          'log:',
          '  level: warn',
          ...(opts.cluster === undefined
            ? []
            : [
                'cluster:',
                `  servers: [${opts.cluster.servers.map((u) => JSON.stringify(u)).join(', ')}]`,
                `  nodeId: ${JSON.stringify(opts.cluster.nodeId)}`,
                `  replicas: ${opts.cluster.replicas ?? 1}`,
              ]),
          ...(api === undefined
            ? []
            : [
                'sysInterval: 1',
                'api:',
                `  host: ${HOST}`,
                `  port: ${api.port}`,
                `  tokens: [{ name: bench, hash: "sha256:${createHash('sha256').update(api.token).digest('hex')}" }]`,
              ]),
          '',
        ].join('\n'),
      );
      const main = path.join(repoRoot, 'core', 'dist', 'cli', 'main.js');
      return [process.execPath, main, 'start', '--config', config, '--port', String(port), '--data-dir', path.join(dir, 'data')];
    }
    case 'aedes':
      return [process.execPath, path.join(repoRoot, 'core', 'bench', 'aedes-server.mjs'), '--port', String(port)];
    case 'node-net':
      return [process.execPath, path.join(repoRoot, 'core', 'bench', 'net-connack-server.mjs'), '--port', String(port)];
    case 'node-forward':
      return [process.execPath, path.join(repoRoot, 'core', 'bench', 'node-forward.mjs'), '--port', String(port)];
    case 'mosquitto': {
      const bin = findMosquitto();
      if (bin === null) throw new Error('mosquitto not found (looked in /usr/sbin and on PATH)');
      const config = path.join(dir, 'mosquitto.conf');
      if (opts.mosquittoPersistence === true) mkdirSync(path.join(dir, 'mosquitto-db'));
      writeFileSync(
        config,
        [
          `listener ${port} ${HOST}`,
          'allow_anonymous true',
          ...(opts.mosquittoPersistence === true
            ? [
                'persistence true',
                `persistence_location ${path.join(dir, 'mosquitto-db')}${path.sep}`,
                // Started as root, mosquitto switches to the `mosquitto` user, which cannot write in
                // this process's private temporary folder: the database would never be saved.
                ...(process.getuid?.() === 0 ? ['user root'] : []),
              ]
            : ['persistence false']),
          'max_queued_messages 1000000',
          'max_inflight_messages 0',
          'set_tcp_nodelay true',
          'log_dest stderr',
          'log_type error',
          'log_type warning',
          '',
        ].join('\n'),
      );
      return [bin, '-c', config];
    }
  }
}

/** Starts one broker and resolves once it answers CONNECT with CONNACK. */
export async function launchBroker(name: BrokerName, opts: LaunchOptions): Promise<BrokerProcess> {
  if (shuttingDown) throw new Error('interrupted');
  const dir = mkdtempSync(path.join(os.tmpdir(), `bifro-bench-${name}-`));
  tempDirs.add(dir);
  let child: ChildProcess | null = null;
  try {
    const port = await freePort();
    const api = name === 'bifro-api' ? { port: await freePort(), token: randomBytes(24).toString('base64url') } : undefined;
    const argv = commandLine(name, port, dir, opts, api);
    const taskset = opts.cpus === null ? null : findTaskset();
    const [cmd, ...args] = taskset === null ? argv : [taskset, '-c', opts.cpus!, ...argv];
    const spawned = spawn(cmd!, args, { stdio: ['ignore', 'pipe', 'pipe'], cwd: dir });
    child = spawned;
    let output = '';
    const keep = (chunk: Buffer): void => {
      output = (output + chunk.toString('utf8')).slice(-4000);
    };
    spawned.stdout!.on('data', keep);
    spawned.stderr!.on('data', keep);
    let exited: string | null = null;
    spawned.once('exit', (code, signal) => {
      exited = signal === null ? `exit code ${code}` : `signal ${signal}`;
    });
    const spawnError = new Promise<never>((_resolve, reject) =>
      spawned.once('error', (err) => reject(new Error(`cannot start ${name}: ${err.message}`))),
    );
    spawnError.catch(() => undefined);
    if (spawned.pid === undefined) await spawnError;
    const pid = spawned.pid!;
    live.set(pid, { child: spawned, dir });

    const deadline = Date.now() + (opts.readyTimeoutMs ?? 20000);
    for (;;) {
      if (shuttingDown) throw new Error('interrupted');
      if (exited !== null) throw new Error(`${name} exited during start (${exited}): ${lastLines(output)}`);
      try {
        const probe = await BenchClient.open({ host: HOST, port }, 'bench-probe', encodeConnect('bench-probe'), 1000);
        probe.close();
        break;
      } catch (err) {
        if (Date.now() > deadline)
          throw new Error(`${name} did not answer CONNECT within ${opts.readyTimeoutMs ?? 20000} ms: ${(err as Error).message}`);
      }
      await sleep(100);
    }
    const scraper = api === undefined || opts.scrape === false ? undefined : scrape(api);
    return {
      name,
      host: HOST,
      port,
      pid,
      ...(api !== undefined ? { api } : {}),
      exited: () => exited,
      stop: () => {
        if (scraper !== undefined) clearInterval(scraper);
        return stopChild(pid);
      },
    };
  } catch (err) {
    if (child?.pid !== undefined) await stopChild(child.pid);
    removeDir(dir);
    throw err;
  }
}

/** A nats-server started here (JetStream on, its store in a temporary folder), stopped by pid like the brokers. */
export interface NatsProcess {
  /** `nats://127.0.0.1:<port>`. */
  readonly url: string;
  readonly pid: number;
  stop(): Promise<void>;
}

export function findNatsServer(): string | null {
  return findExecutable('nats-server', ['/usr/sbin', '/usr/local/bin']);
}

/** Starts nats-server on free 127.0.0.1 ports; resolves once its monitoring port says JetStream is up. */
export async function launchNatsServer(opts: { readonly cpus: string | null; readonly readyTimeoutMs?: number }): Promise<NatsProcess> {
  if (shuttingDown) throw new Error('interrupted');
  const bin = findNatsServer();
  if (bin === null) throw new Error('nats-server not found (looked in /usr/sbin, /usr/local/bin and on PATH)');
  const dir = mkdtempSync(path.join(os.tmpdir(), 'bifro-bench-nats-'));
  tempDirs.add(dir);
  const port = await freePort();
  const monitor = await freePort();
  const argv = [bin, '-a', HOST, '-p', String(port), '-m', String(monitor), '-js', '-sd', path.join(dir, 'js')];
  const taskset = opts.cpus === null ? null : findTaskset();
  const [cmd, ...args] = taskset === null ? argv : [taskset, '-c', opts.cpus!, ...argv];
  const child = spawn(cmd!, args, { stdio: ['ignore', 'pipe', 'pipe'], cwd: dir });
  let output = '';
  const keep = (chunk: Buffer): void => {
    output = (output + chunk.toString('utf8')).slice(-4000);
  };
  child.stdout!.on('data', keep);
  child.stderr!.on('data', keep);
  const failed = new Promise<never>((_resolve, reject) =>
    child.once('error', (err) => reject(new Error(`cannot start nats-server: ${err.message}`))),
  );
  failed.catch(() => undefined);
  if (child.pid === undefined) await failed;
  const pid = child.pid!;
  live.set(pid, { child, dir });
  try {
    const timeoutMs = opts.readyTimeoutMs ?? 20000;
    const deadline = Date.now() + timeoutMs;
    for (;;) {
      if (shuttingDown) throw new Error('interrupted');
      if (child.exitCode !== null || child.signalCode !== null) throw new Error(`nats-server exited during start: ${lastLines(output)}`);
      try {
        const res = await fetch(`http://${HOST}:${monitor}/healthz?js-enabled-only=true`, { signal: AbortSignal.timeout(1000) });
        if (res.status === 200) break;
      } catch {
        // not listening yet
      }
      if (Date.now() > deadline) throw new Error(`nats-server not ready within ${timeoutMs} ms: ${lastLines(output)}`);
      await sleep(100);
    }
  } catch (err) {
    await stopChild(pid);
    throw err;
  }
  return { url: `nats://${HOST}:${port}`, pid, stop: () => stopChild(pid) };
}

/** GET /metrics every {@link SCRAPE_MS}, like a Prometheus server would; a failed scrape ends the run. */
function scrape(api: ScrapedApi): NodeJS.Timeout {
  const timer = setInterval(() => {
    fetch(`http://${HOST}:${api.port}/metrics`, { headers: { authorization: `Bearer ${api.token}` } })
      .then(async (res) => {
        await res.text();
        if (res.status !== 200) throw new Error(`GET /metrics answered ${res.status}`);
      })
      .catch((err: unknown) => {
        clearInterval(timer);
        process.stderr.write(`bifro-api: scrape failed: ${String(err)}\n`);
      });
  }, SCRAPE_MS);
  return timer;
}

/** The first line that mentions an error, else the last non-empty lines of the output. */
function lastLines(output: string): string {
  const lines = output
    .split('\n')
    .map((l) => l.trim())
    .filter((l) => l !== '');
  if (lines.length === 0) return '(no output)';
  const error = lines.find((l) => /error/i.test(l));
  return error ?? lines.slice(-3).join(' | ');
}

/** Stops one child started here, by its pid. */
async function stopChild(pid: number): Promise<void> {
  const entry = live.get(pid);
  if (entry === undefined) return;
  const { child, dir } = entry;
  if (child.exitCode === null && child.signalCode === null) {
    const exited = new Promise<void>((resolve) => child.once('exit', () => resolve()));
    child.kill('SIGTERM');
    const killTimer = setTimeout(() => child.kill('SIGKILL'), 5000);
    await exited;
    clearTimeout(killTimer);
  }
  live.delete(pid);
  removeDir(dir);
}

/** Stops every broker started here that is still running, and refuses to start new ones. */
export async function stopAllBrokers(): Promise<void> {
  shuttingDown = true;
  await Promise.all([...live.keys()].map((pid) => stopChild(pid)));
}

/** Synchronous last resort (process 'exit'): SIGKILL every child started here, remove its folder. */
export function killAllBrokersNow(): void {
  for (const [pid, { child, dir }] of live) {
    if (child.exitCode === null && child.signalCode === null) child.kill('SIGKILL');
    live.delete(pid);
    removeDir(dir);
  }
  for (const dir of tempDirs) removeDir(dir);
}

/**
 * Runs a bench command that starts brokers, as its process's main: exits with its code; on an
 * error prints it after `name` and exits 1; on Ctrl-C exits 130. Either way the brokers it
 * started are stopped first, by pid, and killed if the process exits before that is done.
 */
export function runBrokerCommand(name: string, main: () => Promise<number>): void {
  process.on('exit', killAllBrokersNow);
  process.once('SIGINT', () => {
    process.stderr.write('\ninterrupted: stopping the brokers started by this run\n');
    void stopAllBrokers().finally(() => process.exit(130));
  });
  main().then(
    (code) => process.exit(code),
    async (err: unknown) => {
      process.stderr.write(`${name}: ${err instanceof Error ? err.message : String(err)}\n`);
      await stopAllBrokers();
      process.exit(1);
    },
  );
}
