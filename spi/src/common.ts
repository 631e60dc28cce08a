import type { ResourceType } from './throttler';

/** MQTT protocol level as sent in CONNECT: 3 = MQTT 3.1, 4 = MQTT 3.1.1, 5 = MQTT 5.0. */
export type ProtocolVersion = 3 | 4 | 5;

/** Quality of service level. */
export type QoS = 0 | 1 | 2;

/** MQTT 5 user properties as name/value pairs, in the order they were received. */
export type UserProperties = ReadonlyArray<readonly [name: string, value: string]>;

/**
 * Who a connected client is, as established by the auth chain. Handed to every plugin call that
 * concerns a connected client.
 *
 * @example
 * ```ts
 * if (client.tenantId === 'acme' && client.attrs.role === 'admin') return 'granted';
 * ```
 */
export interface ClientInfo {
  /** The tenant the client belongs to, named by the auth provider that accepted it. */
  readonly tenantId: string;
  /** The user inside the tenant, named by the auth provider. */
  readonly userId: string;
  /** The MQTT client identifier (assigned by the broker when the client sent an empty one). */
  readonly clientId: string;
  /** Protocol level of the connection. */
  readonly protocolVersion: ProtocolVersion;
  /** Remote IP address (the real client address when the listener accepts the PROXY protocol). */
  readonly remoteAddress: string;
  /** Remote TCP port. */
  readonly remotePort: number;
  /** Name of the listener the client connected through (from the config). */
  readonly listener: string;
  /** Free-form attributes the auth provider attached (roles, groups, device class...). */
  readonly attrs: Readonly<Record<string, string>>;
}

/** A structured logger handed to plugins. Fields are merged into the log line. */
export interface PluginLogger {
  trace(msg: string, fields?: Readonly<Record<string, unknown>>): void;
  debug(msg: string, fields?: Readonly<Record<string, unknown>>): void;
  info(msg: string, fields?: Readonly<Record<string, unknown>>): void;
  warn(msg: string, fields?: Readonly<Record<string, unknown>>): void;
  error(msg: string, fields?: Readonly<Record<string, unknown>>): void;
}

/**
 * Read access to the live usage the broker keeps per tenant (connections, subscriptions, bytes per
 * second...). A {@link ResourceThrottler} compares it with its quotas.
 */
export interface TenantUsageReader {
  /**
   * Current value of a resource for a tenant: a gauge (e.g. connections) or the count of the
   * current one-second window for a rate (e.g. inbound bytes per second). 0 for unknown tenants.
   */
  get(tenantId: string, resource: ResourceType): number;
}

/**
 * What a plugin receives when the broker creates it. One context per plugin and kind.
 *
 * @example
 * ```ts
 * export default definePlugin({
 *   auth: (ctx) => {
 *     const file = String(ctx.options.file ?? 'passwords');
 *     ctx.logger.info('loading passwords', { file });
 *     return new PasswordFileAuth(path.resolve(ctx.configDir, file));
 *   },
 * });
 * ```
 */
export interface PluginContext {
  /** The plugin's package name. */
  readonly name: string;
  /** The plugin's package version. */
  readonly version: string;
  /** Absolute path of the plugin's folder. */
  readonly dir: string;
  /** The plugin's `options` block from the broker config (an empty object when none). */
  readonly options: Readonly<Record<string, unknown>>;
  /** A logger that tags every line with the plugin name. */
  readonly logger: PluginLogger;
  /** The broker's data directory; a plugin that keeps files keeps them in a sub-folder named after itself. */
  readonly dataDir: string;
  /** Folder of the broker config file, to resolve relative paths in options. */
  readonly configDir: string;
  /** The SPI version of the running broker. */
  readonly spiVersion: string;
  /** Live per-tenant usage kept by the broker. */
  readonly tenantUsage: TenantUsageReader;
}

/**
 * Optional lifecycle hooks every plugin instance may have. `init` runs after creation, under a
 * timeout (`plugins.initTimeoutMs`); `close` runs at shutdown, in reverse load order.
 */
export interface Lifecycle {
  /** Prepare the plugin (open files, connect). A throw or a timeout fails the plugin's load. */
  init?(): Promise<void> | void;
  /** Release resources. Errors are logged and otherwise ignored. */
  close?(): Promise<void> | void;
}

/** A value that is returned directly or as a promise. Return synchronously on hot paths. */
export type MaybePromise<T> = T | Promise<T>;
