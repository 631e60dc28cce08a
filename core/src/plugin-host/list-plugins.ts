import path from 'node:path';
import { SPI_VERSION, type PluginKind, type PluginManifest } from '@bifro/spi';
import { BifroError, describeError } from '../base/errors';
import type { BrokerConfig } from '../base/config-types';
import { CORE_VERSION } from './core-version';
import { BUILTIN_PLUGINS } from './defaults/builtin-plugins';
import { DEFAULT_STORAGE_PACKAGE } from './defaults/default-storage';
import type { LoadedPluginInfo } from './managers';
import { BROKER_DIR, discoverPlugins, findPlugin, type PluginDiscovery, type PluginPackage } from './plugin-discovery';
import { pluginError } from './plugin-errors';
import { LOAD_ORDER, refsOf } from './plugin-host';
import { checkSpiVersion, readManifest } from './plugin-manifest';
import { definitionOf, importPlugin } from './plugin-module';

/** One line of `bifro plugin list`. */
export interface PluginListEntry {
  /** Package name (or, for a plugin the config names but that cannot be found, the name used). */
  readonly name: string;
  readonly version: string | undefined;
  readonly dir: string | undefined;
  readonly source: LoadedPluginInfo['source'];
  /** Declared kinds. */
  readonly kinds: readonly PluginKind[];
  /** The declared `bifro.spi` range. */
  readonly spiRange: string | undefined;
  /** Whether the range accepts this broker's SPI version (false when the manifest is missing or invalid). */
  readonly compatible: boolean;
  /** Whether the broker can load it: compatible, and its entry module imports and exports a factory per declared kind. */
  readonly loadable: boolean;
  readonly description: string | undefined;
  /** The kinds the config uses it for; for built-ins, the kinds they serve because the config names no plugin. */
  readonly usedFor: readonly PluginKind[];
  /** Why the plugin cannot be loaded, when finding it or the manifest, version, import or shape phase fails. */
  readonly problem: { readonly code: string; readonly message: string } | undefined;
}

/**
 * The plugins the broker can see: those of the plugins directory and `plugins.packages`, those
 * the config names (found elsewhere or missing), the default storage package when the config
 * names no storage, and the built-ins standing in for unconfigured kinds. The resolve, manifest,
 * version, import and shape phases run (a plugin's module is loaded, as the broker would, with the
 * broker's `@bifro/spi`); nothing is instantiated.
 */
export async function listPlugins(config: BrokerConfig): Promise<PluginListEntry[]> {
  const discovery = await discoverPlugins({
    pluginsDir: config.pluginsDir,
    packages: config.plugins.packages,
    resolvePaths: [BROKER_DIR, config.configDir],
  });
  const usedFor = new Map<string, PluginKind[]>();
  for (const kind of LOAD_ORDER) {
    for (const ref of refsOf(config, kind)) usedFor.set(ref.use, [...(usedFor.get(ref.use) ?? []), kind]);
  }
  const storageDefault = config.plugins.storage === undefined;
  if (storageDefault) usedFor.set(DEFAULT_STORAGE_PACKAGE, [...(usedFor.get(DEFAULT_STORAGE_PACKAGE) ?? []), 'storage']);

  const entries: PluginListEntry[] = [];
  const listed = new Set<string>();
  for (const pkg of discovery.plugins.values()) {
    entries.push(await describePackage(pkg, usedFor.get(pkg.name) ?? []));
    listed.add(pkg.name);
  }
  for (const [name, kinds] of usedFor) {
    if (listed.has(name)) continue;
    entries.push(await describeReferenced(discovery, name, kinds, config.pluginsDir, storageDefault && name === DEFAULT_STORAGE_PACKAGE));
  }
  for (const kind of ['auth', 'acl', 'balancer', 'settings', 'throttler'] as const) {
    if (refsOf(config, kind).length > 0) continue;
    const builtin = BUILTIN_PLUGINS[kind];
    entries.push({
      name: builtin.name,
      version: CORE_VERSION,
      dir: path.join(__dirname, 'defaults'),
      source: 'builtin',
      kinds: [kind],
      spiRange: SPI_VERSION,
      compatible: true,
      loadable: true,
      description: builtin.description,
      usedFor: [kind],
      problem: undefined,
    });
  }
  return entries;
}

async function describePackage(pkg: PluginPackage, usedFor: readonly PluginKind[]): Promise<PluginListEntry> {
  const base = { name: pkg.name, version: pkg.version, dir: pkg.dir, source: pkg.source, usedFor };
  let manifest: PluginManifest;
  try {
    manifest = readManifest(pkg);
  } catch (err) {
    return { ...base, kinds: [], spiRange: undefined, compatible: false, loadable: false, description: undefined, problem: problemOf(err) };
  }
  const declared = { ...base, kinds: manifest.kinds, spiRange: manifest.spi, description: manifest.description };
  try {
    checkSpiVersion(pkg, manifest);
  } catch (err) {
    return { ...declared, compatible: false, loadable: false, problem: problemOf(err) };
  }
  try {
    definitionOf(pkg, manifest, await importPlugin(pkg, manifest));
  } catch (err) {
    return { ...declared, compatible: true, loadable: false, problem: problemOf(err) };
  }
  return { ...declared, compatible: true, loadable: true, problem: undefined };
}

async function describeReferenced(
  discovery: PluginDiscovery,
  name: string,
  usedFor: readonly PluginKind[],
  pluginsDir: string,
  isDefaultStorage: boolean,
): Promise<PluginListEntry> {
  try {
    return await describePackage(await findPlugin(discovery, name, pluginsDir), usedFor);
  } catch (err) {
    const notFound = err instanceof BifroError && err.code === 'BIFRO_PLUGIN_NOT_FOUND';
    const problem =
      notFound && isDefaultStorage
        ? problemOf(
            pluginError('BIFRO_PLUGIN_STORAGE_MISSING', `no storage plugin is configured and the default ${name} cannot be found`, {
              phase: 'resolve',
              plugin: name,
              kind: 'storage',
            }),
          )
        : problemOf(err);
    return {
      name,
      version: undefined,
      dir: undefined,
      source: 'package',
      kinds: [],
      spiRange: undefined,
      compatible: false,
      loadable: false,
      description: undefined,
      usedFor,
      problem,
    };
  }
}

function problemOf(err: unknown): { code: string; message: string } {
  return err instanceof BifroError
    ? { code: err.code, message: err.message }
    : { code: 'BIFRO_PLUGIN_PACKAGE_INVALID', message: describeError(err) };
}
