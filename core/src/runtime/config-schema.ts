/**
 * The JSON schema of conf/bifro.yml (what the file may contain, before defaults). Every object has
 * `additionalProperties: false`, so a misspelt key is an error rather than silently ignored.
 * `expected` is an annotation (no validation) holding the human wording used in error messages.
 */

/** What the file may hold: every key optional; defaults are applied by config.ts. */
export interface RawPluginRefObject {
  readonly use: string;
  readonly required?: boolean;
  readonly options?: Readonly<Record<string, unknown>>;
}
export type RawPluginRef = string | RawPluginRefObject;

export interface RawListener {
  readonly name?: string;
  readonly type?: 'tcp' | 'tls' | 'ws' | 'wss';
  readonly host?: string;
  readonly port?: number;
  readonly tls?: {
    readonly cert: string;
    readonly key: string;
    readonly ca?: string;
    readonly requestCert?: boolean;
    readonly rejectUnauthorized?: boolean;
  };
  readonly path?: string;
  readonly proxyProtocol?: boolean;
}

export interface RawConfig {
  readonly nodeId?: string;
  readonly dataDir?: string;
  readonly pluginsDir?: string;
  readonly pidFile?: string;
  readonly workers?: number;
  readonly listeners?: readonly RawListener[] | null;
  readonly plugins?: {
    readonly packages?: readonly string[] | null;
    readonly initTimeoutMs?: number;
    readonly callTimeoutMs?: number;
    readonly auth?: readonly RawPluginRef[] | null;
    readonly acl?: readonly RawPluginRef[] | null;
    readonly events?: readonly RawPluginRef[] | null;
    readonly balancer?: RawPluginRef | null;
    readonly settings?: RawPluginRef | null;
    readonly throttler?: RawPluginRef | null;
    readonly storage?: RawPluginRef | null;
  } | null;
  readonly mqtt?: {
    readonly connectTimeoutMs?: number;
    readonly maxClientIdLength?: number;
    readonly writeHighWaterBytes?: number;
    readonly slowConsumerTimeoutMs?: number;
    readonly maxQueuedBytesPerConnection?: number;
    readonly redirectCheckIntervalMs?: number;
    readonly maxKeepAliveSeconds?: number;
    readonly packetTimeoutMs?: number;
  } | null;
  readonly api?: {
    readonly host?: string;
    readonly port?: number;
    readonly tokens?: readonly { readonly name: string; readonly hash: string; readonly tenant?: string }[];
    readonly tls?: { readonly cert: string; readonly key: string; readonly ca?: string };
    readonly authFailuresPerMinute?: number;
    readonly docsPage?: boolean;
    readonly dashboard?: boolean;
  } | null;
  readonly cluster?: {
    readonly servers?: readonly string[];
    readonly nodeId?: string;
    readonly partitions?: number;
    readonly replicas?: number;
    readonly user?: string;
    readonly password?: string;
    readonly token?: string;
    readonly tls?: { readonly ca?: string; readonly cert?: string; readonly key?: string };
  } | null;
  readonly sysInterval?: number;
  readonly metrics?: {
    readonly tenantLabels?: { readonly top?: number; readonly include?: readonly string[] | null } | null;
  } | null;
  readonly security?: {
    readonly allowAnonymousOnPublicInterfaces?: boolean;
    readonly connectionRate?: {
      readonly perAddressPerSecond?: number;
      readonly burst?: number;
      readonly maxTrackedAddresses?: number;
    } | null;
    readonly overload?: {
      readonly maxEventLoopLagMs?: number;
      readonly maxHeapUsedPercent?: number;
    } | null;
    readonly flapping?: {
      readonly maxDisconnects?: number;
      readonly windowSeconds?: number;
      readonly banSeconds?: number;
      readonly maxTrackedClients?: number;
    } | null;
    readonly loginFailures?: {
      readonly perLogin?: number;
      readonly perAddress?: number;
      readonly windowSeconds?: number;
      readonly backoffMs?: number;
      readonly maxBackoffMs?: number;
      readonly maxTrackedKeys?: number;
    } | null;
  } | null;
  readonly log?: {
    readonly level?: 'fatal' | 'error' | 'warn' | 'info' | 'debug' | 'trace' | 'silent';
    readonly pretty?: boolean;
  } | null;
}

export const LOG_LEVELS = ['fatal', 'error', 'warn', 'info', 'debug', 'trace', 'silent'] as const;
export const LISTENER_TYPES = ['tcp', 'tls', 'ws', 'wss'] as const;

/** Node ids end up in NATS subjects and KV keys in cluster mode: no dots, spaces or wildcards. */
export const NODE_ID_PATTERN = '^[A-Za-z0-9_-]{1,64}$';
export const NODE_ID_EXPECTED = '1-64 letters, digits, "_" or "-"';

/** Largest `workers` value (processes forked by `bifro start`). */
export const MAX_WORKERS = 64;

const PORT = { type: 'integer', minimum: 0, maximum: 65535, expected: 'integer 0..65535' } as const;
const PATH = { type: 'string', minLength: 1, expected: 'a non-empty path' } as const;
const BOOLEAN = { type: 'boolean', expected: 'true or false' } as const;

function milliseconds(min: number, max: number): Record<string, unknown> {
  return { type: 'integer', minimum: min, maximum: max, expected: `integer ${min}..${max} (milliseconds)` };
}

function integer(min: number, max: number, unit = ''): Record<string, unknown> {
  return { type: 'integer', minimum: min, maximum: max, expected: `integer ${min}..${max}${unit}` };
}

const PLUGIN_REF_OBJECT = {
  properties: {
    use: { type: 'string', minLength: 1, expected: 'a plugin package name' },
    required: BOOLEAN,
    options: { type: 'object', expected: 'a map of plugin options' },
  },
  required: ['use'],
  additionalProperties: false,
} as const;

const PLUGIN_REF = {
  type: ['string', 'object'],
  minLength: 1,
  ...PLUGIN_REF_OBJECT,
  expected: 'a plugin package name, or {use, required, options}',
} as const;

const OPTIONAL_PLUGIN_REF = {
  type: ['string', 'object', 'null'],
  minLength: 1,
  ...PLUGIN_REF_OBJECT,
  expected: 'a plugin package name, or {use, required, options}',
} as const;

const PLUGIN_LIST = {
  type: ['array', 'null'],
  items: PLUGIN_REF,
  expected: 'a list of plugins (package names or {use, required, options})',
} as const;

export const CONFIG_SCHEMA = {
  type: ['object', 'null'],
  expected: 'a map of configuration keys',
  additionalProperties: false,
  properties: {
    nodeId: { type: 'string', pattern: NODE_ID_PATTERN, expected: NODE_ID_EXPECTED },
    dataDir: PATH,
    pluginsDir: PATH,
    pidFile: PATH,
    workers: { type: 'integer', minimum: 1, maximum: MAX_WORKERS, expected: `integer 1..${MAX_WORKERS}` },
    listeners: {
      type: 'array',
      minItems: 1,
      expected: 'a non-empty list of listeners',
      items: {
        type: 'object',
        expected: 'a listener: {name, type, host, port, ...}',
        additionalProperties: false,
        properties: {
          name: { type: 'string', pattern: '^[A-Za-z0-9_.-]{1,64}$', expected: '1-64 letters, digits, ".", "_" or "-"' },
          type: { type: 'string', enum: LISTENER_TYPES, expected: 'one of tcp, tls, ws, wss' },
          host: { type: 'string', minLength: 1, expected: 'a host name or IP address' },
          port: PORT,
          tls: {
            type: 'object',
            expected: 'a map {cert, key, ca, requestCert, rejectUnauthorized}',
            additionalProperties: false,
            required: ['cert', 'key'],
            properties: {
              cert: PATH,
              key: PATH,
              ca: PATH,
              requestCert: BOOLEAN,
              rejectUnauthorized: BOOLEAN,
            },
          },
          path: { type: 'string', pattern: '^/', expected: 'an HTTP path starting with "/"' },
          proxyProtocol: BOOLEAN,
        },
      },
    },
    plugins: {
      type: ['object', 'null'],
      expected: 'a map {packages, initTimeoutMs, callTimeoutMs, auth, acl, events, balancer, settings, throttler, storage}',
      additionalProperties: false,
      properties: {
        packages: {
          type: ['array', 'null'],
          items: { type: 'string', minLength: 1, expected: 'an npm package name' },
          uniqueItems: true,
          expected: 'a list of distinct npm package names',
        },
        initTimeoutMs: milliseconds(1, 600000),
        callTimeoutMs: milliseconds(1, 600000),
        auth: PLUGIN_LIST,
        acl: PLUGIN_LIST,
        events: PLUGIN_LIST,
        balancer: OPTIONAL_PLUGIN_REF,
        settings: OPTIONAL_PLUGIN_REF,
        throttler: OPTIONAL_PLUGIN_REF,
        storage: OPTIONAL_PLUGIN_REF,
      },
    },
    mqtt: {
      type: ['object', 'null'],
      expected:
        'a map {connectTimeoutMs, maxClientIdLength, writeHighWaterBytes, slowConsumerTimeoutMs, maxQueuedBytesPerConnection, redirectCheckIntervalMs, maxKeepAliveSeconds, packetTimeoutMs}',
      additionalProperties: false,
      properties: {
        connectTimeoutMs: milliseconds(100, 3600000),
        maxClientIdLength: { type: 'integer', minimum: 1, maximum: 65535, expected: 'integer 1..65535' },
        writeHighWaterBytes: { type: 'integer', minimum: 16384, maximum: 1073741824, expected: 'integer 16384..1073741824' },
        slowConsumerTimeoutMs: milliseconds(1000, 3600000),
        maxQueuedBytesPerConnection: { type: 'integer', minimum: 65536, maximum: 1073741824, expected: 'integer 65536..1073741824' },
        redirectCheckIntervalMs: milliseconds(0, 86400000),
        // Server Keep Alive is a two-byte integer (§3.2.2.3.14): 1..65535 seconds.
        maxKeepAliveSeconds: { type: 'integer', minimum: 1, maximum: 65535, expected: 'integer 1..65535 (seconds)' },
        packetTimeoutMs: milliseconds(100, 3600000),
      },
    },
    security: {
      type: ['object', 'null'],
      expected: 'a map {allowAnonymousOnPublicInterfaces, connectionRate, overload, flapping, loginFailures}',
      additionalProperties: false,
      properties: {
        allowAnonymousOnPublicInterfaces: BOOLEAN,
        connectionRate: {
          type: ['object', 'null'],
          expected: 'a map {perAddressPerSecond, burst, maxTrackedAddresses}',
          additionalProperties: false,
          properties: {
            perAddressPerSecond: integer(0, 1000000, ' (connections per second per address; 0 = no limit)'),
            burst: integer(1, 10000000, ' (connections)'),
            maxTrackedAddresses: integer(1000, 100000000, ' (addresses)'),
          },
        },
        overload: {
          type: ['object', 'null'],
          expected: 'a map {maxEventLoopLagMs, maxHeapUsedPercent}',
          additionalProperties: false,
          properties: {
            maxEventLoopLagMs: integer(0, 3600000, ' (milliseconds; 0 = not checked)'),
            maxHeapUsedPercent: integer(0, 100, ' (per cent of the heap limit; 0 = not checked)'),
          },
        },
        flapping: {
          type: ['object', 'null'],
          expected: 'a map {maxDisconnects, windowSeconds, banSeconds, maxTrackedClients}',
          additionalProperties: false,
          properties: {
            maxDisconnects: integer(0, 1000000, ' (disconnects tolerated at once; 0 = no flapping detection)'),
            windowSeconds: integer(1, 86400, ' (seconds to refill maxDisconnects)'),
            banSeconds: integer(1, 604800, ' (seconds)'),
            maxTrackedClients: integer(1000, 100000000, ' (client ids)'),
          },
        },
        loginFailures: {
          type: ['object', 'null'],
          expected: 'a map {perLogin, perAddress, windowSeconds, backoffMs, maxBackoffMs, maxTrackedKeys}',
          additionalProperties: false,
          properties: {
            perLogin: integer(0, 1000000, ' (failed logins; 0 = no back-off per login)'),
            perAddress: integer(0, 1000000, ' (failed logins; 0 = no back-off per address)'),
            windowSeconds: integer(1, 86400, ' (seconds)'),
            backoffMs: milliseconds(1, 600000),
            maxBackoffMs: milliseconds(1, 600000),
            maxTrackedKeys: integer(1000, 100000000, ' (logins and addresses)'),
          },
        },
      },
    },
    api: {
      type: ['object', 'null'],
      expected: 'a map {host, port, tokens, tls, authFailuresPerMinute, docsPage, dashboard}',
      additionalProperties: false,
      properties: {
        host: { type: 'string', minLength: 1, expected: 'a host name or IP address' },
        port: PORT,
        tokens: {
          type: 'array',
          expected: 'a list of tokens {name, hash, tenant}',
          items: {
            type: 'object',
            expected: 'a token {name, hash, tenant} (bifro token create prints one)',
            additionalProperties: false,
            required: ['name', 'hash'],
            properties: {
              name: { type: 'string', pattern: '^[A-Za-z0-9_.@-]{1,64}$', expected: '1-64 letters, digits, ".", "_", "@" or "-"' },
              hash: {
                type: 'string',
                pattern: '^sha256:[0-9a-f]{64}$',
                expected: '"sha256:" and 64 lowercase hex digits (bifro token create)',
              },
              tenant: { type: 'string', minLength: 1, expected: 'a tenant id' },
            },
          },
        },
        tls: {
          type: 'object',
          expected: 'a map {cert, key, ca}',
          additionalProperties: false,
          required: ['cert', 'key'],
          properties: { cert: PATH, key: PATH, ca: PATH },
        },
        authFailuresPerMinute: integer(1, 100000, ' (requests with a bad token per address per minute)'),
        docsPage: BOOLEAN,
        dashboard: BOOLEAN,
      },
    },
    cluster: {
      type: ['object', 'null'],
      expected: 'a map {servers, nodeId, partitions, replicas, user, password, token, tls}',
      additionalProperties: false,
      required: ['servers'],
      properties: {
        servers: {
          type: 'array',
          minItems: 1,
          items: { type: 'string', minLength: 1, expected: 'a NATS server URL such as nats://127.0.0.1:4222' },
          uniqueItems: true,
          expected: 'a non-empty list of distinct NATS server URLs (nats://host:port)',
        },
        nodeId: { type: 'string', pattern: NODE_ID_PATTERN, expected: NODE_ID_EXPECTED },
        partitions: integer(1, 1024, ' (partitions of the cluster keyspaces)'),
        // JetStream keeps 1 to 5 copies of a stream.
        replicas: integer(1, 5, ' (JetStream replicas; 1 for a single NATS server)'),
        user: { type: 'string', minLength: 1, expected: 'a NATS user name' },
        password: { type: 'string', minLength: 1, expected: 'a NATS password' },
        token: { type: 'string', minLength: 1, expected: 'a NATS token' },
        tls: {
          type: 'object',
          expected: 'a map {ca, cert, key}',
          additionalProperties: false,
          properties: { ca: PATH, cert: PATH, key: PATH },
        },
      },
    },
    sysInterval: integer(0, 86400, ' (seconds between $SYS publications; 0 = off)'),
    metrics: {
      type: ['object', 'null'],
      expected: 'a map {tenantLabels}',
      additionalProperties: false,
      properties: {
        tenantLabels: {
          type: ['object', 'null'],
          expected: 'a map {top, include} (tenants with their own tenant label in /metrics)',
          additionalProperties: false,
          properties: {
            top: integer(0, 10000, ' (tenants by connections with their own label)'),
            include: {
              type: ['array', 'null'],
              items: { type: 'string', minLength: 1, expected: 'a tenant id' },
              uniqueItems: true,
              maxItems: 10000,
              expected: 'a list of distinct tenant ids (at most 10000) always labelled',
            },
          },
        },
      },
    },
    log: {
      type: ['object', 'null'],
      expected: 'a map {level, pretty}',
      additionalProperties: false,
      properties: {
        level: { type: 'string', enum: LOG_LEVELS, expected: `one of ${LOG_LEVELS.join(', ')}` },
        pretty: BOOLEAN,
      },
    },
  },
} as const;
