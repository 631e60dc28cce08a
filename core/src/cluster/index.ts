/**
 * Cluster mode on NATS JetStream (docs/cluster.md). Loaded by the composition root only when the
 * configuration has a `cluster` section: a standalone broker never loads NATS.
 */
import type { ClusterConfig } from '../base/config-types';
import type { Logger } from '../base/logger';
import type { NodeLoad, RunningCluster } from './cluster-view';
import { Membership } from './membership';
import { NatsLink } from './nats-connection';

export interface StartClusterOptions {
  readonly cluster: ClusterConfig;
  /** This node's id (cluster.nodeId, or the default the composition root derived). */
  readonly nodeId: string;
  readonly version: string;
  readonly startedAt: number;
  /** `host:port` of each bound MQTT listener. */
  readonly listeners: readonly string[];
  load(): NodeLoad;
  readonly logger: Logger;
}

/**
 * Connects to NATS and starts membership. Returns at once: while NATS is unreachable the node
 * serves MQTT alone and keeps trying (the connection logs it).
 */
export function startCluster(opts: StartClusterOptions): RunningCluster {
  const logger = opts.logger.child({ cluster: opts.nodeId });
  const membership = new Membership({
    nodeId: opts.nodeId,
    version: opts.version,
    startedAt: opts.startedAt,
    listeners: opts.listeners,
    replicas: opts.cluster.replicas,
    load: opts.load,
    logger,
  });
  const link = new NatsLink(opts.cluster, opts.nodeId, logger, (nc) => membership.attach(nc));
  logger.info(
    { servers: opts.cluster.servers, node: opts.nodeId },
    `cluster mode: node ${opts.nodeId}, NATS ${opts.cluster.servers.join(', ')}`,
  );
  return {
    clustered: true,
    nodeId: opts.nodeId,
    connected: () => link.connected(),
    nodes: () => membership.nodes(),
    async stop() {
      await membership.stop(link.connected());
      await link.close();
    },
  };
}
