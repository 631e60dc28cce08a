/**
 * A worker process of `bifro start` with `workers` > 1 (docs/multicore.md), forked by the primary
 * through node:cluster. It waits for its index and configuration, runs a full broker
 * (startBroker) on its own data directory and the shared listeners, hands the connections of
 * tenants it does not own to the primary, which passes them on, and adopts those handed to it.
 *
 * Signals: SIGTERM stops this worker gracefully (the primary then starts a new one); SIGINT is
 * ignored, because Ctrl-C reaches every process of the terminal's group and the primary stops the
 * workers itself. When the primary is gone (its IPC channel closes) the worker stops too.
 */
import cluster from 'node:cluster';
import type net from 'node:net';
import { BifroError, describeError } from '../base/errors';
import { startBroker, type RunningBroker } from './broker';
import type { BrokerConfig } from '../base/config-types';
import { createLogger, type Logger } from '../base/logger';
import type { WorkerRouter } from '../workers/handover';
import { isPrimaryMessage, type HandoverMessage, type WorkerMessage } from '../workers/ipc';
import { isTcpHandle, sendHandle, wrapHandle, type IpcSend, type TcpHandle } from '../workers/socket-handle';

/** How long a worker's graceful stop may take before it exits anyway (the primary waits a little longer). */
export const WORKER_STOP_TIMEOUT_MS = 25_000;

const toPrimary: IpcSend = (message, handle, options, callback) => {
  if (process.send === undefined || !process.connected) {
    process.nextTick(callback, new Error('no IPC channel to the primary'));
    return false;
  }
  return process.send(message, handle, options, callback);
};

function tell(message: WorkerMessage): Promise<void> {
  return new Promise((resolve) => {
    if (process.send === undefined || !process.connected) {
      resolve();
      return;
    }
    process.send(message, undefined, undefined, () => resolve());
  });
}

/** Hands connections to the primary and delivers those it passes here. */
class ProcessRouter implements WorkerRouter {
  private adopt: ((socket: net.Socket, message: HandoverMessage) => void) | undefined;

  constructor(
    readonly index: number,
    readonly count: number,
    readonly logger: Logger,
  ) {}

  send(message: HandoverMessage, handle: TcpHandle): void {
    sendHandle(toPrimary, message, handle, (error) => {
      if (error !== null)
        this.logger.warn({ tenantId: message.tenantId, to: message.to, err: error.message }, 'connection could not be handed over: closed');
    });
  }

  receive(adopt: (socket: net.Socket, message: HandoverMessage) => void): void {
    this.adopt = adopt;
  }

  deliver(message: HandoverMessage, handle: TcpHandle): void {
    const socket = wrapHandle(handle);
    if (this.adopt === undefined) socket.destroy();
    else this.adopt(socket, message);
  }
}

/** The worker's life: hello → start → ready → (handovers) → stop. */
export function runWorker(): void {
  let router: ProcessRouter | undefined;
  let logger: Logger | undefined;
  let started: Promise<RunningBroker | undefined> | undefined;
  let stopping = false;

  const exit = (code: number): void => {
    if (logger === undefined) process.exit(code);
    else logger.flush(() => process.exit(code));
  };

  const stop = (reason: string): void => {
    if (stopping) return;
    stopping = true;
    const force = setTimeout(() => {
      logger?.error(`worker did not stop within ${WORKER_STOP_TIMEOUT_MS / 1000} s: exiting anyway`);
      exit(1);
    }, WORKER_STOP_TIMEOUT_MS);
    force.unref();
    void (async () => {
      const broker = await started;
      try {
        await broker?.stop(reason);
      } catch (err) {
        logger?.error({ err: describeError(err) }, 'error while stopping the worker');
      }
      exit(0);
    })();
  };

  const start = async (index: number, count: number, config: BrokerConfig): Promise<RunningBroker | undefined> => {
    const log = createLogger({ level: config.log.level, ...(config.log.pretty !== undefined ? { pretty: config.log.pretty } : {}) }).child({
      worker: index,
    });
    logger = log;
    router = new ProcessRouter(index, count, log);
    let broker: RunningBroker;
    try {
      broker = await startBroker(config, log, { worker: router });
    } catch (err) {
      const code = err instanceof BifroError ? err.code : undefined;
      const message = describeError(err);
      log.error({ err: message }, `worker ${index} could not start`);
      await tell({
        bifro: 'failed',
        code,
        message: code !== undefined && message.startsWith(`${code}: `) ? message.slice(code.length + 2) : message,
      });
      exit(1);
      return undefined;
    }
    await tell({ bifro: 'ready', listeners: broker.listeners, plugins: broker.plugins.map((p) => `${p.name}@${p.version}`) });
    log.info({ dataDir: config.dataDir }, `worker ${index} of ${count} ready`);
    return broker;
  };

  process.on('message', (message: unknown, handle: unknown) => {
    if (!isPrimaryMessage(message)) return;
    switch (message.bifro) {
      case 'start':
        if (started === undefined && !stopping) started = start(message.index, message.count, message.config);
        return;
      case 'stop':
        stop(message.reason);
        return;
      case 'handover':
        if (!isTcpHandle(handle)) return;
        if (router === undefined || stopping) handle.close();
        else router.deliver(message, handle);
        return;
    }
  });
  process.on('SIGINT', () => undefined);
  process.on('SIGTERM', () => stop('received SIGTERM'));
  process.on('disconnect', () => stop('the primary process is gone'));
  void tell({ bifro: 'hello' });
}

if (require.main === module) {
  if (!cluster.isWorker) {
    process.stderr.write('worker-main.js is started by `bifro start --workers N`, not directly\n');
    process.exit(2);
  }
  runWorker();
}
