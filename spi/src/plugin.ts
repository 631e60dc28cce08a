import type { AccessControl } from './acl';
import type { AuthProvider } from './auth';
import type { ClientBalancer } from './balancer';
import type { MaybePromise, PluginContext } from './common';
import type { EventCollector } from './events';
import type { SettingProvider } from './settings';
import type { Storage } from './storage';
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
};

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
 * Declares a plugin with type checking of each factory. Returns its argument.
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
