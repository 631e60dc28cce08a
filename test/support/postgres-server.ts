import { execFile, execFileSync, spawn, type ChildProcess } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { chownSync, existsSync, mkdirSync, mkdtempSync, readdirSync, rmSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { promisify } from 'node:util';
import { Client } from 'pg';
import { freePort, killOnExit, sleep } from './server-processes';

/**
 * A real PostgreSQL server for tests, from the distribution's package (Debian:
 * /usr/lib/postgresql/<version>/bin), in a temporary folder, listening on 127.0.0.1 on a free
 * port, with a password-protected superuser reached over TCP with scram-sha-256. Started once per
 * test file (beforeAll), stopped by its pid (afterAll). As root (the CI), initdb and postgres run
 * as the `postgres` user, which owns the folder. Every wait is bounded.
 */

const run = promisify(execFile);

/** The server's superuser: `connectionString` logs in as it. */
export const PG_SUPERUSER = 'bifro';
/** How long a start may take before the test fails. */
export const PG_START_TIMEOUT_MS = 30_000;
const STOP_TIMEOUT_MS = 10_000;

export interface PostgresServer {
  /** `postgres://bifro:<password>@127.0.0.1:<port>/postgres`. */
  readonly connectionString: string;
  readonly host: string;
  readonly port: number;
  readonly password: string;
  /** The temporary folder (data directory, socket directory). */
  readonly dir: string;
  /** Whether the server process runs. */
  readonly running: boolean;
  /** The pid of the running postmaster (undefined when stopped). */
  readonly pid: number | undefined;
  /** A connection string for another role of this server. */
  connectionStringFor(user: string, password: string, database?: string): string;
  /** Runs SQL as the superuser (one connection per call); resolves with the rows. */
  query<R extends Record<string, unknown> = Record<string, unknown>>(sql: string, params?: readonly unknown[]): Promise<R[]>;
  /** Stops the server (fast shutdown: SIGINT to its pid; SIGKILL after 10 s). The data stays. */
  stop(): Promise<void>;
  /** Starts it again on the same data and port; resolves once it accepts connections. */
  start(): Promise<void>;
  /** Everything the server wrote to stdout and stderr. */
  output(): string;
  /** Stops the server and removes its folder. */
  dispose(): Promise<void>;
}

/** The folder of initdb and postgres: $BIFRO_PG_BIN, else the newest /usr/lib/postgresql/<version>/bin. */
export function postgresBinDir(): string {
  const fromEnv = process.env.BIFRO_PG_BIN;
  if (fromEnv !== undefined && fromEnv !== '') {
    if (!existsSync(path.join(fromEnv, 'initdb'))) throw new Error(`BIFRO_PG_BIN=${fromEnv} has no initdb`);
    return fromEnv;
  }
  const root = '/usr/lib/postgresql';
  const versions = existsSync(root)
    ? readdirSync(root)
        .filter((v) => existsSync(path.join(root, v, 'bin', 'initdb')) && existsSync(path.join(root, v, 'bin', 'postgres')))
        .sort((a, b) => Number.parseFloat(b) - Number.parseFloat(a))
    : [];
  if (versions.length === 0) {
    throw new Error(
      'PostgreSQL is not installed: no /usr/lib/postgresql/<version>/bin/initdb. Install the server package ' +
        '(Debian/Ubuntu: apt-get install postgresql; .ci/run does it) or point BIFRO_PG_BIN at the folder of initdb and postgres.',
    );
  }
  return path.join(root, versions[0]!, 'bin');
}

/** uid and gid to run the server as: the `postgres` user when we are root (initdb refuses root), else ourselves. */
function serverIdentity(): { uid: number; gid: number } | undefined {
  if (process.getuid?.() !== 0) return undefined;
  try {
    const uid = Number(execFileSync('id', ['-u', 'postgres'], { encoding: 'utf8' }).trim());
    const gid = Number(execFileSync('id', ['-g', 'postgres'], { encoding: 'utf8' }).trim());
    return { uid, gid };
  } catch {
    throw new Error('running as root, but there is no `postgres` user to run initdb and postgres as (the postgresql package creates it)');
  }
}

/**
 * Creates a cluster in a temporary folder and starts it (bounded by {@link PG_START_TIMEOUT_MS}).
 * Fails with a clear message when PostgreSQL is not installed.
 */
export async function startPostgres(): Promise<PostgresServer> {
  const bin = postgresBinDir();
  const identity = serverIdentity();
  const dir = mkdtempSync(path.join(os.tmpdir(), 'bifro-pg-'));
  const data = path.join(dir, 'data');
  const sockets = path.join(dir, 'sock');
  mkdirSync(sockets);
  const password = randomBytes(12).toString('hex');
  const pwfile = path.join(dir, 'pwfile');
  writeFileSync(pwfile, `${password}\n`, { mode: 0o600 });
  if (identity !== undefined) {
    for (const p of [dir, sockets, pwfile]) chownSync(p, identity.uid, identity.gid);
  }
  const env = { ...process.env, LC_ALL: 'C', LANG: 'C' };
  try {
    await run(
      path.join(bin, 'initdb'),
      [
        '-D',
        data,
        '-U',
        PG_SUPERUSER,
        `--pwfile=${pwfile}`,
        '--auth-local=trust',
        '--auth-host=scram-sha-256',
        '-E',
        'UTF8',
        '--no-locale',
        '--no-sync',
      ],
      { ...identity, env, timeout: PG_START_TIMEOUT_MS, cwd: dir },
    );
  } catch (err) {
    rmSync(dir, { recursive: true, force: true });
    const e = err as { stderr?: string; message: string };
    throw new Error(`initdb failed: ${e.stderr?.trim() || e.message}`);
  }

  let port = 0;
  let child: ChildProcess | undefined;
  let output = '';
  const host = '127.0.0.1';
  const connectionStringFor = (user: string, pw: string, database = 'postgres'): string =>
    `postgres://${encodeURIComponent(user)}:${encodeURIComponent(pw)}@${host}:${port}/${database}`;

  const connectsOnce = async (): Promise<boolean> => {
    const client = new Client({ connectionString: connectionStringFor(PG_SUPERUSER, password), connectionTimeoutMillis: 1000 });
    client.on('error', () => undefined);
    try {
      await client.connect();
      await client.query('SELECT 1');
      return true;
    } catch {
      return false;
    } finally {
      await client.end().catch(() => undefined);
    }
  };

  const launch = async (): Promise<void> => {
    output = '';
    const proc = spawn(
      path.join(bin, 'postgres'),
      [
        '-D',
        data,
        '-k',
        sockets,
        '-c',
        `listen_addresses=${host}`,
        '-c',
        `port=${port}`,
        '-c',
        'fsync=off',
        '-c',
        'synchronous_commit=off',
        '-c',
        'full_page_writes=off',
        '-c',
        'max_connections=60',
      ],
      { ...identity, env, cwd: dir, stdio: ['ignore', 'pipe', 'pipe'] },
    );
    killOnExit(proc);
    child = proc;
    let exited = false;
    proc.once('exit', () => (exited = true));
    proc.stdout?.on('data', (b: Buffer) => (output += b.toString()));
    proc.stderr?.on('data', (b: Buffer) => (output += b.toString()));
    const deadline = Date.now() + PG_START_TIMEOUT_MS;
    for (;;) {
      if (exited) {
        child = undefined;
        throw new Error(`postgres exited while starting (port ${port}):\n${output.trim()}`);
      }
      if (await connectsOnce()) return;
      if (Date.now() > deadline) {
        await stopProcess(proc);
        child = undefined;
        throw new Error(`postgres did not accept connections within ${PG_START_TIMEOUT_MS} ms:\n${output.trim()}`);
      }
      await sleep(100);
    }
  };

  const stopProcess = async (proc: ChildProcess): Promise<void> => {
    if (proc.exitCode !== null || proc.signalCode !== null) return;
    const exited = new Promise<void>((resolve) => proc.once('exit', () => resolve()));
    if (proc.pid !== undefined) process.kill(proc.pid, 'SIGINT');
    const timer = setTimeout(() => {
      if (proc.pid !== undefined && proc.exitCode === null && proc.signalCode === null) process.kill(proc.pid, 'SIGKILL');
    }, STOP_TIMEOUT_MS);
    await exited;
    clearTimeout(timer);
  };

  // A free port may be taken between the check and the bind: try a few.
  for (let attempt = 1; ; attempt++) {
    port = await freePort();
    try {
      await launch();
      break;
    } catch (err) {
      if (attempt >= 3 || !/could not (bind|create listen)/i.test(String(err))) {
        rmSync(dir, { recursive: true, force: true });
        throw err;
      }
    }
  }

  const server: PostgresServer = {
    get connectionString() {
      return connectionStringFor(PG_SUPERUSER, password);
    },
    host,
    get port() {
      return port;
    },
    password,
    dir,
    get running() {
      return child !== undefined;
    },
    get pid() {
      return child?.pid;
    },
    connectionStringFor,
    async query<R extends Record<string, unknown>>(sql: string, params: readonly unknown[] = []): Promise<R[]> {
      const client = new Client({ connectionString: connectionStringFor(PG_SUPERUSER, password), connectionTimeoutMillis: 5000 });
      client.on('error', () => undefined);
      await client.connect();
      try {
        const result = await client.query<R>(sql, [...params]);
        return result.rows;
      } finally {
        await client.end().catch(() => undefined);
      }
    },
    async stop() {
      const proc = child;
      child = undefined;
      if (proc !== undefined) await stopProcess(proc);
    },
    async start() {
      if (child !== undefined) return;
      await launch();
    },
    output: () => output,
    async dispose() {
      await server.stop();
      rmSync(dir, { recursive: true, force: true });
    },
  };
  return server;
}
