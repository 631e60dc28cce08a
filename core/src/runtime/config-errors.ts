import { BifroError, defineErrors } from '../base/errors';

/** Errors of loading the broker configuration (file, environment, command-line overrides). */
export const CONFIG_ERRORS = defineErrors({
  BIFRO_CONFIG_NOT_FOUND: {
    summary: 'The configuration file given with --config or BIFRO_CONFIG does not exist.',
    remedy: 'Check the path, or leave out --config / BIFRO_CONFIG to use conf/bifro.yml or the built-in defaults.',
  },
  BIFRO_CONFIG_READ: {
    summary: 'The configuration file exists but cannot be read (a directory, no permission).',
    remedy: 'Point --config at a readable YAML file.',
  },
  BIFRO_CONFIG_PARSE: {
    summary: 'The configuration file is not valid YAML.',
    remedy: 'Fix the syntax at the line and column named in the message (indentation, quotes, colons).',
  },
  BIFRO_CONFIG_UNKNOWN_KEY: {
    summary: 'The configuration contains a key the broker does not know (often a typo).',
    remedy: 'Remove or correct the key; the keys are listed in docs/configuration.md and the commented conf/bifro.yml.',
  },
  BIFRO_CONFIG_MISSING_KEY: {
    summary: 'A key the configuration needs is absent (e.g. `tls.cert` of a tls listener, `use` of a plugin).',
    remedy: 'Add the key named in the message.',
  },
  BIFRO_CONFIG_INVALID_VALUE: {
    summary: 'A configuration value has the wrong type or is out of range.',
    remedy: 'Change the value to what the message says is expected.',
  },
  BIFRO_CONFIG_DUPLICATE_LISTENER: {
    summary: 'Two listeners have the same name, or would bind the same host and port.',
    remedy: 'Give every listener a unique `name` and its own port.',
  },
  BIFRO_CONFIG_TLS_FILE: {
    summary: 'A certificate, key or CA file named by a tls/wss listener cannot be read.',
    remedy: 'Check the path (relative paths resolve against the config file directory) and its permissions.',
  },
  BIFRO_CONFIG_ENV_INVALID: {
    summary: 'A BIFRO_* environment variable holds a value the broker cannot use.',
    remedy: 'Fix or unset the variable named in the message.',
  },
  BIFRO_CONFIG_OVERRIDE_INVALID: {
    summary: 'A command-line override (--port, --data-dir, --plugins-dir) holds a value the broker cannot use.',
    remedy: 'Fix the option named in the message.',
  },
  BIFRO_CONFIG_WORKERS_LISTENER: {
    summary:
      'A tls, ws or wss listener is configured with `workers` above 1. Only plain TCP connections can be handed between worker processes: a TLS session or a WebSocket lives in the process that accepted it.',
    remedy:
      'Use `workers: 1` with such listeners, or terminate TLS / WebSocket in a proxy in front of tcp listeners (with `proxyProtocol: true` to keep the client address); see docs/multicore.md.',
  },
  BIFRO_CONFIG_WORKERS_API: {
    summary:
      'The admin API (`api`) is configured with `workers` above 1. Each worker process serves only its own share of the tenants, so no single process could answer the API for the whole broker.',
    remedy: 'Use `workers: 1` (the default) with the admin API, or leave `api` out of a multi-worker configuration.',
  },
  BIFRO_CONFIG_WORKERS_CLUSTER: {
    summary:
      'Cluster mode (`cluster`) is configured with `workers` above 1. A cluster node is one process; worker processes of one node would each need their own place in the cluster, which is not supported yet.',
    remedy: 'Use `workers: 1` (the default) with `cluster`, and run more nodes instead of more workers (docs/cluster.md).',
  },
  BIFRO_CONFIG_CLUSTER_SERVER: {
    summary: 'An entry of `cluster.servers` is not a NATS server URL (`nats://host:port`, `tls://host:port`, or `host:port`).',
    remedy: 'Write each NATS server as `nats://host:port`; the key path in the message names the entry.',
  },
  BIFRO_CONFIG_CLUSTER_AUTH: {
    summary:
      'The NATS credentials of `cluster` are incomplete or mixed: `user` without `password` (or the reverse), or a `token` together with a user.',
    remedy: 'Give `cluster.user` and `cluster.password` together, or `cluster.token` alone.',
  },
  BIFRO_CONFIG_ANONYMOUS_EXPOSED: {
    summary:
      'A listener binds a non-loopback host (0.0.0.0, ::, an external address or a host name) while no auth plugin is configured, so the dev-only allow-all auth would accept anyone who can reach it.',
    remedy:
      'Configure an auth plugin in `plugins.auth`, or bind the listener to 127.0.0.1 (the default without auth), or, for a trusted network only, opt in with `security.allowAnonymousOnPublicInterfaces: true` (logged at warn at every start).',
  },
  BIFRO_CONFIG_API_TOKENS: {
    summary: 'The `api` section enables the admin API but names no token, or two tokens share a name or a hash.',
    remedy:
      'Create a token with `bifro token create --name NAME [--tenant T]` and paste the line it prints under `api.tokens`; give every token its own name.',
  },
  BIFRO_CONFIG_INVALID: {
    summary: 'The configuration has several problems; each is listed with its own code.',
    remedy: 'Fix every problem listed; the broker reports all of them at once.',
  },
});

export type ConfigErrorCode = keyof typeof CONFIG_ERRORS;

/** One problem found while loading the configuration. */
export interface ConfigIssue {
  readonly code: ConfigErrorCode;
  /** Key path such as `listeners[0].port`, or the variable / option name (`BIFRO_PORT`, `--port`). */
  readonly path: string;
  /** Full message: where (file:line:col, variable or option), the key path, what was expected. */
  readonly message: string;
  /** 1-based position in the config file, when the problem is in the file. */
  readonly line?: number;
  readonly column?: number;
}

/**
 * Thrown by loadConfig with every problem found. Its code is the code of the single problem, or
 * BIFRO_CONFIG_INVALID when there are several (each listed in `issues` with its own code).
 */
export class ConfigError extends BifroError {
  constructor(
    readonly issues: readonly ConfigIssue[],
    readonly file: string | undefined,
  ) {
    super(
      issues.length === 1 ? issues[0].code : 'BIFRO_CONFIG_INVALID',
      issues.length === 1
        ? issues[0].message
        : `${issues.length} problems in the configuration${file ? ` (${file})` : ''}:\n${issues.map((i) => `  - ${i.code}: ${i.message}`).join('\n')}`,
      { file, issues },
    );
  }
}
