import type { Duplex } from 'node:stream';
import type { BrokerConfig } from '../base/config-types';
import type { Clock } from '../base/clock';
import type { Engine } from '../broker/engine';
import type { Topology, TopologyStart } from '../broker/topology';
import { standaloneView, type ClusterView } from '../cluster/cluster-view';
import { CORE_VERSION } from '../plugin-host/core-version';
import { MqttConnection } from '../protocol/connection';
import type { ConnectionOrigin } from '../transport/connection-origin';

/**
 * A broker alone (D37): every session is its own, every route local, every connection served
 * where it was accepted. The node list holds itself.
 */
export class StandaloneTopology implements Topology {
  protected engine: Engine | undefined;

  constructor(
    private readonly config: BrokerConfig,
    private readonly clock: Clock,
  ) {}

  /** The engine it serves; called once, by the composition root. */
  bind(engine: Engine): void {
    this.engine = engine;
  }

  accept(socket: Duplex, origin: ConnectionOrigin): void {
    new MqttConnection(socket, origin, this.engine!);
  }

  serving(): boolean {
    return true;
  }

  claim(): true {
    return true;
  }

  abandoned(): void {}

  groupsHere(): undefined {
    return undefined;
  }

  forward(): number {
    return 0;
  }

  announced(): undefined {
    return undefined;
  }

  restore(): Promise<number> {
    return this.engine!.sessions.restore();
  }

  start({ bound, startedAt, load }: TopologyStart): ClusterView {
    const listeners = bound.map((l) => `${l.host}:${l.port}`);
    const nodeId = this.config.nodeId;
    return standaloneView(nodeId, () => ({ nodeId, startedAt, version: CORE_VERSION, listeners, ...load() }), this.clock);
  }

  async stop(): Promise<void> {}
}
