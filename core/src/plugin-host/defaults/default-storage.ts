import type { ClusterConfig } from '../../base/config-types';

/** The storage plugin used when the config names none; a package resolved from the broker like any other plugin. */
export const DEFAULT_STORAGE_PACKAGE = '@bifro/plugin-storage-level';

/** The default storage in cluster mode: the nodes share it, so sessions move between them (docs/cluster.md). */
export const CLUSTER_STORAGE_PACKAGE = '@bifro/plugin-storage-nats';

/** The cluster storage's options, from the `cluster` section: the same NATS servers, credentials, TLS, partitions and replicas. */
export function clusterStorageOptions(cluster: ClusterConfig): Record<string, unknown> {
  return {
    servers: [...cluster.servers],
    partitions: cluster.partitions,
    replicas: cluster.replicas,
    ...(cluster.user !== undefined ? { user: cluster.user, password: cluster.password } : {}),
    ...(cluster.token !== undefined ? { token: cluster.token } : {}),
    ...(cluster.tls !== undefined ? { tls: { ...cluster.tls } } : {}),
  };
}

/**
 * The folder the default storage keeps its database in, at the top of the data directory, when
 * its `path` option is unset: the documented default of `@bifro/plugin-storage-level`
 * (docs/storage.md, the plugin's `DEFAULT_DIR_NAME`). Core names it, as it names the package,
 * without importing the plugin: only the worker-count check reads it, before any plugin is
 * loaded, to recognise a data directory a single process wrote. core/test/workers pins it to the
 * plugin's constant.
 */
export const DEFAULT_STORAGE_DIR = 'storage-level';
