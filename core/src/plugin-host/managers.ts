import type {
  AccessAction,
  AuthOk,
  AuthReject,
  AuthRequest,
  BrokerEvent,
  ClientInfo,
  EventType,
  ExtendedAuthRequest,
  ExtendedAuthResult,
  MaybePromise,
  PluginKind,
  RedirectDecision,
  ResourceType,
  SettingName,
  SettingUpdate,
  SettingValue,
  Storage,
} from '@bifro/spi';

/**
 * The guards core calls instead of plugins (docs/principles.md 3). Each applies the call timeout, turns
 * throws and rejections into typed results, records per-plugin call metrics and reports a
 * `pluginCallFailed` event. Core never holds a plugin instance directly.
 */

/** Result of the auth chain: the first non-defer answer; all-defer → reject notAuthorized; timeout/throw → reject error. */
export type AuthOutcome = AuthOk | AuthReject;

export interface AuthManager {
  authenticate(request: AuthRequest): MaybePromise<AuthOutcome>;
  /** Whether some provider declares this v5 Authentication Method. */
  supportsMethod(method: string): boolean;
  /** Run one step of v5 enhanced auth with the provider that declares `request.method`; defer/throw/timeout → failed. */
  extendedAuth(request: ExtendedAuthRequest): MaybePromise<Exclude<ExtendedAuthResult, { type: 'defer' }>>;
}

export interface AclManager {
  /** true = allowed. All-defer denies; `error` (or throw/timeout) is decided by the tenant's ByPassPermCheckError. */
  check(client: ClientInfo, action: AccessAction): MaybePromise<boolean>;
}

export interface BalancerManager {
  /** Throw/timeout → no redirect. */
  needRedirect(client: ClientInfo): MaybePromise<RedirectDecision>;
}

export interface EventManager {
  /** Precomputed: whether any collector wants this type. Call before building an event. */
  wants(type: EventType): boolean;
  /** Hand an event to every collector that wants it; collector throws are caught and counted. */
  report(event: BrokerEvent): void;
}

export interface SettingsManager {
  /** The tenant's value: provider value when valid, else the registry default. Cached until the provider announces a change. */
  get<S extends SettingName>(tenantId: string, setting: S): SettingValue<S>;
  /** Called after cached values were dropped because the provider announced a change. */
  onChange(listener: (tenantId: string | undefined) => void): () => void;
  /** The settings plugin's name (for messages). */
  readonly providerName: string;
  /** Whether the provider can change a tenant's values (SPI 1.3.0 `update`). */
  readonly writable: boolean;
  /**
   * The valid values the provider holds for the tenant, by setting (its `overrides`, SPI 1.3.0;
   * for a provider without it, what `provide` answers); invalid ones are left out, as `get` ignores them.
   */
  overrides(tenantId: string): Partial<Record<SettingName, SettingValue>>;
  /**
   * Change the tenant's values through the provider, under the plugin call timeout. Every value is
   * checked against the registry first; nothing reaches the provider when one is invalid. Once it
   * resolves `ok`, the tenant's cached values are dropped: its next CONNECT sees the change.
   */
  update(tenantId: string, changes: SettingUpdate): Promise<SettingUpdateOutcome>;
}

/** What {@link SettingsManager.update} did. */
export type SettingUpdateOutcome =
  | { readonly ok: true }
  /**
   * `not-writable`: the provider has no `update`; `invalid`: values the registry refuses (nothing
   * stored), one problem each; `failed`: the provider rejected or threw; `timeout`: no answer in time.
   */
  | { readonly ok: false; readonly reason: 'not-writable' | 'invalid' | 'failed' | 'timeout'; readonly problems: readonly string[] };

export interface ThrottlerManager {
  /** Fails open: a throw counts as true. */
  hasResource(tenantId: string, resource: ResourceType): boolean;
  /**
   * The tenant's limit for the resource as the throttler states it, for display (admin API);
   * `undefined` when unlimited (0 included), unknown, or the plugin has no `quota` or fails. Not for hot paths.
   */
  quota(tenantId: string, resource: ResourceType): number | undefined;
  /**
   * Called on every negative answer of the throttler (a quota refusal), for the refusal counters
   * of the tenant's usage (docs/metrics.md). One listener: a later call replaces it.
   */
  onRefusal(listener: (tenantId: string, resource: ResourceType) => void): void;
}

/** Call statistics of one plugin instance, for `bifro plugin list`, the admin API and metrics. */
export interface PluginCallStats {
  calls: number;
  failures: number;
  timeouts: number;
  /** Sum of call durations, milliseconds. */
  totalMs: number;
  /** Calls per latency bucket (`call-latency.ts`: LATENCY_BOUNDS_MS, then `+Inf`). */
  readonly latency: Float64Array;
  /** When the last failure happened (`Date.now()`), 0 = never: the plugin's health. */
  lastFailureAt: number;
}

/** A plugin the host loaded (or tried to). */
export interface LoadedPluginInfo {
  readonly name: string;
  readonly version: string;
  readonly dir: string;
  readonly kinds: readonly PluginKind[];
  /** The `bifro.spi` range it declared. */
  readonly spiRange: string;
  /** `builtin` for core's first-party defaults. */
  readonly source: 'plugins-dir' | 'package' | 'builtin';
  readonly stats: Readonly<Record<string, PluginCallStats>>;
}

/** Everything the host hands to the broker after loading. */
export interface PluginHost {
  readonly auth: AuthManager;
  readonly acl: AclManager;
  readonly balancer: BalancerManager;
  readonly events: EventManager;
  readonly settings: SettingsManager;
  readonly throttler: ThrottlerManager;
  /** The active storage plugin (its calls are awaited by core, which handles their errors). */
  readonly storage: Storage;
  /** Loaded plugins with versions, in load order. */
  readonly plugins: readonly LoadedPluginInfo[];
  /** Close every plugin in reverse load order. */
  close(): Promise<void>;
}
