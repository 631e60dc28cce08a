import path from 'node:path';
import { SPI_VERSION, type PluginKind, type PluginKindMap, type Storage, type TenantUsageReader } from '@bifro/spi';
import { BifroError } from '../base/errors';
import type { BrokerConfig, PluginRef } from '../base/config-types';
import { toPluginLogger, type Logger } from '../base/logger';
import { GuardedAclManager } from './acl-manager';
import { LoginFailures } from '../security/login-failures';
import { GuardedAuthManager } from './auth-manager';
import { GuardedBalancerManager } from './balancer-manager';
import { CORE_VERSION } from './core-version';
import { BUILTIN_PLUGINS, type BuiltinKind } from './defaults/builtin-plugins';
import { GuardedEventManager } from './event-manager';
import type { LoadedPluginInfo, PluginCallStats, PluginHost } from './managers';
import { GuardedPlugin } from './plugin-call-guard';
import { closeInstance } from './plugin-instance';
import { BROKER_DIR, discoverPlugins } from './plugin-discovery';
import { pluginError } from './plugin-errors';
import { PluginFailureReporter } from './plugin-failure-reporter';
import { PluginLoader } from './plugin-loader';
import { GuardedSettingsManager } from './settings-manager';
import { GuardedThrottlerManager } from './throttler-manager';

/** The order kinds are loaded in: settings first (others consult them), storage before the guards that admit clients. */
export const LOAD_ORDER = [
  'settings',
  'events',
  'storage',
  'throttler',
  'auth',
  'acl',
  'balancer',
] as const satisfies readonly PluginKind[];

export interface PluginHostOptions {
  /** The storage package used when the config names none. */
  readonly defaultStoragePackage: string;
  /** The default storage's options (cluster mode: the cluster's NATS settings). */
  readonly defaultStorageOptions?: Readonly<Record<string, unknown>>;
}

/** One loaded instance, as the host keeps it for the managers, the plugin list and shutdown. */
interface HostedInstance {
  readonly name: string;
  readonly version: string;
  readonly dir: string;
  readonly spiRange: string;
  readonly source: LoadedPluginInfo['source'];
  readonly kind: PluginKind;
  readonly instance: PluginKindMap[PluginKind];
}

/** The plugin refs the config gives for a kind, in order. */
export function refsOf(config: BrokerConfig, kind: PluginKind): readonly PluginRef[] {
  const plugins = config.plugins;
  switch (kind) {
    case 'auth':
    case 'acl':
    case 'events':
      return plugins[kind];
    case 'balancer':
    case 'settings':
    case 'throttler':
    case 'storage': {
      const ref = plugins[kind];
      return ref === undefined ? [] : [ref];
    }
  }
}

/** Loads and guards every plugin of the config; see `loadPlugins` in index.ts. */
export async function loadPluginHost(
  config: BrokerConfig,
  logger: Logger,
  usage: TenantUsageReader,
  options: PluginHostOptions,
): Promise<PluginHost> {
  const log = logger.child({ component: 'plugin-host' });
  const { initTimeoutMs, callTimeoutMs } = config.plugins;
  const discovery = await discoverPlugins({
    pluginsDir: config.pluginsDir,
    packages: config.plugins.packages,
    resolvePaths: [BROKER_DIR, config.configDir],
  });
  for (const [folder, err] of discovery.unusable)
    log.debug({ folder, code: err.code }, `plugins directory: ignoring ${folder}: ${err.message}`);

  const loader = new PluginLoader(discovery, {
    pluginsDir: config.pluginsDir,
    initTimeoutMs,
    onErrorCodesTaken: (pkg, codes) =>
      log.warn(
        { plugin: pkg.name, codes },
        `plugin ${pkg.name} declares error codes another plugin declared first (${codes.join(', ')}); the first declaration stays`,
      ),
    contextFor: (pkg, kind, pluginOptions) => ({
      name: pkg.name,
      version: pkg.version,
      dir: pkg.dir,
      options: pluginOptions,
      logger: toPluginLogger(logger.child({ plugin: pkg.name, kind })),
      dataDir: config.dataDir,
      configDir: config.configDir,
      spiVersion: SPI_VERSION,
      tenantUsage: usage,
    }),
  });
  const reporter = new PluginFailureReporter(log);
  const hosted: HostedInstance[] = [];

  const closeAll = async (): Promise<void> => {
    for (const entry of [...hosted].reverse()) {
      const problem = await closeInstance(entry.instance, initTimeoutMs);
      if (problem !== undefined) log.warn({ plugin: entry.name, kind: entry.kind }, `plugin ${entry.name} (${entry.kind}): ${problem}`);
    }
  };

  const loadRef = async (ref: PluginRef, kind: PluginKind): Promise<boolean> => {
    try {
      const loaded = await loader.load(ref.use, kind, ref.options);
      hosted.push({
        name: loaded.pkg.name,
        version: loaded.pkg.version,
        dir: loaded.pkg.dir,
        spiRange: loaded.manifest.spi,
        source: loaded.pkg.source,
        kind,
        instance: loaded.instance,
      });
      log.debug(
        { plugin: loaded.pkg.name, version: loaded.pkg.version, kind, dir: loaded.pkg.dir },
        `loaded plugin ${loaded.pkg.name}@${loaded.pkg.version} as ${kind}`,
      );
      return true;
    } catch (err) {
      if (ref.required || !(err instanceof BifroError)) throw err;
      log.warn(
        { plugin: ref.use, kind, code: err.code, phase: err.details.phase, err: err.message },
        `optional plugin ${ref.use} (${kind}) skipped: ${err.message}`,
      );
      return false;
    }
  };

  try {
    for (const kind of LOAD_ORDER) {
      let loadedAny = false;
      for (const ref of refsOf(config, kind)) loadedAny = (await loadRef(ref, kind)) || loadedAny;
      if (loadedAny || kind === 'events') continue;
      const configured = refsOf(config, kind).length > 0;
      if (kind === 'storage') {
        await loadDefaultStorage(configured);
      } else if (configured && (kind === 'auth' || kind === 'acl')) {
        // Fail closed: a chain whose every plugin was skipped never falls back to allow-all.
        log.error(
          { kind },
          `no ${kind} plugin could be loaded: every ${kind === 'auth' ? 'client is refused' : 'action is denied'} until one is`,
        );
      } else {
        addBuiltin(kind);
      }
    }
  } catch (err) {
    await closeAll();
    throw err;
  }

  async function loadDefaultStorage(configured: boolean): Promise<void> {
    const name = options.defaultStoragePackage;
    if (configured)
      log.warn({ plugin: name, kind: 'storage' }, `the configured storage plugin was skipped: falling back to the default ${name}`);
    try {
      await loadRef({ use: name, required: true, options: options.defaultStorageOptions ?? {} }, 'storage');
    } catch (err) {
      if (err instanceof BifroError && err.code === 'BIFRO_PLUGIN_NOT_FOUND') {
        throw pluginError(
          'BIFRO_PLUGIN_STORAGE_MISSING',
          `no storage plugin is configured (plugins.storage) and the default ${name} cannot be found: install it or name a storage plugin in the config`,
          { phase: 'resolve', plugin: name, kind: 'storage' },
          err,
        );
      }
      throw err;
    }
  }

  function addBuiltin(kind: BuiltinKind): void {
    const builtin = BUILTIN_PLUGINS[kind];
    builtin.announce(log);
    hosted.push({
      name: builtin.name,
      version: CORE_VERSION,
      dir: path.join(__dirname, 'defaults'),
      spiRange: SPI_VERSION,
      source: 'builtin',
      kind,
      instance: builtin.create(),
    });
  }

  const guards = hosted.map((entry) => ({
    ...entry,
    guard: new GuardedPlugin(entry.name, entry.kind, entry.instance, reporter, callTimeoutMs),
  }));
  const guardsOf = <K extends PluginKind>(kind: K): GuardedPlugin<K>[] =>
    guards.filter((entry) => entry.kind === kind).map((entry) => entry.guard as unknown as GuardedPlugin<K>);
  const one = <K extends PluginKind>(kind: K): GuardedPlugin<K> => {
    const found = guardsOf(kind)[0];
    if (found === undefined) throw new Error(`plugin host: no ${kind} instance after loading`);
    return found;
  };

  const events = new GuardedEventManager(guardsOf('events'), log);
  reporter.attachEvents(events);
  const settings = new GuardedSettingsManager(one('settings'), log);
  const storage = one('storage').instance;

  let closing: Promise<void> | undefined;
  const host: PluginHost = {
    auth: new GuardedAuthManager(guardsOf('auth'), new LoginFailures(config.security.loginFailures)),
    acl: new GuardedAclManager(guardsOf('acl'), settings, events, log),
    balancer: new GuardedBalancerManager(one('balancer')),
    events,
    settings,
    throttler: new GuardedThrottlerManager(one('throttler')),
    storage: storage as Storage,
    plugins: describeLoaded(guards),
    close: () => {
      closing ??= (async () => {
        settings.close();
        await closeAll();
        log.info('plugins closed');
      })();
      return closing;
    },
  };
  log.debug({ plugins: host.plugins.map((p) => `${p.name}@${p.version} (${p.kinds.join(', ')})`) }, `${host.plugins.length} plugins ready`);
  return host;
}

function describeLoaded(entries: readonly (HostedInstance & { readonly guard: GuardedPlugin<PluginKind> })[]): LoadedPluginInfo[] {
  const byName = new Map<string, { info: LoadedPluginInfo; kinds: PluginKind[]; stats: Record<string, PluginCallStats> }>();
  for (const entry of entries) {
    let item = byName.get(entry.name);
    if (item === undefined) {
      const kinds: PluginKind[] = [];
      const stats: Record<string, PluginCallStats> = {};
      item = {
        kinds,
        stats,
        info: { name: entry.name, version: entry.version, dir: entry.dir, kinds, spiRange: entry.spiRange, source: entry.source, stats },
      };
      byName.set(entry.name, item);
    }
    if (item.kinds.includes(entry.kind)) continue;
    item.kinds.push(entry.kind);
    item.stats[entry.kind] = entry.guard.stats;
  }
  return [...byName.values()].map((item) => item.info);
}
