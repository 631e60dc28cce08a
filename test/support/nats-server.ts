import { spawn, type ChildProcess } from 'node:child_process';
import { existsSync, mkdtempSync, rmSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { freePort, killOnExit, sleep } from './server-processes';

/**
 * Real nats-server processes for tests (the distribution's package: /usr/sbin/nats-server, or
 * $BIFRO_NATS_SERVER), with JetStream in temporary folders, on free 127.0.0.1 ports: one server,
 * or a cluster of three joined by routes (for R3). Ready once the monitoring port's
 * `/healthz?js-enabled-only=true` answers 200; stopped by pid. Every wait is bounded.
 */

/** How long a start may take before the test fails. */
export const NATS_START_TIMEOUT_MS = 20_000;
const STOP_TIMEOUT_MS = 10_000;

export interface NatsServer {
  readonly name: string;
  /** `nats://127.0.0.1:<port>`. */
  readonly url: string;
  readonly port: number;
  readonly monitorPort: number;
  readonly pid: number | undefined;
  /** The command line it was started with (docs/cluster.md shows the same). */
  readonly args: readonly string[];
  output(): string;
  /** SIGTERM to its pid (SIGKILL after 10 s); resolves once it exited. */
  stop(): Promise<void>;
  /** SIGKILL: no shutdown. Resolves once it exited. */
  kill9(): Promise<void>;
  /** After it exited: the same server again (name, ports, store folder, routes); resolves once it is healthy. */
  restart(): Promise<void>;
}

export interface NatsCluster {
  readonly servers: readonly NatsServer[];
  readonly urls: readonly string[];
  /** Stops every server and removes the folder. */
  dispose(): Promise<void>;
}

/** $BIFRO_NATS_SERVER, else nats-server on the PATH or in /usr/sbin; fails clearly when it is not installed. */
export function natsServerBinary(): string {
  const fromEnv = process.env.BIFRO_NATS_SERVER;
  if (fromEnv !== undefined && fromEnv !== '') return fromEnv;
  const dirs = [...(process.env.PATH ?? '').split(path.delimiter), '/usr/sbin', '/usr/local/bin'];
  for (const d of dirs) if (d !== '' && existsSync(path.join(d, 'nats-server'))) return path.join(d, 'nats-server');
  throw new Error(
    'nats-server is not installed: install the package (Debian/Ubuntu: apt-get install nats-server; .ci/run does it) or set BIFRO_NATS_SERVER.',
  );
}

/**
 * `/healthz?js-enabled-only=true` once JetStream runs; plain `/healthz` (`full`) only once it also
 * reached a JetStream meta leader, without which a fresh cluster cannot create a stream (a broker
 * started before then can outwait its storage init on a loaded machine).
 */
async function healthy(monitorPort: number, full = false): Promise<boolean> {
  try {
    const query = full ? '' : '?js-enabled-only=true';
    const res = await fetch(`http://127.0.0.1:${monitorPort}/healthz${query}`, { signal: AbortSignal.timeout(1000) });
    return res.status === 200;
  } catch {
    return false;
  }
}

interface Ports {
  readonly port: number;
  readonly monitorPort: number;
  readonly clusterPort?: number;
}

function launch(name: string, storeDir: string, ports: Ports, cluster?: { readonly routes: readonly number[] }): NatsServer {
  let run = spawnServer(name, storeDir, ports, cluster);
  return {
    name,
    url: `nats://127.0.0.1:${ports.port}`,
    port: ports.port,
    monitorPort: ports.monitorPort,
    get pid() {
      return run.child.exitCode === null && run.child.signalCode === null ? run.child.pid : undefined;
    },
    args: run.args,
    output: () => run.out(),
    async stop() {
      const { child, exited } = run;
      if (child.exitCode !== null || child.signalCode !== null) return;
      child.kill('SIGTERM');
      const timer = setTimeout(() => child.kill('SIGKILL'), STOP_TIMEOUT_MS);
      await exited;
      clearTimeout(timer);
    },
    async kill9() {
      const { child, exited } = run;
      if (child.exitCode !== null || child.signalCode !== null) return;
      child.kill('SIGKILL');
      await exited;
    },
    async restart() {
      if (run.child.exitCode === null && run.child.signalCode === null) throw new Error(`nats-server ${name} is still running`);
      run = spawnServer(name, storeDir, ports, cluster);
      await waitHealthy([this]);
    },
  };
}

interface Run {
  readonly child: ChildProcess;
  readonly args: readonly string[];
  readonly exited: Promise<void>;
  out(): string;
}

function spawnServer(name: string, storeDir: string, ports: Ports, cluster?: { readonly routes: readonly number[] }): Run {
  const args = ['-n', name, '-a', '127.0.0.1', '-p', String(ports.port), '-m', String(ports.monitorPort), '-js', '-sd', storeDir];
  if (cluster !== undefined && ports.clusterPort !== undefined)
    args.push(
      '--cluster_name',
      'bifro-test',
      '--cluster',
      `nats://127.0.0.1:${ports.clusterPort}`,
      '--routes',
      cluster.routes.map((p) => `nats://127.0.0.1:${p}`).join(','),
    );
  const child = spawn(natsServerBinary(), args, { stdio: ['ignore', 'pipe', 'pipe'] });
  killOnExit(child);
  let out = '';
  child.stdout!.on('data', (d: Buffer) => (out += d.toString()));
  child.stderr!.on('data', (d: Buffer) => (out += d.toString()));
  const exited = new Promise<void>((resolve) => child.once('exit', () => resolve()));
  return { child, args, exited, out: () => out };
}

async function waitHealthy(servers: readonly NatsServer[], full = false): Promise<void> {
  const deadline = Date.now() + NATS_START_TIMEOUT_MS;
  for (const s of servers) {
    while (!(await healthy(s.monitorPort, full))) {
      if (s.pid === undefined) throw new Error(`nats-server ${s.name} exited before it was ready:\n${s.output()}`);
      if (Date.now() > deadline) throw new Error(`nats-server ${s.name} not ready in ${NATS_START_TIMEOUT_MS / 1000} s:\n${s.output()}`);
      await sleep(100);
    }
  }
}

/** One nats-server with JetStream, in its own temporary folder. */
export async function startNatsServer(): Promise<NatsCluster> {
  const dir = mkdtempSync(path.join(os.tmpdir(), 'bifro-nats-'));
  const server = launch('n1', path.join(dir, 'n1'), { port: await freePort(), monitorPort: await freePort() });
  return wrap(dir, [server]);
}

/** Three nats-servers joined by routes (one JetStream domain, room for R3), in one temporary folder. */
export async function startNatsCluster(size = 3): Promise<NatsCluster> {
  const dir = mkdtempSync(path.join(os.tmpdir(), 'bifro-nats-'));
  const ports: Ports[] = [];
  for (let i = 0; i < size; i++) ports.push({ port: await freePort(), monitorPort: await freePort(), clusterPort: await freePort() });
  const routes = ports.map((p) => p.clusterPort!);
  const servers = ports.map((p, i) => launch(`n${i + 1}`, path.join(dir, `n${i + 1}`), p, { routes }));
  return wrap(dir, servers);
}

async function wrap(dir: string, servers: NatsServer[]): Promise<NatsCluster> {
  const dispose = async (): Promise<void> => {
    await Promise.all(servers.map((s) => s.stop()));
    rmSync(dir, { recursive: true, force: true });
  };
  try {
    // A fresh cluster is ready once it has a meta leader; a restarted server (restart) only needs JetStream.
    await waitHealthy(servers, true);
  } catch (err) {
    await dispose();
    throw err;
  }
  return { servers, urls: servers.map((s) => s.url), dispose };
}
