import type { Duplex } from 'node:stream';
import type { BrokerConfig } from '../base/config-types';
import type { Clock } from '../base/clock';
import type { Engine } from '../broker/engine';
import { MqttConnection } from '../protocol/connection';
import type { ConnectionOrigin } from '../transport/connection-origin';
import { AdoptedConnection, adoptedAuthOf, canHandOver, CapturingHandover, type WorkerRouter } from '../workers/handover';
import { StandaloneTopology } from './standalone';

/**
 * One of several worker processes of a node (`workers` > 1, docs/multicore.md, D37): alone in
 * every other respect, but a connection accepted here records what it reads until auth names its
 * tenant, and is handed to the worker owning that tenant; connections handed here are adopted,
 * their bytes replayed through a fresh connection.
 */
export class WorkerTopology extends StandaloneTopology {
  constructor(
    config: BrokerConfig,
    clock: Clock,
    private readonly router: WorkerRouter,
  ) {
    super(config, clock);
  }

  override bind(engine: Engine): void {
    super.bind(engine);
    const router = this.router;
    router.receive((socket, message) => {
      if (engine.shuttingDown) {
        socket.destroy();
        return;
      }
      socket.setNoDelay(true);
      // Ahead of anything the socket reads from now on: these bytes came first.
      socket.unshift(Buffer.from(message.bytes, 'base64'));
      const conn = new MqttConnection(socket, message.origin, engine);
      conn.handover = new AdoptedConnection(router, adoptedAuthOf(message));
      router.logger.debug(
        { tenantId: message.tenantId, from: message.from, remote: message.origin.remoteAddress },
        `connection adopted from worker ${message.from}`,
      );
    });
  }

  override accept(socket: Duplex, origin: ConnectionOrigin): void {
    const capture = canHandOver(socket) ? new CapturingHandover(socket, origin, this.router) : undefined;
    const conn = new MqttConnection(socket, origin, this.engine!);
    conn.handover = capture;
  }
}
