import type { Duplex } from 'node:stream';
import { inject, injectable } from 'tsyringe';
import type { BrokerConfig } from '../runtime/config-types';
import type { Logger } from '../runtime/logger';
import { RUNTIME_TOKENS } from '../runtime/tokens';
import { PLUGIN_TOKENS } from '../plugin-host/tokens';
import type { AuthManager, EventManager } from '../plugin-host/managers';
import type { TimerWheel } from '../session/timer-wheel';
import { bindListener, type BoundListener } from '../transport/listeners';
import { MqttConnection, type ConnectionOrigin, type ProtocolServices } from './connection';

/** Binds the configured listeners and turns each accepted socket into an MqttConnection. */
@injectable()
export class MqttServer {
  private readonly services: ProtocolServices;
  private readonly connections = new Set<MqttConnection>();
  private bound: BoundListener[] = [];

  constructor(
    @inject(RUNTIME_TOKENS.Config) private readonly config: BrokerConfig,
    @inject(RUNTIME_TOKENS.Logger) private readonly logger: Logger,
    @inject(RUNTIME_TOKENS.TimerWheel) wheel: TimerWheel,
    @inject(PLUGIN_TOKENS.Auth) auth: AuthManager,
    @inject(PLUGIN_TOKENS.Events) events: EventManager,
  ) {
    this.services = { auth, events, wheel, mqtt: config.mqtt, logger, nodeId: config.nodeId };
  }

  /** Bind every listener; on a failure, close the ones already bound and rethrow. */
  async listen(): Promise<readonly BoundListener[]> {
    try {
      for (const listener of this.config.listeners) {
        this.bound.push(await bindListener(listener, (socket, origin) => this.accept(socket, origin)));
      }
    } catch (err) {
      await this.close();
      throw err;
    }
    return this.bound;
  }

  /** Stop accepting, then close every connection. */
  async close(): Promise<void> {
    const closing = this.bound.map((l) => l.close());
    this.bound = [];
    for (const conn of this.connections) conn.destroy();
    await Promise.all(closing);
  }

  private accept(socket: Duplex, origin: ConnectionOrigin): void {
    const conn = new MqttConnection(socket, origin, this.services);
    this.connections.add(conn);
    socket.once('close', () => this.connections.delete(conn));
    this.logger.trace({ listener: origin.listener, remote: origin.remoteAddress }, 'accepted');
  }
}
