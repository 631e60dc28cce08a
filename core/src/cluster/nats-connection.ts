import { readFileSync } from 'node:fs';
import { connect, DebugEvents, Events, type ConnectionOptions, type NatsConnection } from 'nats';
import type { ClusterConfig } from '../base/config-types';
import type { Logger } from '../base/logger';
import { describeError } from '../base/errors';

/** Delays between attempts grow from 250 ms to this, with jitter: a restarted NATS cluster is not hit by every node at once. */
const MAX_RECONNECT_DELAY_MS = 5000;
/** While NATS stays unreachable at start, the warning is repeated this often (each attempt is logged at debug). */
const UNREACHABLE_WARN_EVERY_MS = 30_000;

/** A delay for attempt `n` (1, 2, ...): exponential up to the cap, half of it jitter. */
export function backoffMs(n: number): number {
  const base = Math.min(MAX_RECONNECT_DELAY_MS, 250 * 2 ** Math.min(n, 10));
  return base / 2 + Math.random() * (base / 2);
}

/** The client options of `cluster`: servers, credentials, TLS; once connected, reconnecting forever. */
export function connectionOptions(cluster: ClusterConfig, nodeId: string): ConnectionOptions {
  let attempt = 0;
  const tls = cluster.tls;
  return {
    servers: [...cluster.servers],
    name: `bifro-${nodeId}`,
    ...(cluster.user !== undefined ? { user: cluster.user, pass: cluster.password } : {}),
    ...(cluster.token !== undefined ? { token: cluster.token } : {}),
    ...(tls !== undefined
      ? {
          tls: {
            ...(tls.ca !== undefined ? { ca: readFileSync(tls.ca, 'utf8') } : {}),
            ...(tls.cert !== undefined ? { cert: readFileSync(tls.cert, 'utf8') } : {}),
            ...(tls.key !== undefined ? { key: readFileSync(tls.key, 'utf8') } : {}),
          },
        }
      : {}),
    maxReconnectAttempts: -1,
    reconnectDelayHandler: () => backoffMs(++attempt),
    pingInterval: 5000,
    maxPingOut: 2,
  };
}

/**
 * The NATS connection of a node. The first connection is retried here, on a timer the node can
 * cancel (the client's own wait-on-first-connect cannot be stopped); once connected, the client
 * reconnects by itself, forever. Every change of status is logged naming the server.
 */
export class NatsLink {
  private nc: NatsConnection | undefined;
  private up = false;
  private closed = false;
  private retry: NodeJS.Timeout | undefined;
  private attempts = 0;
  private lastWarn = 0;
  private readonly servers: string;

  constructor(
    private readonly cluster: ClusterConfig,
    private readonly nodeId: string,
    private readonly logger: Logger,
    private readonly onConnected: (nc: NatsConnection) => void,
    /** The connection was lost (false) or came back (true) after the first connect. */
    private readonly onStatus: (up: boolean) => void,
  ) {
    this.servers = cluster.servers.join(', ');
    void this.attempt();
  }

  /** Connected to a NATS server now. */
  connected(): boolean {
    return this.up;
  }

  private async attempt(): Promise<void> {
    this.retry = undefined;
    let nc: NatsConnection;
    try {
      nc = await connect(connectionOptions(this.cluster, this.nodeId));
    } catch (err) {
      if (this.closed) return;
      this.attempts++;
      const now = Date.now();
      const fields = { servers: this.cluster.servers, attempts: this.attempts, err: describeError(err) };
      if (now - this.lastWarn >= UNREACHABLE_WARN_EVERY_MS) {
        this.lastWarn = now;
        this.logger.warn(fields, `NATS not reachable (${this.servers}): MQTT is served by this node alone meanwhile; retrying`);
      } else this.logger.debug(fields, `NATS not reachable (${this.servers}); retrying`);
      this.retry = setTimeout(() => void this.attempt(), backoffMs(this.attempts));
      return;
    }
    if (this.closed) {
      await nc.close();
      return;
    }
    this.nc = nc;
    this.up = true;
    this.logger.info({ server: nc.getServer() }, `connected to NATS ${nc.getServer()}`);
    void this.watchStatus(nc);
    this.onConnected(nc);
  }

  private async watchStatus(nc: NatsConnection): Promise<void> {
    for await (const s of nc.status()) {
      const server = String(s.data);
      if (s.type === Events.Disconnect) {
        this.up = false;
        if (!this.closed) this.logger.warn({ server }, `disconnected from NATS ${server}; reconnecting`);
        this.onStatus(false);
      } else if (s.type === Events.Reconnect) {
        this.up = true;
        this.logger.info({ server }, `reconnected to NATS ${server}`);
        this.onStatus(true);
      } else if (s.type === Events.Error) {
        this.logger.warn({ server: nc.getServer(), err: server }, `NATS error on ${nc.getServer()}: ${server}`);
      } else if (s.type === DebugEvents.Reconnecting) {
        this.logger.debug({ server }, `reconnecting to NATS ${server}`);
      }
    }
  }

  /** Stops connecting, or drains the connection (what was published is flushed first); closes it when NATS is away. */
  async close(): Promise<void> {
    const wasUp = this.up;
    this.closed = true;
    this.up = false;
    if (this.retry !== undefined) clearTimeout(this.retry);
    const nc = this.nc;
    if (nc === undefined || nc.isClosed()) return;
    // A drain waits for a server that is not there: while reconnecting, close at once.
    if (wasUp) await nc.drain().catch(() => nc.close());
    else await nc.close();
  }
}
