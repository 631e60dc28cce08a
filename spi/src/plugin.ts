import type { AccessControl } from './acl';
import type { AuthProvider } from './auth';
import type { ClientBalancer } from './balancer';
import type { MaybePromise, PluginContext } from './common';
import type { ErrorCatalogue } from './errors';
import type { EventCollector } from './events';
import type { SettingProvider } from './settings';
import type { Storage, StorageTools } from './storage';
import type { ResourceThrottler } from './throttler';

/** The kinds of plugin, and the key of each in a plugin definition and in the broker config. */
export const PLUGIN_KINDS = ['auth', 'acl', 'balancer', 'events', 'settings', 'throttler', 'storage'] as const;

export type PluginKind = (typeof PLUGIN_KINDS)[number];

/** The interface each kind implements. */
export interface PluginKindMap {
  auth: AuthProvider;
  acl: AccessControl;
  balancer: ClientBalancer;
  events: EventCollector;
  settings: SettingProvider;
  throttler: ResourceThrottler;
  storage: Storage;
}

/** Creates the instance of one kind. May be async (open a file, connect). */
export type PluginFactory<K extends PluginKind> = (ctx: PluginContext) => MaybePromise<PluginKindMap[K]>;

/** What a plugin module exports (as `default`, or as the module itself): one factory per kind it provides. */
export type PluginDefinition = {
  readonly [K in PluginKind]?: PluginFactory<K>;
} & PluginDefinitionExtras;

/** The members of a {@link PluginDefinition} besides the factories; each is optional. */
export interface PluginDefinitionExtras {
  /**
   * The error codes the plugin reports (in the messages and `code` of the errors it throws), with
   * what each means and what to do. The broker checks the shape when it imports the plugin
   * (phase `shape`), then knows the codes: `bifro` prints their remedy like its own, and the
   * first-party plugins' codes are listed in docs/errors.md. Since SPI 1.1.0; a broker of SPI
   * 1.0.x ignores it.
   *
   * @example
   * ```ts
   * export default definePlugin({
   *   auth: (ctx) => new LdapAuth(ctx),
   *   errors: {
   *     ACME_LDAP_BIND_FAILED: {
   *       summary: 'The LDAP server refused the bind of the service account.',
   *       remedy: 'Check `plugins.auth.options.bindDn` and the password file it names.',
   *     },
   *   },
   * });
   * ```
   */
  readonly errors?: ErrorCatalogue;
  /**
   * Offline check and repair of the data of a storage plugin (SPI 1.6.0): what `bifro storage
   * check` and `bifro storage repair` run. A storage that refuses to open damaged data should
   * offer it, and name the commands in its refusal.
   */
  readonly storageTools?: StorageTools;
}

/**
 * The `bifro` field of a plugin's package.json.
 *
 * @example
 * ```json
 * { "name": "@acme/bifro-auth-ldap", "version": "1.2.0",
 *   "bifro": { "kinds": ["auth"], "spi": "^1.0.0", "main": "dist/index.js" } }
 * ```
 */
export interface PluginManifest {
  /** The kinds the plugin provides; its module must export a factory for each. */
  readonly kinds: readonly PluginKind[];
  /** Semver range of SPI versions the plugin supports, e.g. `^1.0.0`. */
  readonly spi: string;
  /** Entry module relative to the plugin folder; defaults to the package's `main`, then `index.js`. */
  readonly main?: string;
  /** One line saying what the plugin does (shown by `bifro plugin list`). */
  readonly description?: string;
}

/**
 * Declares a plugin with type checking of each factory (and of its `errors`). Returns its argument.
 *
 * @example
 * ```ts
 * export default definePlugin({
 *   auth: (ctx) => ({ authenticate: () => ({ type: 'defer' }) }),
 * });
 * ```
 */
export function definePlugin<D extends PluginDefinition>(definition: D): D {
  return definition;
}
