/** Built-in defaults of the broker configuration: what a setting is when the file, the environment and the command line say nothing. */
import os from 'node:os';
import path from 'node:path';
import type { ListenerConfig, SecurityConfig } from '../base/config-types';
import { NODE_ID_PATTERN } from './config-schema';

/** Where the broker looks for its configuration when none is named. */
export const DEFAULT_CONFIG_FILE = path.join('conf', 'bifro.yml');
/**
 * Where `bifro plugin install` puts plugins and the broker scans for them when `pluginsDir` names
 * no folder: `<dataDir>/plugins`. Installed plugins are state the broker user writes, like the
 * storage: in the data directory they stay out of the installation (a clone's own `plugins/` are
 * npm workspaces whose folders the docs generator reads). First-party plugins need no folder:
 * they resolve by package name from the broker's node_modules.
 */
export const DEFAULT_PLUGINS_SUBDIR = 'plugins';
/** The port a listener gets when it names none. */
export const DEFAULT_PORTS: Readonly<Record<ListenerConfig['type'], number>> = { tcp: 1883, tls: 8883, ws: 8083, wss: 8084 };
/** The host a listener binds when it names none and an auth plugin is configured. */
export const DEFAULT_HOST = '0.0.0.0';
/** The host a listener binds when it names none and no auth plugin is configured (dev-only allow-all auth). */
export const DEFAULT_ANONYMOUS_HOST = '127.0.0.1';
/**
 * `security` when the file says nothing (docs/security.md § Connection floods and flapping). No
 * per-address rate: a fleet behind one NAT address or load balancer reconnecting after an outage
 * comes from few addresses, so new connections are shed only while the broker itself is overloaded
 * (event loop lag, heap). Flapping counts only ends the client did not ask for, with a bucket no
 * test suite empties (a loop above 2 per second for a minute does).
 */
export const DEFAULT_SECURITY: SecurityConfig = {
  allowAnonymousOnPublicInterfaces: false,
  connectionRate: { perAddressPerSecond: 0, burst: 2000, maxTrackedAddresses: 100_000 },
  overload: { maxEventLoopLagMs: 1000, maxHeapUsedPercent: 90 },
  flapping: { maxDisconnects: 120, windowSeconds: 60, banSeconds: 300, maxTrackedClients: 100_000 },
  loginFailures: { perLogin: 5, perAddress: 100, windowSeconds: 600, backoffMs: 1000, maxBackoffMs: 8000, maxTrackedKeys: 100_000 },
};
export const DEFAULT_WS_PATH = '/mqtt';
/** The admin API binds loopback unless `api.host` says otherwise (docs/api.md § Security). */
export const DEFAULT_API_HOST = '127.0.0.1';
export const DEFAULT_API_PORT = 8091;
export const DEFAULT_API_AUTH_FAILURES_PER_MINUTE = 30;
/** cluster.partitions: 16 partitions spread the cluster's keyspaces over a few JetStream leaders. */
export const DEFAULT_CLUSTER_PARTITIONS = 16;
/** cluster.replicas: 3 copies survive one NATS server lost (R3, docs/cluster.md). */
export const DEFAULT_CLUSTER_REPLICAS = 3;
/** `$SYS` topics: published to each tenant every 10 s, like mosquitto's sys_interval. */
export const DEFAULT_SYS_INTERVAL_SECONDS = 10;
export const DEFAULT_INIT_TIMEOUT_MS = 10_000;
export const DEFAULT_CALL_TIMEOUT_MS = 5_000;
export const DEFAULT_CONNECT_TIMEOUT_MS = 10_000;
export const DEFAULT_MAX_CLIENT_ID_LENGTH = 65_535;
/**
 * mqtt.maxKeepAliveSeconds: one hour. Above AWS IoT Core's 1200 s and Azure IoT Hub's 1767 s, so
 * clients tuned for those keep their value, far below MQTT's 65535 s (18 h) so a silent or
 * keep-alive-0 connection is dropped within 90 minutes (docs/security.md § Time limits).
 */
export const DEFAULT_MAX_KEEP_ALIVE_SECONDS = 3600;
/** mqtt.packetTimeoutMs: a packet must be complete 30 s after its first byte (4 MiB at ~1.1 Mbit/s). */
export const DEFAULT_PACKET_TIMEOUT_MS = 30_000;
/**
 * mqtt.maxQueuedBytesPerConnection: twice the default largest payload (MaxUserPayloadBytes, 4 MiB),
 * so the socket's buffer (writeHighWaterBytes, 1 MiB, plus the packet written under it) and one
 * more message of the largest size fit; two stalled subscribers then hold ~20 MiB, not ~1 GB.
 */
export const DEFAULT_MAX_QUEUED_BYTES_PER_CONNECTION = 8 * 1024 * 1024;

/** The node id used when none is configured: the host name made safe, or "bifro-1". */
export function defaultNodeId(): string {
  const host = os
    .hostname()
    .replace(/[^A-Za-z0-9_-]+/g, '-')
    .replace(/^-+|-+$/g, '')
    .slice(0, 64);
  return host && new RegExp(NODE_ID_PATTERN).test(host) ? host : 'bifro-1';
}
