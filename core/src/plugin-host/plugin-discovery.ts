import { promises as fs } from 'node:fs';
import path from 'node:path';
import { BifroError, describeError } from '../base/errors';
import { pluginError } from './plugin-errors';

/** Where a plugin package was found. */
export type PackageSource = 'plugins-dir' | 'package';

/** A package that is, or claims to be, a plugin: its package.json read, its `bifro` field not yet checked. */
export interface PluginPackage {
  readonly name: string;
  readonly version: string;
  /** Absolute path of the package folder. */
  readonly dir: string;
  readonly source: PackageSource;
  /** The `bifro` field as found; undefined when absent. */
  readonly bifro: unknown;
  /** The package's `main` field as found. */
  readonly main: unknown;
  /** The package's `type` field as found (`module`: its .js files are ES modules). */
  readonly type?: unknown;
}

/** What the plugins directory and `plugins.packages` hold. */
export interface PluginDiscovery {
  /** Packages with a `bifro` field (plugins directory) and every resolvable `plugins.packages` entry, by package name. */
  readonly plugins: ReadonlyMap<string, PluginPackage>;
  /** Folders of the plugins directory with a package.json but no `bifro` field, by package name (ignored unless the config names one). */
  readonly withoutManifest: ReadonlyMap<string, PluginPackage>;
  /** Folders of the plugins directory that cannot be plugins (no or broken package.json), by folder name, with the error to give if the config names one. */
  readonly unusable: ReadonlyMap<string, BifroError>;
  /** `plugins.packages` entries that could not be resolved, by name. */
  readonly unresolved: ReadonlyMap<string, BifroError>;
  /** Where package names are resolved from. */
  readonly resolvePaths: readonly string[];
}

export interface DiscoveryOptions {
  /** Absolute path of the plugins directory; a directory that does not exist holds no plugins. */
  readonly pluginsDir: string;
  /** npm package names to add. */
  readonly packages: readonly string[];
  /** Folders to resolve package names from, in order (the broker's own folder first). */
  readonly resolvePaths: readonly string[];
}

/** The folder of this module: package names resolve from the broker's own node_modules first. */
export const BROKER_DIR = __dirname;

/**
 * Finds the plugins: every sub-folder of the plugins directory whose package.json has a `bifro`
 * field, and every package of `plugins.packages`. Two packages with one name are an error naming
 * both folders.
 */
export async function discoverPlugins(options: DiscoveryOptions): Promise<PluginDiscovery> {
  const plugins = new Map<string, PluginPackage>();
  const withoutManifest = new Map<string, PluginPackage>();
  const unusable = new Map<string, BifroError>();
  const unresolved = new Map<string, BifroError>();

  const add = (pkg: PluginPackage): void => {
    const other = plugins.get(pkg.name);
    if (other !== undefined && other.dir === pkg.dir) return; // the plugins dir and plugins.packages name the same folder
    if (other !== undefined) {
      throw pluginError(
        'BIFRO_PLUGIN_DUPLICATE',
        `plugin ${pkg.name} is found twice: in ${other.dir} and in ${pkg.dir}; remove one of them`,
        { phase: 'resolve', plugin: pkg.name, dir: pkg.dir, otherDir: other.dir },
      );
    }
    plugins.set(pkg.name, pkg);
  };

  for (const dir of await listFolders(options.pluginsDir)) {
    try {
      const pkg = await readPluginPackage(dir, 'plugins-dir', path.basename(dir));
      if (pkg === undefined) {
        unusable.set(
          path.basename(dir),
          pluginError(
            'BIFRO_PLUGIN_MANIFEST_MISSING',
            `plugin folder ${dir} has no package.json (a plugin needs one with a "bifro" field)`,
            {
              phase: 'manifest',
              plugin: path.basename(dir),
              dir,
            },
          ),
        );
      } else if (pkg.bifro === undefined) {
        withoutManifest.set(pkg.name, pkg);
      } else {
        add(pkg);
      }
    } catch (err) {
      if (!(err instanceof BifroError) || err.code === 'BIFRO_PLUGIN_DUPLICATE') throw err;
      unusable.set(path.basename(dir), err);
    }
  }

  for (const name of options.packages) {
    const dir = resolvePackageDir(name, options.resolvePaths);
    if (dir === undefined) {
      unresolved.set(name, notFound(name, options));
      continue;
    }
    try {
      const pkg = await readPluginPackage(dir, 'package', name);
      if (pkg === undefined) throw notFound(name, options);
      add(pkg);
    } catch (err) {
      if (!(err instanceof BifroError) || err.code === 'BIFRO_PLUGIN_DUPLICATE') throw err;
      unresolved.set(name, err);
    }
  }

  return { plugins, withoutManifest, unusable, unresolved, resolvePaths: options.resolvePaths };
}

/**
 * The package of a plugin the config names: a discovered plugin, else a package resolved by name.
 * Throws a coded error (phase `resolve`, or `manifest` for a folder without package.json) when
 * there is none.
 */
export async function findPlugin(discovery: PluginDiscovery, name: string, pluginsDir: string): Promise<PluginPackage> {
  const found = discovery.plugins.get(name) ?? discovery.withoutManifest.get(name);
  if (found !== undefined) return found;
  const known = discovery.unresolved.get(name) ?? discovery.unusable.get(name);
  if (known !== undefined) throw known;
  const dir = resolvePackageDir(name, discovery.resolvePaths);
  const pkg = dir === undefined ? undefined : await readPluginPackage(dir, 'package', name);
  if (pkg === undefined) throw notFound(name, { pluginsDir, resolvePaths: discovery.resolvePaths });
  return pkg;
}

/** Reads a package folder's package.json; undefined when the folder has none. */
export async function readPluginPackage(dir: string, source: PackageSource, label: string): Promise<PluginPackage | undefined> {
  const file = path.join(dir, 'package.json');
  let text: string;
  try {
    text = await fs.readFile(file, 'utf8');
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code === 'ENOENT') return undefined;
    throw pluginError(
      'BIFRO_PLUGIN_PACKAGE_INVALID',
      `cannot read ${file}: ${describeError(err)}`,
      { phase: 'resolve', plugin: label, dir },
      err,
    );
  }
  let json: unknown;
  try {
    json = JSON.parse(text);
  } catch (err) {
    throw pluginError(
      'BIFRO_PLUGIN_PACKAGE_INVALID',
      `${file} is not valid JSON: ${describeError(err)}`,
      { phase: 'resolve', plugin: label, dir },
      err,
    );
  }
  if (typeof json !== 'object' || json === null || Array.isArray(json)) {
    throw pluginError('BIFRO_PLUGIN_PACKAGE_INVALID', `${file} does not hold a JSON object`, { phase: 'resolve', plugin: label, dir });
  }
  const fields = json as Record<string, unknown>;
  const { name, version } = fields;
  if (typeof name !== 'string' || name === '') {
    throw pluginError('BIFRO_PLUGIN_PACKAGE_INVALID', `${file} has no "name"; plugins are identified by their package name`, {
      phase: 'resolve',
      plugin: label,
      dir,
    });
  }
  if (typeof version !== 'string' || version === '') {
    throw pluginError('BIFRO_PLUGIN_PACKAGE_INVALID', `${file} of plugin ${name} has no "version"`, {
      phase: 'resolve',
      plugin: name,
      dir,
    });
  }
  return { name, version, dir, source, bifro: fields.bifro, main: fields.main, type: fields.type };
}

/** The folder of an installed package, resolved with the Node algorithm from `paths`; undefined when not installed. */
export function resolvePackageDir(name: string, paths: readonly string[]): string | undefined {
  try {
    return path.dirname(require.resolve(`${name}/package.json`, { paths: [...paths] }));
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code !== 'ERR_PACKAGE_PATH_NOT_EXPORTED') return undefined;
  }
  // The package's `exports` hide package.json: resolve its entry and walk up to its folder.
  let entry: string;
  try {
    entry = require.resolve(name, { paths: [...paths] });
  } catch {
    return undefined;
  }
  for (let dir = path.dirname(entry); dir !== path.dirname(dir); dir = path.dirname(dir)) {
    if (dir.endsWith(path.join('node_modules', ...name.split('/')))) return dir;
  }
  return undefined;
}

async function listFolders(pluginsDir: string): Promise<string[]> {
  let names: string[];
  try {
    names = await fs.readdir(pluginsDir);
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code === 'ENOENT') return [];
    throw pluginError(
      'BIFRO_PLUGIN_DIR_UNREADABLE',
      `cannot list the plugins directory ${pluginsDir}: ${describeError(err)}`,
      {
        phase: 'resolve',
        plugin: pluginsDir,
        dir: pluginsDir,
      },
      err,
    );
  }
  const folders: string[] = [];
  for (const name of names.sort()) {
    if (name.startsWith('.')) continue;
    const dir = path.join(pluginsDir, name);
    const stat = await fs.stat(dir).catch(() => undefined);
    if (stat?.isDirectory()) folders.push(dir);
  }
  return folders;
}

function notFound(name: string, where: { readonly pluginsDir?: string; readonly resolvePaths: readonly string[] }): BifroError {
  const places = where.pluginsDir === undefined ? '' : `no folder of the plugins directory ${where.pluginsDir} has that package name, and `;
  return pluginError(
    'BIFRO_PLUGIN_NOT_FOUND',
    `plugin ${name} not found: ${places}no installed package of that name resolves from ${where.resolvePaths.join(', ')}`,
    { phase: 'resolve', plugin: name },
  );
}
