import { spawn } from 'node:child_process';
import { createHash } from 'node:crypto';
import { promises as fs } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import semver from 'semver';
import { SPI_VERSION, type PluginKind } from '@bifro/spi';
import { LIST_KINDS, type BrokerConfig } from '../base/config-types';
import { BifroError, describeError } from '../base/errors';
import { DEFAULT_STORAGE_PACKAGE } from './defaults/default-storage';
import { npmConfig, npmFailure, parseJsonOutput, projectNpmrc, runNpm, type NpmRunOptions } from './npm-runner';
import { readPluginPackage, type PluginPackage } from './plugin-discovery';
import { pluginError, type PluginErrorCode } from './plugin-errors';
import { LOAD_ORDER, refsOf } from './plugin-host';
import { readManifest } from './plugin-manifest';
import { entryOf } from './plugin-module';
import { checkReachable, DEFAULT_REGISTRY, normalizeRegistry, usesProxy } from './plugin-registry';

/**
 * `bifro plugin install` and `bifro plugin remove`: a plugin package, from the registry, a
 * tarball or a folder, becomes a plain folder of the plugins directory holding the package and
 * its own runtime dependencies (`<pluginsDir>/<folder>/node_modules`), as docs/plugin-authoring.md
 * asks for a hand-copied plugin.
 *
 * Everything happens in a staging folder inside the plugins directory (`.staging-*`: plugin
 * discovery skips dot-folders), so that nothing half-installed is ever visible, and so that the
 * final step is a rename on one filesystem:
 *
 *   1. `npm pack <spec> --ignore-scripts` fetches the package (a registry name, a .tgz, a folder:
 *      npm resolves all three, with the user's npm configuration), then `tar` unpacks it;
 *   2. its package.json must have a valid `bifro` field whose `spi` range accepts this broker;
 *   3. `npm install --ignore-scripts` installs its runtime dependencies, the plugin itself
 *      installed as the one dependency of a throw-away root (see {@link installDependencies} for
 *      why); install scripts run only with `allowScripts`;
 *   4. its entry module must exist. It is not loaded: loading a module runs its top-level code,
 *      and nothing of the package runs before the operator chooses to (`bifro plugin verify`, or
 *      the broker's start). The result says what will run: the entry module, and the install
 *      scripts the package and its dependencies declare (and whether they ran);
 *   5. rename into place, with an install record ({@link INSTALL_RECORD}: the integrity of the
 *      package as fetched, its entry, its install scripts); an installed older (or newer)
 *      version is renamed aside first and deleted after.
 * On any refusal or failure the staging folder is deleted: the plugins directory is as before.
 */

export type InstallSource = 'registry' | 'tarball' | 'folder';

export interface InstallOptions {
  /** Absolute path of the plugins directory (created when missing). */
  readonly pluginsDir: string;
  /** Where relative paths resolve and npm runs (its project .npmrc applies). */
  readonly cwd: string;
  /** The environment npm runs with (its `npm_config_*` variables apply). */
  readonly env: NodeJS.ProcessEnv;
  /** `--registry`: passed to npm; otherwise npm's configured registry applies. */
  readonly registry?: string;
  /** Install even when the same version is installed. */
  readonly force?: boolean;
  /**
   * `--allow-scripts`: let npm run the install scripts (preinstall, install, postinstall, a
   * native build) of the package and its dependencies. Off by default: they run as the user who
   * installs, with that user's files and environment, before anything else was checked.
   */
  readonly allowScripts?: boolean;
  /** Progress lines (`fetching ...`). */
  readonly onProgress?: (line: string) => void;
}

export type InstallAction = 'installed' | 'upgraded' | 'downgraded' | 'reinstalled';

export interface InstallResult {
  readonly name: string;
  readonly version: string;
  readonly source: InstallSource;
  readonly kinds: readonly PluginKind[];
  readonly spiRange: string;
  readonly spiVersion: string;
  /** The plugin's folder in the plugins directory. */
  readonly dir: string;
  readonly action: InstallAction;
  /** The version it replaced (upgraded, downgraded, reinstalled). */
  readonly previousVersion?: string;
  /** Packages in the plugin's own node_modules (its dependencies, theirs, ...). */
  readonly dependencies: number;
  /** `sha512-<base64>` of the package tarball as fetched (for a registry package: the registry's `dist.integrity`, which npm checked). */
  readonly integrity: string;
  /** The entry module the broker loads, relative to the plugin's folder. */
  readonly entry: string;
  /** Install scripts the package and its dependencies declare. */
  readonly installScripts: readonly InstallScript[];
  /** Whether npm was let run them (`allowScripts`); otherwise none of them ran. */
  readonly scriptsRun: boolean;
  /** Things worth saying (a copy of @bifro/spi removed). */
  readonly warnings: readonly string[];
}

/** An install-time script a package declares: npm runs it on install unless scripts are ignored. */
export interface InstallScript {
  /** `name@version` of the package declaring it: the plugin, or one of its dependencies. */
  readonly package: string;
  /** `preinstall`, `install`, `postinstall`; `install` is also npm's implicit `node-gyp rebuild` of a binding.gyp. */
  readonly script: string;
  readonly command: string;
}

/** What `bifro plugin install` keeps in the plugin's folder about how it got there (read by `bifro plugin verify`). */
export interface InstallRecord {
  readonly spec: string;
  readonly source: InstallSource;
  readonly name: string;
  readonly version: string;
  readonly integrity: string;
  readonly entry: string;
  readonly installScripts: readonly InstallScript[];
  readonly scriptsRun: boolean;
  /** ISO time of the install. */
  readonly installedAt: string;
}

/** The install record's file in the plugin's folder; written over any file of that name the package ships. */
export const INSTALL_RECORD = '.bifro-install.json';

/** The npm lifecycle scripts of an install (`prepare` does not run for a package installed from a tarball). */
const INSTALL_SCRIPTS = ['preinstall', 'install', 'postinstall'] as const;

const SPI_PACKAGE = '@bifro/spi';

/** A registry package: `name`, `@scope/name`, with `@version`, `@range` or `@tag` (not a URL, git or alias spec). */
const NAME_SPEC = /^(@[a-z0-9~-][a-z0-9._~-]*\/)?[a-z0-9~-][a-z0-9._~-]*(@[^/]*)?$/i;

/**
 * The folder a package is installed in: the name without `@`, the scope's slash as `+`
 * (`@acme/bifro-auth-x` → `acme+bifro-auth-x`). npm names cannot contain `+`, so no two packages
 * share a folder; characters a folder name should not have become `_`, and it never starts with
 * a dot (discovery skips dot-folders).
 */
export function folderNameOf(name: string): string {
  return name
    .replace(/^@/, '')
    .replace('/', '+')
    .replace(/[^A-Za-z0-9._~+-]/g, '_')
    .replace(/^\./, '_');
}

/** What a spec names: a local tarball or folder (by path), else anything npm resolves (a name, name@range, a URL). */
export async function classifySpec(spec: string, cwd: string): Promise<{ readonly source: InstallSource; readonly arg: string }> {
  const pathLike =
    /^(\.|~|\/|\\|[A-Za-z]:[\\/])/.test(spec) ||
    /\.(tgz|tar\.gz)$/.test(spec) ||
    spec.includes('\\') ||
    (spec.includes('/') && !spec.startsWith('@') && !/^[a-z][a-z0-9+.-]*:/i.test(spec));
  if (!pathLike) return { source: 'registry', arg: spec };
  const expanded = spec === '~' || spec.startsWith('~/') ? path.join(os.homedir(), spec.slice(1)) : spec;
  const abs = path.resolve(cwd, expanded);
  const stat = await fs.stat(abs).catch(() => undefined);
  if (stat?.isDirectory()) return { source: 'folder', arg: abs };
  if (stat?.isFile()) return { source: 'tarball', arg: abs };
  throw installError('BIFRO_PLUGIN_FETCH_FAILED', `cannot install ${spec}: no such tarball or folder: ${abs}`, { spec });
}

/** Installs (or upgrades) one plugin into the plugins directory; see the module comment for the steps. */
export async function installPlugin(spec: string, opts: InstallOptions): Promise<InstallResult> {
  const progress = opts.onProgress ?? ((): void => undefined);
  const npm: NpmRunOptions = { cwd: opts.cwd, env: opts.env };
  const registryArgs = opts.registry === undefined ? [] : ['--registry', opts.registry];
  const { source, arg } = await classifySpec(spec, opts.cwd);

  await fs.mkdir(opts.pluginsDir, { recursive: true }).catch((err: unknown) => {
    throw installError('BIFRO_PLUGIN_INSTALL_FAILED', `cannot create the plugins directory ${opts.pluginsDir}: ${describeError(err)}`, {
      spec,
    });
  });
  const staging = await fs.mkdtemp(path.join(opts.pluginsDir, '.staging-')).catch((err: unknown) => {
    throw installError('BIFRO_PLUGIN_INSTALL_FAILED', `cannot write to the plugins directory ${opts.pluginsDir}: ${describeError(err)}`, {
      spec,
    });
  });
  try {
    // 1. Fetch and unpack.
    let config: ReadonlyMap<string, string> | undefined;
    const loadConfig = async (): Promise<ReadonlyMap<string, string>> => {
      if (config !== undefined) return config;
      const scope = spec.startsWith('@') ? spec.split('/')[0] : undefined;
      const keys = ['registry', 'proxy', 'https-proxy', ...(scope === undefined ? [] : [`${scope}:registry`])];
      config = await npmConfig(keys, { ...npm, ...(opts.registry === undefined ? {} : { registry: opts.registry }) });
      return config;
    };
    if (source === 'registry' && NAME_SPEC.test(spec)) {
      const values = await loadConfig();
      const scope = spec.startsWith('@') ? spec.split('/')[0] : undefined;
      const registry = normalizeRegistry(values.get(`${scope}:registry`) ?? values.get('registry') ?? DEFAULT_REGISTRY);
      progress(`fetching ${spec} from ${registry} ...`);
      if (!usesProxy(values, opts.env)) await checkReachable(registry);
    } else {
      const what = source === 'folder' ? 'packing the folder as npm publishes it' : source === 'tarball' ? 'tarball' : 'with npm';
      progress(`fetching ${spec} (${what}) ...`);
    }
    const tarball = await pack(spec, arg, staging, [...registryArgs], npm);
    const integrity = await integrityOf(tarball);
    const unpacked = path.join(staging, 'package');
    await untar(tarball, unpacked, spec);

    // 2. A compatible Bifro plugin?
    const pkg = await readPluginPackage(unpacked, 'plugins-dir', spec).catch((err: unknown) => {
      throw rewrap(err, spec, unpacked);
    });
    if (pkg === undefined)
      throw installError('BIFRO_PLUGIN_INSTALL_FAILED', `cannot install ${spec}: the package holds no package.json`, { spec });
    const id = `${pkg.name}@${pkg.version}`;
    progress(`fetched ${id}`);
    const manifest = checkManifest(pkg, id, spec, unpacked);

    // 3. Already there?
    const existing = await findInstalled(opts.pluginsDir, pkg.name);
    if (existing !== undefined && existing.version === pkg.version && opts.force !== true) {
      throw installError('BIFRO_PLUGIN_ALREADY_INSTALLED', `${id} is already installed in ${existing.dir} (--force installs it again)`, {
        plugin: pkg.name,
        dir: existing.dir,
      });
    }
    const target = existing?.dir ?? path.join(opts.pluginsDir, folderNameOf(pkg.name));
    if (existing === undefined && (await fs.stat(target).catch(() => undefined)) !== undefined) {
      const holder = await readPluginPackage(target, 'plugins-dir', target).catch(() => undefined);
      throw installError(
        'BIFRO_PLUGIN_INSTALL_FAILED',
        `cannot install ${id}: ${target} exists and holds ${holder === undefined ? 'no package' : `${holder.name}@${holder.version}`}; move it away first`,
        { plugin: pkg.name, dir: target },
      );
    }

    // 4. Its runtime dependencies.
    const warnings: string[] = [];
    let staged = unpacked;
    const allowScripts = opts.allowScripts === true;
    const needs = npmWork(await readJson(path.join(unpacked, 'package.json')), allowScripts);
    if (needs.install) {
      progress(
        `installing dependencies of ${id} (npm install --omit=dev${allowScripts ? ', install scripts allowed' : ' --ignore-scripts'}) ...`,
      );
      // Unscoped dependencies come from the default registry: fail fast when it does not answer.
      if (needs.fromDefaultRegistry) {
        const values = await loadConfig();
        if (!usesProxy(values, opts.env)) await checkReachable(normalizeRegistry(values.get('registry') ?? DEFAULT_REGISTRY));
      }
      staged = await installDependencies(pkg, tarball, staging, [...registryArgs, ...(allowScripts ? [] : ['--ignore-scripts'])], npm);
    }
    const spiCopy = path.join(staged, 'node_modules', ...SPI_PACKAGE.split('/'));
    if ((await fs.stat(spiCopy).catch(() => undefined)) !== undefined) {
      await fs.rm(spiCopy, { recursive: true, force: true });
      warnings.push(`removed ${SPI_PACKAGE} from the plugin's node_modules: the broker shares its own copy with every plugin`);
    }

    // 5. What will run. Nothing of the package is loaded here: loading runs its top-level code.
    const entry = await checkEntry({ ...pkg, dir: staged }, manifest, id);
    const installScripts = await declaredInstallScripts(staged);
    const record: InstallRecord = {
      spec,
      source,
      name: pkg.name,
      version: pkg.version,
      integrity,
      entry,
      installScripts,
      scriptsRun: allowScripts,
      installedAt: new Date().toISOString(),
    };
    await fs.writeFile(path.join(staged, INSTALL_RECORD), `${JSON.stringify(record, null, 2)}\n`);

    // 6. Into place.
    const dependencies = await countPackages(path.join(staged, 'node_modules'));
    if (existing === undefined) {
      await rename(staged, target, id);
    } else {
      const aside = path.join(staging, 'previous');
      await rename(existing.dir, aside, id);
      try {
        await rename(staged, target, id);
      } catch (err) {
        await fs.rename(aside, existing.dir).catch(() => undefined);
        throw err;
      }
    }
    return {
      name: pkg.name,
      version: pkg.version,
      source,
      kinds: manifest.kinds,
      spiRange: manifest.spi,
      spiVersion: SPI_VERSION,
      dir: target,
      action: existing === undefined ? 'installed' : actionOf(existing.version, pkg.version),
      ...(existing === undefined ? {} : { previousVersion: existing.version }),
      dependencies,
      integrity,
      entry,
      installScripts,
      scriptsRun: allowScripts,
      warnings,
    };
  } finally {
    await fs.rm(staging, { recursive: true, force: true }).catch(() => undefined);
  }
}

export interface RemoveOptions {
  readonly pluginsDir: string;
  /** The loaded configuration: a plugin it uses is not removed without `force`. */
  readonly config?: BrokerConfig;
  readonly force?: boolean;
}

export interface RemoveResult {
  readonly name: string;
  readonly version: string;
  /** The folder removed. */
  readonly dir: string;
  /** The config keys that use it (removed anyway with `force`). */
  readonly usedBy: readonly string[];
}

/** Removes the folder of the plugins directory holding package `name` (or the folder of that name). */
export async function removePlugin(name: string, opts: RemoveOptions): Promise<RemoveResult> {
  const installed = await installedPackages(opts.pluginsDir);
  const matches = installed.filter((pkg) => pkg.name === name);
  const found = matches.length > 0 ? matches : installed.filter((pkg) => path.basename(pkg.dir) === name);
  if (found.length === 0) {
    const names = installed.map((pkg) => pkg.name);
    throw installError(
      'BIFRO_PLUGIN_NOT_INSTALLED',
      `plugin ${name} is not installed in the plugins directory ${opts.pluginsDir} (${names.length === 0 ? 'it holds no package' : `it holds ${names.join(', ')}`})`,
      { plugin: name, dir: opts.pluginsDir },
    );
  }
  if (found.length > 1) throw duplicate(found);
  const pkg = found[0]!;
  const usedBy = opts.config === undefined ? [] : configUses(opts.config, pkg.name);
  if (usedBy.length > 0 && opts.force !== true) {
    const file = opts.config?.file === undefined ? 'the configuration' : `the configuration ${opts.config.file}`;
    throw installError(
      'BIFRO_PLUGIN_IN_USE',
      `plugin ${pkg.name} is used by ${file}: ${usedBy.join(', ')}; remove those entries first, or pass --force`,
      { plugin: pkg.name, usedBy },
    );
  }
  // Out of sight at once (a rename), then deleted.
  const trash = await fs.mkdtemp(path.join(opts.pluginsDir, '.removing-'));
  try {
    await rename(pkg.dir, path.join(trash, 'plugin'), pkg.name);
  } finally {
    await fs.rm(trash, { recursive: true, force: true }).catch(() => undefined);
  }
  return { name: pkg.name, version: pkg.version, dir: pkg.dir, usedBy };
}

/** The folder of the plugins directory holding package `name`; undefined when there is none. */
export async function findInstalled(pluginsDir: string, name: string): Promise<PluginPackage | undefined> {
  const found = (await installedPackages(pluginsDir)).filter((pkg) => pkg.name === name);
  if (found.length > 1) throw duplicate(found);
  return found[0];
}

/** The config keys that name plugin `name`: `plugins.auth[0]`, `plugins.storage`, ... (and the default storage). */
export function configUses(config: BrokerConfig, name: string): string[] {
  const keys: string[] = [];
  for (const kind of LOAD_ORDER) {
    const list = (LIST_KINDS as readonly string[]).includes(kind);
    refsOf(config, kind).forEach((ref, i) => {
      if (ref.use === name) keys.push(list ? `plugins.${kind}[${i}]` : `plugins.${kind}`);
    });
  }
  if (config.plugins.storage === undefined && name === DEFAULT_STORAGE_PACKAGE) keys.push('plugins.storage (not set: the default storage)');
  return keys;
}

/** The packages in the folders of the plugins directory (dot-folders and folders without a readable package.json skipped). */
async function installedPackages(pluginsDir: string): Promise<PluginPackage[]> {
  const names = await fs.readdir(pluginsDir).catch((err: NodeJS.ErrnoException) => {
    if (err.code === 'ENOENT') return [] as string[];
    throw pluginError('BIFRO_PLUGIN_DIR_UNREADABLE', `cannot list the plugins directory ${pluginsDir}: ${describeError(err)}`, {
      phase: 'resolve',
      plugin: pluginsDir,
      dir: pluginsDir,
    });
  });
  const found: PluginPackage[] = [];
  for (const entry of names.sort()) {
    if (entry.startsWith('.')) continue;
    const dir = path.join(pluginsDir, entry);
    if (!(await fs.stat(dir).catch(() => undefined))?.isDirectory()) continue;
    const pkg = await readPluginPackage(dir, 'plugins-dir', entry).catch(() => undefined);
    if (pkg !== undefined) found.push(pkg);
  }
  return found;
}

/** `npm pack <spec>` into the staging folder; the path of the tarball. */
async function pack(spec: string, arg: string, staging: string, registryArgs: string[], npm: NpmRunOptions): Promise<string> {
  // --ignore-scripts: a folder is packed as it is (no prepack/prepare build behind the user's back).
  const result = await runNpm(['pack', arg, '--pack-destination', staging, '--json', '--ignore-scripts', ...registryArgs], npm);
  if (result.code !== 0) throw installError('BIFRO_PLUGIN_FETCH_FAILED', `npm could not get ${spec}: ${npmFailure(result)}`, { spec });
  const json = parseJsonOutput(result.stdout);
  const filename = Array.isArray(json) ? (json[0] as { filename?: unknown } | undefined)?.filename : undefined;
  if (typeof filename === 'string') return path.join(staging, path.basename(filename));
  const tgz = (await fs.readdir(staging)).find((f) => f.endsWith('.tgz'));
  if (tgz === undefined)
    throw installError('BIFRO_PLUGIN_FETCH_FAILED', `npm pack ${spec} wrote no tarball: ${npmFailure(result)}`, { spec });
  return path.join(staging, tgz);
}

/** Unpacks an npm tarball (its top folder, `package/` usually, stripped) with the system tar. */
async function untar(tarball: string, into: string, spec: string): Promise<void> {
  await fs.mkdir(into, { recursive: true });
  const args = ['-xzf', tarball, '-C', into, '--strip-components=1', '--no-same-owner'];
  const { code, stderr } = await new Promise<{ code: number; stderr: string }>((resolve, reject) => {
    const child = spawn('tar', args, { stdio: ['ignore', 'ignore', 'pipe'] });
    let err = '';
    child.stderr.on('data', (d: Buffer) => (err += d.toString()));
    child.on('error', (e: NodeJS.ErrnoException) =>
      reject(
        installError(
          'BIFRO_PLUGIN_INSTALL_FAILED',
          e.code === 'ENOENT' ? 'cannot unpack the package: `tar` is not on the PATH' : `cannot run tar: ${e.message}`,
          { spec },
        ),
      ),
    );
    child.on('close', (c) => resolve({ code: c ?? 1, stderr: err }));
  });
  if (code !== 0) {
    throw installError(
      'BIFRO_PLUGIN_INSTALL_FAILED',
      `cannot unpack ${path.basename(tarball)} of ${spec}: ${stderr.trim() || `tar exit ${code}`}`,
      {
        spec,
      },
    );
  }
}

/** The `bifro` field checked and the SPI range against this broker, before any dependency is fetched. */
function checkManifest(pkg: PluginPackage, id: string, spec: string, dir: string): ReturnType<typeof readManifest> {
  if (pkg.bifro === undefined) {
    throw pluginError(
      'BIFRO_PLUGIN_MANIFEST_MISSING',
      `cannot install ${id}: not a Bifro plugin: its package.json has no "bifro" field (a plugin declares e.g. {"kinds": ["auth"], "spi": "^${SPI_VERSION}"}; see docs/plugin-authoring.md)`,
      { phase: 'manifest', plugin: pkg.name },
    );
  }
  let manifest: ReturnType<typeof readManifest>;
  try {
    manifest = readManifest(pkg);
  } catch (err) {
    throw rewrap(err, spec, dir, `cannot install ${id}: `);
  }
  if (!semver.satisfies(SPI_VERSION, manifest.spi, { includePrerelease: false })) {
    throw pluginError(
      'BIFRO_PLUGIN_SPI_MISMATCH',
      `cannot install ${id}: it supports SPI ${manifest.spi} (its "bifro.spi"), but this broker implements SPI ${SPI_VERSION}`,
      { phase: 'version', plugin: pkg.name, spiRange: manifest.spi, spiVersion: SPI_VERSION },
    );
  }
  return manifest;
}

/**
 * Whether npm has anything to do (dependencies to fetch, or, when allowed, install scripts of the
 * plugin itself), and whether some dependency comes from the default registry (an unscoped name).
 */
function npmWork(
  json: Record<string, unknown>,
  allowScripts: boolean,
): { readonly install: boolean; readonly fromDefaultRegistry: boolean } {
  const deps = (field: string): string[] =>
    typeof json[field] === 'object' && json[field] !== null ? Object.keys(json[field] as Record<string, unknown>) : [];
  const bundled = new Set<string>();
  for (const field of ['bundleDependencies', 'bundledDependencies']) {
    const list = json[field] === true ? deps('dependencies') : Array.isArray(json[field]) ? (json[field] as unknown[]) : [];
    for (const name of list) if (typeof name === 'string') bundled.add(name);
  }
  const scripts = (typeof json.scripts === 'object' && json.scripts !== null ? json.scripts : {}) as Record<string, unknown>;
  const own = allowScripts && (INSTALL_SCRIPTS.some((s) => typeof scripts[s] === 'string') || json.gypfile === true);
  const fetched = [...deps('dependencies'), ...deps('optionalDependencies')].filter((d) => d !== SPI_PACKAGE && !bundled.has(d));
  // Bundled dependencies are in the tarball, but their install scripts (a native build) run only in npm install.
  return {
    install: own || fetched.length > 0 || (allowScripts && bundled.size > 0),
    fromDefaultRegistry: fetched.some((d) => !d.startsWith('@')),
  };
}

/**
 * Installs the plugin's runtime dependencies and returns the staged plugin folder. The plugin is
 * installed from its tarball as the only dependency of a throw-away root, rather than with
 * `npm install` inside its own folder: as the root, npm would resolve its devDependencies (with
 * --omit=dev too: they are only not written), which fails for an unpublished `@bifro/spi` (a
 * dev dependency in docs/plugin-authoring.md) and fetches a whole toolchain, and it would run
 * the root's `prepare` (a build, without its devDependencies). As a dependency it is installed
 * exactly as `npm install <plugin>` would, except that the caller passes `--ignore-scripts`
 * unless the operator allowed scripts: then its own and its dependencies' install scripts run
 * (npm's `ignore-scripts` setting is honoured; a native dependency needs them). `prepare` never does.
 *
 * - `--install-strategy=shallow` keeps the root's node_modules to the plugin alone and puts its
 *   dependencies in the plugin's own node_modules (how `npm install -g` lays packages out).
 * - `--legacy-peer-deps --omit=peer`: peers are not resolved nor installed. `@bifro/spi` is a peer
 *   the broker provides (core/src/plugin-host/shared-spi.ts); resolving it would also fail while it
 *   is unpublished. A plugin's dependency that needs a peer gets it only when the plugin lists it.
 * - the project `.npmrc` of the cwd is copied into the root, so the settings npm would use there
 *   (registry, scopes, tokens) apply to this install too; user, global and environment settings
 *   apply by themselves.
 */
async function installDependencies(
  pkg: PluginPackage,
  tarball: string,
  staging: string,
  registryArgs: string[],
  npm: NpmRunOptions,
): Promise<string> {
  const root = path.join(staging, 'npm-root');
  await fs.mkdir(root);
  await fs.writeFile(
    path.join(root, 'package.json'),
    JSON.stringify({
      name: 'bifro-plugin-staging',
      version: '0.0.0',
      private: true,
      description: 'bifro plugin install: a throw-away root',
      dependencies: { [pkg.name]: `file:${path.relative(root, tarball)}` },
    }),
  );
  const npmrc = await projectNpmrc(npm.cwd);
  if (npmrc !== undefined) await fs.copyFile(npmrc, path.join(root, '.npmrc'));
  const args = [
    'install',
    '--prefix',
    root,
    '--omit=dev',
    '--omit=peer',
    '--legacy-peer-deps',
    '--install-strategy=shallow',
    '--no-package-lock',
    '--no-audit',
    '--no-fund',
    '--workspaces=false',
    '--json',
    ...registryArgs,
  ];
  const result = await runNpm(args, { cwd: root, env: npm.env });
  if (result.code !== 0) {
    const failure = npmFailure(result);
    const spiHint = failure.includes(SPI_PACKAGE) ? ` (${SPI_PACKAGE} belongs in peerDependencies: the broker provides it)` : '';
    throw installError(
      'BIFRO_PLUGIN_DEPENDENCIES_FAILED',
      `npm could not install the dependencies of ${pkg.name}@${pkg.version}: ${failure}${spiHint}`,
      { plugin: pkg.name },
    );
  }
  const installed = path.join(root, 'node_modules', ...pkg.name.split('/'));
  const staged = path.join(staging, 'plugin');
  await rename(installed, staged, `${pkg.name}@${pkg.version}`);
  await fs.rm(root, { recursive: true, force: true });
  return staged;
}

/** Packages in a node_modules folder and the node_modules folders nested in them. */
async function countPackages(nodeModules: string): Promise<number> {
  const entries = await fs.readdir(nodeModules, { withFileTypes: true }).catch(() => []);
  let count = 0;
  for (const entry of entries) {
    if (entry.name.startsWith('.') || !(entry.isDirectory() || entry.isSymbolicLink())) continue;
    const dir = path.join(nodeModules, entry.name);
    if (entry.name.startsWith('@')) {
      count += await countPackages(dir);
      continue;
    }
    count += 1 + (await countPackages(path.join(dir, 'node_modules')));
  }
  return count;
}

function actionOf(previous: string, next: string): InstallAction {
  const order = semver.valid(previous) && semver.valid(next) ? semver.compare(next, previous) : next === previous ? 0 : 1;
  return order > 0 ? 'upgraded' : order < 0 ? 'downgraded' : 'reinstalled';
}

/** The Subresource Integrity string npm uses (`sha512-<base64>`) of a tarball. */
async function integrityOf(tarball: string): Promise<string> {
  return `sha512-${createHash('sha512')
    .update(await fs.readFile(tarball))
    .digest('base64')}`;
}

/**
 * The entry module the broker will load, relative to the plugin folder; refused when it is
 * missing (an unbuilt package). Resolved as a path only: nothing is loaded.
 */
async function checkEntry(pkg: PluginPackage, manifest: ReturnType<typeof readManifest>, id: string): Promise<string> {
  const entry = entryOf(pkg, manifest);
  let file: string;
  try {
    file = require.resolve(entry);
  } catch (err) {
    throw pluginError(
      'BIFRO_PLUGIN_IMPORT_FAILED',
      `cannot install ${id}: its entry module ${path.relative(pkg.dir, entry)} is not in the package; is the plugin built?`,
      { phase: 'import', plugin: pkg.name },
      err,
    );
  }
  return path.relative(pkg.dir, file).split(path.sep).join('/');
}

/**
 * The install scripts declared by the plugin (the folder itself) and by every package of its
 * node_modules, nested ones too: a `binding.gyp` without an `install` script is npm's implicit
 * `node-gyp rebuild`.
 */
async function declaredInstallScripts(dir: string): Promise<InstallScript[]> {
  const found: InstallScript[] = [];
  const visit = async (pkgDir: string): Promise<void> => {
    const json = await readJson(path.join(pkgDir, 'package.json')).catch(() => undefined);
    if (json === undefined) return;
    const id = `${typeof json.name === 'string' ? json.name : path.basename(pkgDir)}@${typeof json.version === 'string' ? json.version : '?'}`;
    const scripts = (typeof json.scripts === 'object' && json.scripts !== null ? json.scripts : {}) as Record<string, unknown>;
    for (const script of INSTALL_SCRIPTS) {
      const command = scripts[script];
      if (typeof command === 'string' && command.trim() !== '') found.push({ package: id, script, command });
    }
    const gyp = json.gypfile === true || (await fs.stat(path.join(pkgDir, 'binding.gyp')).catch(() => undefined)) !== undefined;
    if (gyp && typeof scripts.install !== 'string' && typeof scripts.preinstall !== 'string')
      found.push({ package: id, script: 'install', command: 'node-gyp rebuild (implicit: the package has a binding.gyp)' });
    await visitModules(path.join(pkgDir, 'node_modules'));
  };
  const visitModules = async (nodeModules: string): Promise<void> => {
    const entries = await fs.readdir(nodeModules, { withFileTypes: true }).catch(() => []);
    for (const entry of entries.sort((a, b) => a.name.localeCompare(b.name))) {
      if (entry.name.startsWith('.') || !(entry.isDirectory() || entry.isSymbolicLink())) continue;
      const sub = path.join(nodeModules, entry.name);
      if (entry.name.startsWith('@')) await visitModules(sub);
      else await visit(sub);
    }
  };
  await visit(dir);
  return found;
}

/** The install record of a plugin folder; undefined when it was not installed by `bifro plugin install` (or the record is unreadable). */
export async function readInstallRecord(dir: string): Promise<InstallRecord | undefined> {
  try {
    const json = (await readJson(path.join(dir, INSTALL_RECORD))) as Partial<InstallRecord>;
    return typeof json.integrity === 'string' && typeof json.name === 'string' ? (json as InstallRecord) : undefined;
  } catch {
    return undefined;
  }
}

async function rename(from: string, to: string, what: string): Promise<void> {
  try {
    await fs.rename(from, to);
  } catch (err) {
    throw installError('BIFRO_PLUGIN_INSTALL_FAILED', `cannot move ${what} from ${from} to ${to}: ${describeError(err)}`, { from, to });
  }
}

async function readJson(file: string): Promise<Record<string, unknown>> {
  return JSON.parse(await fs.readFile(file, 'utf8')) as Record<string, unknown>;
}

/** A plugin-host error about the unpacked package, its message naming the spec rather than the staging folder. */
function rewrap(err: unknown, spec: string, dir: string, prefix = ''): unknown {
  if (!(err instanceof BifroError)) return err;
  const message = withoutCode(err.message, err.code).split(dir).join(spec);
  return new BifroError(err.code, `${prefix}${message}`, err.details, { cause: err });
}

function duplicate(found: readonly PluginPackage[]): BifroError {
  return pluginError(
    'BIFRO_PLUGIN_DUPLICATE',
    `plugin ${found[0]!.name} is found twice: in ${found.map((p) => p.dir).join(' and in ')}; remove one of them`,
    { phase: 'resolve', plugin: found[0]!.name, dir: found[0]!.dir, otherDir: found[1]!.dir },
  );
}

function installError(code: PluginErrorCode, message: string, details: Record<string, unknown>): BifroError {
  return new BifroError(code, message, details);
}

/** BifroError messages start with their code; avoid printing it twice. */
function withoutCode(message: string, code: string): string {
  return message.startsWith(`${code}: `) ? message.slice(code.length + 2) : message;
}
