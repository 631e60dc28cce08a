import 'reflect-metadata';
import type { TenantUsageReader } from '@bifro/spi';
import type { BrokerConfig } from '../base/config-types';
import type { Logger } from '../base/logger';
import { CLUSTER_STORAGE_PACKAGE, clusterStorageOptions, DEFAULT_STORAGE_PACKAGE } from './defaults/default-storage';
import type { PluginHost } from './managers';
import { loadPluginHost } from './plugin-host';

export type * from './managers';
export { PLUGIN_ERRORS, PLUGIN_PHASES, type PluginErrorCode, type PluginPhase } from './plugin-errors';
export { verifyPlugin, type VerifyOptions, type VerifyPhase, type VerifyReport, type VerifyStep } from './verify-plugin';
export { listPlugins, type PluginListEntry } from './list-plugins';
export { refsOf } from './plugin-host';
export { PLUGIN_TOKENS, registerPluginHost } from './tokens';
export { DEFAULT_STORAGE_PACKAGE } from './defaults/default-storage';
export { DEV_ALLOW_ALL_AUTH } from './defaults/dev-allow-all-auth';

/**
 * Loads every plugin the config names, in phases (resolve → manifest → version → import → shape →
 * instantiate → instanceShape → init), fills unconfigured kinds with the first-party defaults and
 * wraps everything in guard managers. A broken required plugin rejects with a coded BifroError
 * (after closing what was already loaded); a broken optional one is logged at warn and skipped.
 */
export async function loadPlugins(config: BrokerConfig, logger: Logger, usage: TenantUsageReader): Promise<PluginHost> {
  // Cluster mode defaults to the storage the nodes share.
  const cluster = config.cluster;
  return loadPluginHost(
    config,
    logger,
    usage,
    cluster === undefined
      ? { defaultStoragePackage: DEFAULT_STORAGE_PACKAGE }
      : { defaultStoragePackage: CLUSTER_STORAGE_PACKAGE, defaultStorageOptions: clusterStorageOptions(cluster) },
  );
}
