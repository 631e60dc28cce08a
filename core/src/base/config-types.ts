import type { PluginKind } from '@bifro/spi';

/** One listener: where the broker accepts MQTT connections. */
export interface ListenerConfig {
  /** Unique name, used in logs, events and ClientInfo.listener. */
  readonly name: string;
  readonly type: 'tcp' | 'tls' | 'ws' | 'wss';
  readonly host: string;
  readonly port: number;
  /** tls / wss only. Paths are absolute after loading. */
  readonly tls?: {
    readonly cert: string;
    readonly key: string;
    readonly ca?: string;
    /** Ask clients for a certificate. */
    readonly requestCert: boolean;
    /** Refuse clients whose certificate does not chain to `ca` (only with requestCert). */
    readonly rejectUnauthorized: boolean;
  };
  /** ws / wss only: the HTTP path of the WebSocket endpoint. */
  readonly path?: string;
  /** Expect a PROXY protocol v1/v2 header before MQTT bytes. */
  readonly proxyProtocol: boolean;
}

/** A plugin chosen for a kind. */
export interface PluginRef {
  /** The plugin's package name (from its package.json), e.g. `@bifro/plugin-storage-memory`. */
  readonly use: string;
  /** A required plugin that fails to load stops the start; an optional one is logged and skipped. */
  readonly required: boolean;
  /** Handed to the plugin as `ctx.options`. */
  readonly options: Readonly<Record<string, unknown>>;
}

/** Which plugins serve each kind. Chains (auth, acl) and collectors (events) take lists. */
export interface PluginsConfig {
  /** npm package names (resolved from the broker's node_modules) to load besides the plugins directory. */
  readonly packages: readonly string[];
  /** How long a plugin's init may take. */
  readonly initTimeoutMs: number;
  /** How long one plugin call (authenticate, checkPermission...) may take before it counts as an error. */
  readonly callTimeoutMs: number;
  readonly auth: readonly PluginRef[];
  readonly acl: readonly PluginRef[];
  readonly events: readonly PluginRef[];
  readonly balancer?: PluginRef;
  readonly settings?: PluginRef;
  readonly throttler?: PluginRef;
  readonly storage?: PluginRef;
}

/** MQTT protocol limits that are per broker rather than per tenant. */
export interface MqttConfig {
  /** Close a connection that sends no CONNECT within this time. */
  readonly connectTimeoutMs: number;
  /** Longest client identifier accepted (bytes). */
  readonly maxClientIdLength: number;
  /** Bytes queued on a socket beyond which deliveries to it wait in the session queue (bounded by SessionInboxSize). */
  readonly writeHighWaterBytes: number;
  /** A subscriber whose socket stays over the high-water mark this long is disconnected. */
  readonly slowConsumerTimeoutMs: number;
  /**
   * Most message bytes (payload + topic) waiting in memory for one connection: its session queue
   * plus its socket's write buffer. Past it the session queue drops by QoS0DropOldest (reason `queue-bytes`).
   */
  readonly maxQueuedBytesPerConnection: number;
  /** How often the client balancer is asked again about every connected client (0: only at CONNECT). */
  readonly redirectCheckIntervalMs: number;
  /**
   * Server keep alive ceiling (seconds): a keep alive of 0 or above it becomes this value, told to
   * v5 clients as Server Keep Alive [MQTT-3.2.2-21] and enforced on v3 clients as an idle limit of
   * 1.5 × this value (docs/security.md § Time limits).
   */
  readonly maxKeepAliveSeconds: number;
  /** A packet not complete this long after its first byte arrived closes the connection (after CONNACK; before it, connectTimeoutMs). */
  readonly packetTimeoutMs: number;
}

/** Connection floods, flapping and exposure of the dev-only auth (docs/security.md). */
export interface SecurityConfig {
  /** Allow listeners on non-loopback hosts while the dev-only allow-all auth is in use (plugins.auth empty). */
  readonly allowAnonymousOnPublicInterfaces: boolean;
  /** Token bucket per remote address, checked when a connection is accepted (off by default: see `overload`). */
  readonly connectionRate: {
    /** Connections per second per address; 0 = no limit (the default). */
    readonly perAddressPerSecond: number;
    /** Connections an address may open at once after being quiet. */
    readonly burst: number;
    /** Most addresses tracked at once (idle ones are swept, the oldest evicted when full). */
    readonly maxTrackedAddresses: number;
  };
  /** New connections closed at accept while the broker itself is overloaded, whatever their address. */
  readonly overload: {
    /** Event loop lag (ms) above which new connections are shed; 0 = not checked. */
    readonly maxEventLoopLagMs: number;
    /** JavaScript heap in use, in per cent of its limit, above which new connections are shed; 0 = not checked. */
    readonly maxHeapUsedPercent: number;
  };
  /**
   * Temporary ban of a client id (per tenant) stuck in a reconnect loop. Only ends the client did
   * not ask for count (not its DISCONNECT): a token bucket of `maxDisconnects` refilled at
   * `maxDisconnects` per `windowSeconds`; an end that finds it empty bans the client id.
   */
  readonly flapping: {
    /** Ends tolerated at once (the bucket); 0 = off. */
    readonly maxDisconnects: number;
    /** The bucket refills completely in this many seconds. */
    readonly windowSeconds: number;
    readonly banSeconds: number;
    /** Most client ids tracked at once. */
    readonly maxTrackedClients: number;
  };
  /** Back-off of password guessing: failed logins per login name and per address (docs/security.md § Password guessing). */
  readonly loginFailures: {
    /** Failures of one login within the window before its attempts are spaced out (delayed); 0 = off. */
    readonly perLogin: number;
    /** Failures from one address within the window before its attempts are spaced out (refused in between); 0 = off. */
    readonly perAddress: number;
    /** A count is forgotten this long after its last failure. */
    readonly windowSeconds: number;
    /** The first back-off interval; it doubles with every further failure. */
    readonly backoffMs: number;
    /** The longest back-off interval, and the longest an attempt is held. */
    readonly maxBackoffMs: number;
    /** Most logins, and most addresses, tracked at once. */
    readonly maxTrackedKeys: number;
  };
}

export interface LogConfig {
  readonly level: 'fatal' | 'error' | 'warn' | 'info' | 'debug' | 'trace' | 'silent';
  /** Pretty output; default: when stdout is a TTY. */
  readonly pretty?: boolean;
}

/** One bearer token of the admin API: stored as the SHA-256 of the token, never the token itself. */
export interface ApiTokenConfig {
  /** Shown in request logs and ban records instead of the token. */
  readonly name: string;
  /** `sha256:<64 hex digits>` of the token's UTF-8 bytes (`bifro token create` prints it). */
  readonly hash: string;
  /** Scoped to this tenant: the token sees and touches only it. Absent: an admin token. */
  readonly tenant?: string;
}

/** The admin HTTP API (docs/api.md). Off unless the `api` section is present. */
export interface ApiConfig {
  readonly host: string;
  readonly port: number;
  readonly tokens: readonly ApiTokenConfig[];
  /** HTTPS instead of HTTP. Paths are absolute after loading. */
  readonly tls?: { readonly cert: string; readonly key: string; readonly ca?: string };
  /** Requests with a missing or wrong token one address may make per minute before 429. */
  readonly authFailuresPerMinute: number;
  /** Serve the OpenAPI browser page at /api/v1/docs. */
  readonly docsPage: boolean;
  /** Serve the web dashboard at /dashboard/ (docs/dashboard.md). */
  readonly dashboard: boolean;
}

/** `GET /metrics` (docs/metrics.md). */
export interface MetricsConfig {
  /**
   * Which tenants get their own `tenant` label: the `top` tenants by connections and every tenant
   * of `include`; the others are summed under `tenant="_other"`, so a scrape stays bounded.
   */
  readonly tenantLabels: { readonly top: number; readonly include: readonly string[] };
}

/** Cluster mode on NATS JetStream (docs/cluster.md). Off unless the `cluster` section is present. */
export interface ClusterConfig {
  /** NATS server URLs (`nats://host:port`, `tls://host:port`); the client learns the rest of the NATS cluster from them. */
  readonly servers: readonly string[];
  /** This node's id in the cluster; absent: `<nodeId>-<port of the first listener as bound>` (docs/cluster.md). */
  readonly nodeId?: string;
  /** Partitions of the cluster's keyspaces (session registry, inboxes; not used by membership). */
  readonly partitions: number;
  /** JetStream replicas of the cluster's buckets and streams (1 for a single NATS server). */
  readonly replicas: number;
  readonly user?: string;
  readonly password?: string;
  readonly token?: string;
  /** TLS to the NATS servers. Paths are absolute after loading. */
  readonly tls?: { readonly ca?: string; readonly cert?: string; readonly key?: string };
}

/** `metrics` when the file has no such section. */
export const DEFAULT_METRICS: MetricsConfig = { tenantLabels: { top: 20, include: [] } };

/** The whole broker configuration after loading: every default applied, every path absolute. */
export interface BrokerConfig {
  /** Absolute path of the file it came from; undefined when built from defaults only. */
  readonly file: string | undefined;
  /** Directory relative paths resolve against (the config file's directory, or the cwd). */
  readonly configDir: string;
  /** Name of this broker node (logs, cluster). */
  readonly nodeId: string;
  readonly dataDir: string;
  readonly pluginsDir: string;
  /** Where `bifro start --daemon` writes its pid; default `<dataDir>/bifro.pid`. */
  readonly pidFile: string;
  /**
   * Worker processes sharing the listeners, each owning a share of the tenants (docs/multicore.md).
   * Absent or 1: one process, as without the key. Set only when configured.
   */
  readonly workers?: number;
  readonly listeners: readonly ListenerConfig[];
  readonly plugins: PluginsConfig;
  readonly mqtt: MqttConfig;
  readonly security: SecurityConfig;
  readonly log: LogConfig;
  /** The admin API; absent: off. */
  readonly api?: ApiConfig;
  /** Seconds between `$SYS` publications to each tenant (0: off). */
  readonly sysInterval: number;
  /** Cluster mode; absent: standalone (NATS is not even loaded). */
  readonly cluster?: ClusterConfig;
  /** `GET /metrics`; set only when the file has a `metrics` section ({@link DEFAULT_METRICS} otherwise). */
  readonly metrics?: MetricsConfig;
}

/** The kinds configured with a list of plugins. */
export const LIST_KINDS = ['auth', 'acl', 'events'] as const satisfies readonly PluginKind[];
/** The kinds configured with at most one plugin. */
export const SINGLE_KINDS = ['balancer', 'settings', 'throttler', 'storage'] as const satisfies readonly PluginKind[];
