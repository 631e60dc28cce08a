/**
 * The primary process of `bifro start` with `workers` > 1 (docs/multicore.md). It serves no MQTT
 * itself: it forks the workers through node:cluster (which owns the listening sockets and hands
 * each accepted connection to the next worker in turn), relays connections a worker hands over
 * to the worker that owns their tenant, restarts a worker that exits (with a growing delay), and
 * stops every worker when asked. Its log lines carry no `worker` field; the workers' do.
 */
import cluster, { type Worker } from 'node:cluster';
import path from 'node:path';
import { BifroError } from '../base/errors';
import type { ListenerAddress } from '../transport/listener-address';
import type { BrokerConfig } from '../base/config-types';
import type { Logger } from '../base/logger';
import { isWorkerMessage, type HandoverMessage, type PrimaryMessage } from '../workers/ipc';
import { isTcpHandle, sendHandle, type TcpHandle } from '../workers/socket-handle';
import { workerDataDir } from './worker-marker';

/** The worker entry, next to this file in dist/. */
const WORKER_SCRIPT = path.join(__dirname, 'worker-main.js');
/** Delay before restarting a worker that exited: doubles with each exit in a row, up to the maximum. */
export const RESTART_MIN_MS = 100;
export const RESTART_MAX_MS = 10_000;
/** A worker that ran this long counts as healthy again: its next restart waits the minimum. */
const STABLE_MS = 10_000;
/** Connections for a worker that is restarting wait at most this long, and at most this many; then they are closed. */
const HANDOVER_WAIT_MS = 5_000;
const HANDOVER_WAIT_MAX = 1_000;
/** After the graceful stop timed out, how long SIGKILLed workers are waited for. */
const KILL_WAIT_MS = 2_000;

/** What `bifro start` needs from a started broker, one process or several. */
export interface StartedBroker {
  readonly listeners: readonly ListenerAddress[];
  readonly plugins: readonly { readonly name: string; readonly version: string }[];
  stop(reason?: string): Promise<void>;
}

export interface PrimaryOptions {
  /** Limit for every worker to be ready. */
  readonly readyTimeoutMs: number;
  /** Limit for the workers' graceful stop before they are killed. */
  readonly stopTimeoutMs: number;
}

interface WaitingHandover {
  readonly message: HandoverMessage;
  readonly handle: TcpHandle;
  readonly timer: NodeJS.Timeout;
}

/** One worker index and the process currently serving it. */
interface Slot {
  readonly index: number;
  worker: Worker | undefined;
  ready: boolean;
  /** When the current process became ready (0: not yet). */
  readySince: number;
  /** Exits in a row without a stable run. */
  exits: number;
  restartTimer: NodeJS.Timeout | undefined;
  /** What the current process reported when it could not start. */
  failure: { readonly code: string | undefined; readonly message: string } | undefined;
  listeners: readonly ListenerAddress[];
  plugins: readonly string[];
  /** Handovers waiting for this worker to be ready (again). */
  readonly waiting: WaitingHandover[];
}

/** A worker's configuration: the broker's, with its own data directory. */
export function workerConfig(config: BrokerConfig, index: number): BrokerConfig {
  return { ...config, dataDir: workerDataDir(config.dataDir, index) };
}

/** The error a worker's failed start is reported with: its own code, else BIFRO_WORKER_START_FAILED. */
function startError(slot: Slot, pid: number | undefined, what: string): BifroError {
  const failure = slot.failure;
  if (failure?.code !== undefined) return new BifroError(failure.code, `worker ${slot.index}: ${failure.message}`, { worker: slot.index });
  const who = pid === undefined ? `worker ${slot.index}` : `worker ${slot.index} (pid ${pid})`;
  return new BifroError('BIFRO_WORKER_START_FAILED', `${who} ${what}${failure ? `: ${failure.message}` : ''}`, { worker: slot.index });
}

/**
 * Forks `config.workers` workers and resolves once every one is ready. A worker that fails to
 * start fails the whole start: the others are stopped and its error is thrown (its own code, or
 * BIFRO_WORKER_START_FAILED).
 */
export function startWorkers(config: BrokerConfig, logger: Logger, options: PrimaryOptions): Promise<StartedBroker> {
  const count = config.workers ?? 1;
  cluster.schedulingPolicy = cluster.SCHED_RR;
  cluster.setupPrimary({ exec: WORKER_SCRIPT, args: [], silent: false });
  const slots: Slot[] = Array.from({ length: count }, (_v, index) => ({
    index,
    worker: undefined,
    ready: false,
    readySince: 0,
    exits: 0,
    restartTimer: undefined,
    failure: undefined,
    listeners: [],
    plugins: [],
    waiting: [],
  }));
  let starting = true;
  let stopping = false;
  let stopped: Promise<void> | undefined;
  let startFailed: ((err: BifroError) => void) | undefined;
  let allReady: (() => void) | undefined;

  const send = (worker: Worker, message: PrimaryMessage): void => {
    if (worker.isConnected()) worker.send(message);
  };

  const forward = (slot: Slot, message: HandoverMessage, handle: TcpHandle): void => {
    const worker = slot.worker;
    if (worker === undefined || !worker.isConnected()) {
      handle.close();
      return;
    }
    sendHandle(
      (m, h, o, cb) => worker.send(m, h, o, cb),
      message,
      handle,
      (error) => {
        if (error !== null) logger.warn({ to: slot.index, err: error.message }, 'connection could not be passed on: closed');
      },
    );
  };

  const relay = (message: HandoverMessage, handle: TcpHandle): void => {
    const target = slots[message.to];
    if (target === undefined || stopping) {
      handle.close();
      return;
    }
    if (target.ready) {
      forward(target, message, handle);
      return;
    }
    if (target.waiting.length >= HANDOVER_WAIT_MAX) {
      logger.warn({ to: target.index }, `too many connections waiting for worker ${target.index}: closed`);
      handle.close();
      return;
    }
    const entry: WaitingHandover = {
      message,
      handle,
      timer: setTimeout(() => {
        const i = target.waiting.indexOf(entry);
        if (i >= 0) target.waiting.splice(i, 1);
        handle.close();
      }, HANDOVER_WAIT_MS),
    };
    target.waiting.push(entry);
  };

  const dropWaiting = (slot: Slot): void => {
    for (const entry of slot.waiting.splice(0)) {
      clearTimeout(entry.timer);
      entry.handle.close();
    }
  };

  const onMessage = (slot: Slot, worker: Worker, message: unknown, handle: unknown): void => {
    if (!isWorkerMessage(message) || slot.worker !== worker) {
      if (isTcpHandle(handle)) handle.close();
      return;
    }
    switch (message.bifro) {
      case 'hello':
        send(worker, { bifro: 'start', index: slot.index, count, config: workerConfig(config, slot.index) });
        return;
      case 'failed':
        slot.failure = { code: message.code, message: message.message };
        if (starting) startFailed?.(startError(slot, undefined, 'could not start'));
        return;
      case 'handover':
        if (isTcpHandle(handle)) relay(message, handle);
        return;
      case 'ready': {
        slot.ready = true;
        slot.readySince = Date.now();
        slot.listeners = message.listeners;
        slot.plugins = message.plugins;
        for (const entry of slot.waiting.splice(0)) {
          clearTimeout(entry.timer);
          forward(slot, entry.message, entry.handle);
        }
        if (starting) {
          if (slots.every((s) => s.ready)) allReady?.();
        } else {
          logger.info({ worker: slot.index, pid: worker.process.pid }, `worker ${slot.index} restarted (pid ${worker.process.pid})`);
        }
        return;
      }
    }
  };

  const onExit = (slot: Slot, worker: Worker, code: number | null, signal: string | null): void => {
    if (slot.worker !== worker) return;
    const pid = worker.process.pid;
    const ranMs = slot.ready ? Date.now() - slot.readySince : 0;
    slot.worker = undefined;
    slot.ready = false;
    if (stopping) return;
    const how = signal !== null ? `signal ${signal}` : `code ${code}`;
    if (starting) {
      // Its 'failed' message may still be on its way: give it a moment to arrive.
      setTimeout(() => startFailed?.(startError(slot, pid, `exited (${how}) before it was ready`)), 100);
      return;
    }
    if (ranMs >= STABLE_MS) slot.exits = 0;
    slot.exits++;
    const delay = Math.min(RESTART_MAX_MS, RESTART_MIN_MS * 2 ** Math.min(slot.exits - 1, 20));
    logger.error(
      { worker: slot.index, pid, code, signal, restartInMs: delay },
      `worker ${slot.index} (pid ${pid}) exited (${how}); restarting it in ${delay} ms`,
    );
    slot.restartTimer = setTimeout(() => {
      slot.restartTimer = undefined;
      if (!stopping) fork(slot);
    }, delay);
  };

  const fork = (slot: Slot): void => {
    slot.failure = undefined;
    slot.ready = false;
    slot.readySince = 0;
    const worker = cluster.fork();
    slot.worker = worker;
    worker.on('message', (message: unknown, handle: unknown) => onMessage(slot, worker, message, handle));
    worker.on('exit', (code: number | null, signal: string | null) => onExit(slot, worker, code, signal));
    worker.on('error', (err: Error) => logger.debug({ worker: slot.index, err: err.message }, 'worker IPC error'));
  };

  /** Graceful stop of every worker, SIGKILL for those still running after the timeout. */
  const stopAll = (reason: string): Promise<void> => {
    stopping = true;
    stopped ??= (async () => {
      const running: Worker[] = [];
      for (const slot of slots) {
        clearTimeout(slot.restartTimer);
        slot.restartTimer = undefined;
        dropWaiting(slot);
        if (slot.worker !== undefined && !slot.worker.isDead()) running.push(slot.worker);
      }
      const exited = (w: Worker): Promise<void> =>
        w.isDead() ? Promise.resolve() : new Promise((resolve) => w.process.once('exit', () => resolve()));
      for (const w of running) {
        if (w.isConnected()) w.send({ bifro: 'stop', reason } satisfies PrimaryMessage);
        else w.process.kill('SIGTERM');
      }
      const all = Promise.all(running.map(exited));
      let timer: NodeJS.Timeout | undefined;
      const timedOut = await Promise.race([
        all.then(() => false),
        new Promise<boolean>((resolve) => {
          timer = setTimeout(() => resolve(true), options.stopTimeoutMs);
        }),
      ]);
      clearTimeout(timer);
      if (timedOut) {
        const left = running.filter((w) => !w.isDead());
        logger.error({ workers: left.map((w) => w.process.pid) }, `${left.length} worker(s) did not stop in time: killed`);
        for (const w of left) w.process.kill('SIGKILL');
        await Promise.race([all, new Promise((resolve) => setTimeout(resolve, KILL_WAIT_MS).unref())]);
      }
      logger.info({ workers: count }, 'workers stopped');
    })();
    return stopped;
  };

  return new Promise<StartedBroker>((resolve, reject) => {
    const readyTimer = setTimeout(() => {
      const late = slots.filter((s) => !s.ready).map((s) => s.index);
      startFailed?.(
        new BifroError(
          'BIFRO_WORKER_START_FAILED',
          `worker(s) ${late.join(', ')} not ready within ${Math.round(options.readyTimeoutMs / 1000)} s`,
        ),
      );
    }, options.readyTimeoutMs);
    startFailed = (err) => {
      startFailed = undefined;
      allReady = undefined;
      clearTimeout(readyTimer);
      void stopAll('start failed').then(() => reject(err));
    };
    allReady = () => {
      startFailed = undefined;
      allReady = undefined;
      clearTimeout(readyTimer);
      starting = false;
      const listeners = slots[0]!.listeners;
      for (const slot of slots) {
        const same = slot.listeners.length === listeners.length && slot.listeners.every((l, i) => l.port === listeners[i]!.port);
        if (!same)
          logger.warn({ worker: slot.index, listeners: slot.listeners }, `worker ${slot.index} listens on other ports than worker 0`);
      }
      const plugins = slots[0]!.plugins.map((p) => {
        const at = p.lastIndexOf('@');
        return at > 0 ? { name: p.slice(0, at), version: p.slice(at + 1) } : { name: p, version: '' };
      });
      resolve({ listeners, plugins, stop: (reason = 'stop requested') => stopAll(reason) });
    };
    logger.info({ workers: count, dataDir: config.dataDir }, `starting ${count} workers`);
    for (const slot of slots) fork(slot);
  });
}
