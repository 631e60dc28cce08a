import type { Duplex } from 'node:stream';
import { inject, injectable } from 'tsyringe';
import type { BrokerConfig } from '../base/config-types';
import type { Logger } from '../base/logger';
import { RUNTIME_TOKENS } from '../base/tokens';
import { bindListener, type AcceptHandler, type BoundListener } from '../transport/listeners';
import type { ConnectionOrigin } from '../transport/connection-origin';
import { Engine } from '../broker/engine';
import { RC } from '../codec/reason-codes';

/** Binds the configured listeners and turns each accepted stream into an MqttConnection. */
@injectable()
export class MqttServer {
  private bound: BoundListener[] = [];

  constructor(
    @inject(RUNTIME_TOKENS.Config) private readonly config: BrokerConfig,
    @inject(RUNTIME_TOKENS.Logger) private readonly logger: Logger,
    @inject(Engine) private readonly engine: Engine,
  ) {}

  /** Bind every listener; on a failure, close the ones already bound and rethrow. */
  async listen(): Promise<readonly BoundListener[]> {
    const accept: AcceptHandler = (socket, origin) => this.accept(socket, origin);
    try {
      for (const listener of this.config.listeners) {
        this.bound.push(await bindListener(listener, accept, { logger: this.logger, admit: this.admit }));
      }
    } catch (err) {
      await this.close();
      throw err;
    }
    return this.bound;
  }

  /** Stop accepting, tell v5 clients the server is shutting down (0x8B), close every connection. */
  async close(): Promise<void> {
    this.engine.shuttingDown = true;
    const closing = this.bound.map((l) => l.close());
    this.bound = [];
    for (const conn of [...this.engine.connections]) conn.disconnect(RC.ServerShuttingDown);
    await Promise.all(closing);
    this.engine.close();
  }

  /** The per-address connection rate (security.connectionRate), asked by the listeners at accept. */
  private readonly admit = (remoteAddress: string, listener: string): boolean => this.engine.gate.admit(remoteAddress, listener);

  /** The topology makes the connection (a worker's records what it reads, for a hand-over). */
  private accept(socket: Duplex, origin: ConnectionOrigin): void {
    this.engine.topology.accept(socket, origin);
    this.logger.trace({ listener: origin.listener, remote: origin.remoteAddress }, 'accepted');
  }
}
