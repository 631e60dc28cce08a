import { spawn } from 'node:child_process';
import { closeSync, openSync, promises as fs } from 'node:fs';
import path from 'node:path';
import { BifroError } from '../../base/errors';
import { startBroker } from '../../runtime/broker';
import { BROKER_UMASK } from '../../security/secure-defaults';
import type { BrokerConfig, ListenerConfig } from '../../base/config-types';
import { DASHBOARD_PREFIX } from '../../api/dashboard';
import { createLogger, type Logger } from '../../base/logger';
import { isRunning, pidHolder, readPidFile, removePidFile, writePidFile } from '../../runtime/pid-file';
import { startWorkers, type StartedBroker } from '../../runtime/primary';
import { checkWorkerCount } from '../../runtime/worker-marker';
import { loadCliConfig } from '../cli-config';
import { EXIT, type CliIo } from '../cli-io';
import { reportError } from '../error-report';
import type { CommandArgs } from '../usage';

/** Set by `start --daemon` in the environment of the background broker it spawns. */
export const DAEMON_CHILD_ENV = 'BIFRO_DAEMON_CHILD';
/** How long a graceful stop may take before the process exits anyway. */
export const SHUTDOWN_TIMEOUT_MS = 30_000;
/** Log lines shown when the background broker fails to start. */
const LOG_TAIL_LINES = 20;

/** What the background broker tells `start --daemon` over the IPC channel. */
type DaemonMessage =
  | {
      readonly type: 'ready';
      readonly pid: number;
      readonly listeners: readonly ListenerSummary[];
      readonly api?: string | undefined;
      readonly dashboard?: string | undefined;
    }
  | { readonly type: 'failed'; readonly exitCode: number; readonly lines: readonly string[] };

interface ListenerSummary {
  readonly name: string;
  readonly type: string;
  readonly host: string;
  readonly port: number;
  /** How a client reaches it: `mqtt://127.0.0.1:1883`, `ws://127.0.0.1:8083/mqtt`. */
  readonly url: string;
}

/**
 * `bifro start`. Foreground: resolves with the exit code once a signal has stopped the broker.
 * `rawArgs` are the command's own arguments, re-used for the background process of --daemon.
 */
export async function startCommand(args: CommandArgs, rawArgs: readonly string[], io: CliIo, script: string): Promise<number> {
  if (args.daemon) {
    const config = await loadCliConfig(args, io);
    return startDaemon(config, rawArgs, io, script);
  }
  const daemonChild = io.env[DAEMON_CHILD_ENV] === '1' && typeof process.send === 'function';
  if (!daemonChild) return runForeground(args, io);
  try {
    return await runForeground(args, io, ({ listeners, api, dashboard }) =>
      sendToParent({ type: 'ready', pid: process.pid, listeners, api, dashboard }),
    );
  } catch (err) {
    const lines: string[] = [];
    const exitCode = reportError(err, { ...io, err: (text) => (lines.push(text), io.err(text)) });
    await sendToParent({ type: 'failed', exitCode, lines });
    return exitCode;
  }
}

// ---------------------------------------------------------------- foreground

async function runForeground(args: CommandArgs, io: CliIo, onReady?: (summary: StartupSummary) => Promise<void>): Promise<number> {
  const config = await loadCliConfig(args, io);
  // What the broker writes (pid file, data directory, storage files created later too) is the owner's only.
  process.umask(BROKER_UMASK);
  const logger = createLogger({ level: config.log.level, ...(config.log.pretty !== undefined ? { pretty: config.log.pretty } : {}) });
  const tookOver = await writePidFile(config.pidFile);
  // A pid reused by another process (PID 1 after a container restart) must not keep the broker down.
  if (tookOver !== undefined) logger.warn({ pidFile: config.pidFile }, tookOver);
  const workers = config.workers ?? 1;
  let broker: StartedBroker;
  /** The admin API's address (one process only: docs/api.md § Limits). */
  let apiUrl: string | undefined;
  try {
    // The data directory keeps its worker count: tenants are assigned to workers by it (docs/multicore.md).
    await checkWorkerCount(config.dataDir, workers);
    if (workers > 1)
      broker = await startWorkers(config, logger, { readyTimeoutMs: readyTimeoutMs(config), stopTimeoutMs: SHUTDOWN_TIMEOUT_MS - 5_000 });
    else {
      const single = await startBroker(config, logger);
      apiUrl = single.api?.url;
      broker = single;
    }
  } catch (err) {
    await removePidFile(config.pidFile, process.pid);
    await flush(logger);
    throw err;
  }
  const summary = startupSummary(config, broker, apiUrl);
  const plugins = broker.plugins.map((p) => `${p.name}@${p.version}`);
  logger.info(
    {
      nodeId: config.nodeId,
      config: config.file ?? null,
      listeners: summary.listeners,
      api: summary.api ?? null,
      dashboard: summary.dashboard ?? null,
      plugins,
      pidFile: config.pidFile,
      workers,
    },
    `bifro started: ${summary.text}; plugins: ${plugins.join(', ') || 'none'}`,
  );
  const stopped = waitForSignal(broker, config, logger);
  if (onReady) await onReady(summary);
  return stopped;
}

/** Where a started broker can be reached. */
interface StartupSummary {
  readonly listeners: ListenerSummary[];
  readonly api: string | undefined;
  readonly dashboard: string | undefined;
  /** The listeners, API and dashboard as the `bifro started` line says them. */
  readonly text: string;
}

/** The URL scheme clients use for each listener type (MQTT.js and most clients take these). */
const URL_SCHEMES: Readonly<Record<ListenerConfig['type'], string>> = { tcp: 'mqtt', tls: 'mqtts', ws: 'ws', wss: 'wss' };

/** `host:port`, an IPv6 host in brackets. */
function hostPort(host: string, port: number): string {
  return `${host.includes(':') ? `[${host}]` : host}:${port}`;
}

/**
 * Where the started broker can be reached, for the `bifro started` line: every listener with its
 * URL (the WebSocket path included), the admin API and, when served, the dashboard. One line an
 * operator can copy from, instead of one per listener before it.
 */
function startupSummary(config: BrokerConfig, broker: Pick<StartedBroker, 'listeners'>, apiUrl: string | undefined): StartupSummary {
  const listeners = broker.listeners.map(({ name, type, host, port }) => {
    const configured = config.listeners.find((l) => l.name === name);
    const scheme = URL_SCHEMES[type as ListenerConfig['type']] ?? type;
    return { name, type, host, port, url: `${scheme}://${hostPort(host, port)}${configured?.path ?? ''}` };
  });
  const dashboard = apiUrl !== undefined && config.api?.dashboard === true ? `${apiUrl}${DASHBOARD_PREFIX}/` : undefined;
  const parts = [
    listeners.map((l) => `${l.url} (${l.name})`).join(', '),
    ...(apiUrl !== undefined ? [`admin API ${apiUrl}`] : []),
    ...(dashboard !== undefined ? [`dashboard ${dashboard}`] : []),
  ];
  return { listeners, api: apiUrl, dashboard, text: parts.join('; ') };
}

/** Resolves with the exit code after SIGINT/SIGTERM stopped the broker; a second signal exits at once. */
function waitForSignal(broker: StartedBroker, config: BrokerConfig, logger: Logger): Promise<number> {
  return new Promise<number>((resolve) => {
    let stopping = false;
    const finish = async (code: number): Promise<void> => {
      await removePidFile(config.pidFile, process.pid).catch(() => false);
      await flush(logger);
      resolve(code);
    };
    const onSignal = (signal: NodeJS.Signals): void => {
      if (stopping) {
        logger.warn({ signal }, `received ${signal} again: exiting without waiting for the broker to stop`);
        void finish(EXIT.FAILURE);
        return;
      }
      stopping = true;
      logger.info({ signal }, `received ${signal}: stopping`);
      const force = setTimeout(() => {
        logger.error(`the broker did not stop within ${SHUTDOWN_TIMEOUT_MS / 1000} s: exiting anyway`);
        void finish(EXIT.FAILURE);
      }, SHUTDOWN_TIMEOUT_MS);
      force.unref();
      broker.stop(`received ${signal}`).then(
        () => {
          clearTimeout(force);
          logger.info('bifro stopped');
          void finish(EXIT.OK);
        },
        (err: unknown) => {
          clearTimeout(force);
          logger.error({ err }, 'error while stopping the broker');
          void finish(EXIT.FAILURE);
        },
      );
    };
    process.on('SIGINT', onSignal);
    process.on('SIGTERM', onSignal);
  });
}

function flush(logger: Logger): Promise<void> {
  return new Promise((resolve) => logger.flush(() => resolve()));
}

function sendToParent(message: DaemonMessage): Promise<void> {
  return new Promise((resolve) => {
    if (!process.send || !process.connected) return resolve();
    process.send(message, undefined, undefined, () => {
      if (message.type === 'ready' && process.connected) process.disconnect();
      resolve();
    });
  });
}

// ---------------------------------------------------------------- daemon

/** Time the background broker gets to become ready: plugin inits may each take initTimeoutMs. */
function readyTimeoutMs(config: BrokerConfig): number {
  const p = config.plugins;
  const count = p.auth.length + p.acl.length + p.events.length + 4;
  return 15_000 + p.initTimeoutMs * count;
}

async function startDaemon(config: BrokerConfig, rawArgs: readonly string[], io: CliIo, script: string): Promise<number> {
  const holder = await readPidFile(config.pidFile).catch(() => undefined);
  if (holder !== undefined && pidHolder(holder, config.pidFile).state === 'broker') {
    throw new BifroError('BIFRO_PID_ALREADY_RUNNING', `a broker is already running with pid ${holder} (pid file ${config.pidFile})`, {
      file: config.pidFile,
      pid: holder,
    });
  }
  process.umask(BROKER_UMASK);
  await fs.mkdir(config.dataDir, { recursive: true, mode: 0o700 });
  const logFile = path.join(config.dataDir, 'bifro.log');
  const logStart = await fs.stat(logFile).then(
    (s) => s.size,
    () => 0,
  );
  const fd = openSync(logFile, 'a', 0o600);
  const childArgs = ['start', ...rawArgs.filter((a) => a !== '--daemon')];
  const child = spawn(process.execPath, [...process.execArgv, script, ...childArgs], {
    cwd: io.cwd,
    env: { ...io.env, [DAEMON_CHILD_ENV]: '1' },
    detached: true,
    stdio: ['ignore', fd, fd, 'ipc'],
  });
  closeSync(fd);

  type Outcome =
    | DaemonMessage
    | { type: 'exited'; code: number | null; signal: NodeJS.Signals | null }
    | { type: 'timeout' }
    | { type: 'spawn-error'; err: Error };
  const timeoutMs = readyTimeoutMs(config);
  const outcome = await new Promise<Outcome>((resolve) => {
    const timer = setTimeout(() => resolve({ type: 'timeout' }), timeoutMs);
    const done = (o: Outcome): void => {
      clearTimeout(timer);
      resolve(o);
    };
    child.on('message', (m: DaemonMessage) => {
      if (m && (m.type === 'ready' || m.type === 'failed')) done(m);
    });
    child.on('exit', (code, signal) => done({ type: 'exited', code, signal }));
    child.on('error', (err) => done({ type: 'spawn-error', err }));
  });
  child.removeAllListeners();
  if (child.connected) child.disconnect();
  child.unref();

  switch (outcome.type) {
    case 'ready': {
      // As the broker's own `listening:` lines say them (scripts read this line); the URLs are in the log.
      const where = outcome.listeners.map((l) => `${l.type}://${hostPort(l.host, l.port)} (${l.name})`).join(', ');
      io.out(`bifro started in the background (pid ${outcome.pid})`);
      io.out(`listening: ${where}`);
      if (outcome.api !== undefined) io.out(`admin API: ${outcome.api}`);
      if (outcome.dashboard !== undefined) io.out(`dashboard: ${outcome.dashboard}`);
      io.out(`log: ${logFile}`);
      return EXIT.OK;
    }
    case 'failed':
      for (const line of outcome.lines) io.err(line);
      io.err(`the background broker did not start; log: ${logFile}`);
      return outcome.exitCode === EXIT.OK ? EXIT.FAILURE : outcome.exitCode;
    case 'exited':
      return daemonFailed(
        io,
        logFile,
        logStart,
        `the background broker exited (${outcome.signal ? `signal ${outcome.signal}` : `code ${outcome.code}`}) before it was ready`,
      );
    case 'timeout':
      if (child.pid !== undefined && isRunning(child.pid)) process.kill(child.pid, 'SIGTERM');
      return daemonFailed(
        io,
        logFile,
        logStart,
        `the background broker (pid ${child.pid}) was not ready within ${Math.round(timeoutMs / 1000)} s; it was sent SIGTERM`,
      );
    case 'spawn-error':
      return daemonFailed(io, logFile, logStart, `cannot start the background broker: ${outcome.err.message}`);
  }
}

async function daemonFailed(io: CliIo, logFile: string, from: number, reason: string): Promise<number> {
  io.err(`error BIFRO_CLI_DAEMON_FAILED: ${reason}`);
  const tail = await logTail(logFile, from);
  if (tail.length > 0) {
    io.err(`last lines of ${logFile}:`);
    for (const line of tail) io.err(`  ${line}`);
  } else {
    io.err(`(nothing was written to ${logFile})`);
  }
  return EXIT.FAILURE;
}

/** The last lines written to the log since `from`; pino JSON lines are shown as `level message`. */
async function logTail(logFile: string, from: number): Promise<string[]> {
  let text: string;
  try {
    const buffer = await fs.readFile(logFile);
    text = buffer.subarray(from).toString('utf8');
  } catch {
    return [];
  }
  const lines = text.split('\n').filter((l) => l.trim() !== '');
  return lines.slice(-LOG_TAIL_LINES).map(readableLogLine);
}

const LEVEL_NAMES: Readonly<Record<number, string>> = { 10: 'trace', 20: 'debug', 30: 'info', 40: 'warn', 50: 'error', 60: 'fatal' };

function readableLogLine(line: string): string {
  if (!line.startsWith('{')) return line;
  try {
    const entry = JSON.parse(line) as { level?: number; msg?: string; err?: { message?: string } };
    if (typeof entry.msg !== 'string') return line;
    const level = LEVEL_NAMES[entry.level ?? 30] ?? String(entry.level);
    return `${level} ${entry.msg}${entry.err?.message ? `: ${entry.err.message}` : ''}`;
  } catch {
    return line;
  }
}
