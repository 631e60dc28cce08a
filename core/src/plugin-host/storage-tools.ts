import { SPI_VERSION, type PluginContext, type StorageTools } from '@bifro/spi';
import type { BrokerConfig } from '../base/config-types';
import { toPluginLogger, type Logger } from '../base/logger';
import { CLUSTER_STORAGE_PACKAGE, clusterStorageOptions, DEFAULT_STORAGE_PACKAGE } from './defaults/default-storage';
import { BROKER_DIR, discoverPlugins, findPlugin } from './plugin-discovery';
import { checkKindDeclared, checkSpiVersion, readManifest } from './plugin-manifest';
import { definitionOf, importPlugin } from './plugin-module';

/** The storage plugin the config uses, with its offline tools and the context its factory would get. */
export interface ConfiguredStorage {
  readonly name: string;
  readonly version: string;
  /** Its `storageTools` (SPI 1.6.0), when it has them. */
  readonly tools: StorageTools | undefined;
  readonly context: PluginContext;
}

/**
 * Finds and imports the storage plugin the config uses (`plugins.storage`, else the default:
 * `@bifro/plugin-storage-level`, or `@bifro/plugin-storage-nats` in cluster mode) through the
 * resolve, manifest, version, import and shape phases, without creating a storage: for `bifro
 * storage check|repair`, which run the plugin's tools on its data with the broker stopped.
 * `options` are laid over the configured options (`--path`).
 */
export async function configuredStorage(
  config: BrokerConfig,
  logger: Logger,
  options: Readonly<Record<string, unknown>>,
): Promise<ConfiguredStorage> {
  const ref = config.plugins.storage;
  const name = ref?.use ?? (config.cluster === undefined ? DEFAULT_STORAGE_PACKAGE : CLUSTER_STORAGE_PACKAGE);
  const configured = ref?.options ?? (config.cluster === undefined ? {} : clusterStorageOptions(config.cluster));
  const discovery = await discoverPlugins({
    pluginsDir: config.pluginsDir,
    packages: config.plugins.packages,
    resolvePaths: [BROKER_DIR, config.configDir],
  });
  const pkg = await findPlugin(discovery, name, config.pluginsDir);
  const manifest = readManifest(pkg);
  checkSpiVersion(pkg, manifest);
  checkKindDeclared(pkg, manifest, 'storage');
  const definition = definitionOf(pkg, manifest, await importPlugin(pkg, manifest));
  return {
    name: pkg.name,
    version: pkg.version,
    tools: definition.storageTools,
    context: {
      name: pkg.name,
      version: pkg.version,
      dir: pkg.dir,
      options: { ...configured, ...options },
      logger: toPluginLogger(logger.child({ plugin: pkg.name, kind: 'storage' })),
      dataDir: config.dataDir,
      configDir: config.configDir,
      spiVersion: SPI_VERSION,
      tenantUsage: { get: () => 0 },
    },
  };
}
