/** The `cluster` section: its defaults, and the rules the schema cannot say (docs/cluster.md). */
import type { BrokerConfig, ClusterConfig } from '../base/config-types';
import type { ConfigIssue } from './config-errors';
import type { Locator } from './config-file';
import type { RawConfig } from './config-schema';
import { DEFAULT_CLUSTER_PARTITIONS, DEFAULT_CLUSTER_REPLICAS } from './config-defaults';

/** The URL schemes the NATS client speaks (a bare `host:port` means nats://). */
const NATS_SCHEMES = new Set(['nats:', 'tls:', 'ws:', 'wss:']);

export function buildCluster(raw: NonNullable<RawConfig['cluster']>, fromFile: (p: string) => string): ClusterConfig {
  const tls = raw.tls;
  return {
    servers: [...(raw.servers ?? [])],
    ...(raw.nodeId !== undefined ? { nodeId: raw.nodeId } : {}),
    partitions: raw.partitions ?? DEFAULT_CLUSTER_PARTITIONS,
    replicas: raw.replicas ?? DEFAULT_CLUSTER_REPLICAS,
    ...(raw.user !== undefined ? { user: raw.user } : {}),
    ...(raw.password !== undefined ? { password: raw.password } : {}),
    ...(raw.token !== undefined ? { token: raw.token } : {}),
    ...(tls !== undefined
      ? {
          tls: {
            ...(tls.ca !== undefined ? { ca: fromFile(tls.ca) } : {}),
            ...(tls.cert !== undefined ? { cert: fromFile(tls.cert) } : {}),
            ...(tls.key !== undefined ? { key: fromFile(tls.key) } : {}),
          },
        }
      : {}),
  };
}

/** Whether `server` is something the NATS client can dial: `scheme://host:port` or `host:port`. */
export function isNatsServerUrl(server: string): boolean {
  const withScheme = server.includes('://') ? server : `nats://${server}`;
  let url: URL;
  try {
    url = new URL(withScheme);
  } catch {
    return false;
  }
  return NATS_SCHEMES.has(url.protocol) && url.hostname !== '' && (url.pathname === '' || url.pathname === '/') && url.search === '';
}

/** Server URLs, credentials, and cluster mode with several workers (refused for now). */
export function checkCluster(config: BrokerConfig, workersFromOption: boolean, where: Locator): ConfigIssue[] {
  const cluster = config.cluster;
  if (cluster === undefined) return [];
  const issues: ConfigIssue[] = [];
  cluster.servers.forEach((server, i) => {
    if (!isNatsServerUrl(server))
      issues.push(
        where.issue(
          'BIFRO_CONFIG_CLUSTER_SERVER',
          ['cluster', 'servers', i],
          `${JSON.stringify(server)} is not a NATS server URL; expected nats://host:port (or tls://, ws://, wss://, or host:port)`,
        ),
      );
  });
  if ((cluster.user === undefined) !== (cluster.password === undefined)) {
    const missing = cluster.user === undefined ? 'user' : 'password';
    issues.push(where.issue('BIFRO_CONFIG_CLUSTER_AUTH', ['cluster', missing], `missing: cluster.user and cluster.password go together`));
  }
  if (cluster.token !== undefined && cluster.user !== undefined)
    issues.push(
      where.issue('BIFRO_CONFIG_CLUSTER_AUTH', ['cluster', 'token'], 'give either cluster.token or cluster.user/password, not both'),
    );
  const workers = config.workers ?? 1;
  if (workers > 1)
    issues.push(
      where.issue(
        'BIFRO_CONFIG_WORKERS_CLUSTER',
        ['cluster'],
        `cluster mode cannot be used with workers: ${workers}${workersFromOption ? ' (--workers)' : ''} yet: a cluster node is one process (use workers: 1 and run more nodes; docs/cluster.md)`,
      ),
    );
  return issues;
}
