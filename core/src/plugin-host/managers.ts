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
}

export interface ThrottlerManager {
  /** Fails open: a throw counts as true. */
  hasResource(tenantId: string, resource: ResourceType): boolean;
}

/** Call statistics of one plugin instance, for `bifro plugin list`, the admin API and metrics. */
export interface PluginCallStats {
  calls: number;
  failures: number;
  timeouts: number;
  /** Sum of call durations, milliseconds. */
  totalMs: number;
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
