import http from 'node:http';
import https from 'node:https';
import net from 'node:net';
import type { Duplex } from 'node:stream';
import tls from 'node:tls';
import pino from 'pino';
import type { ClientCertificate } from '@bifro/spi';
import type { ConnectionOrigin } from './connection-origin';
import type { ListenerConfig } from '../base/config-types';
import type { Logger } from '../base/logger';
import { BifroError, describeError } from '../base/errors';
import { parseProxyHeader, type ProxyAddress } from './proxy-protocol';
import { clientCertificateOf, loadTlsOptions, tlsServerOptions } from './tls-options';
import { DEFAULT_WS_PATH, WebSocketEndpoint, type UpgradeRefusal } from './websocket-endpoint';

/** How long a PROXY protocol header may take to arrive. */
export const PROXY_HEADER_TIMEOUT_MS = 5000;
/** How long the TLS handshake and/or the WebSocket upgrade may take, after the PROXY header if any. */
export const HANDSHAKE_TIMEOUT_MS = 10000;

/** Counters of one listener, for metrics and tests. Failures are also logged at debug. */
export interface ListenerStats {
  /** Connections handed to the MQTT layer. */
  accepted: number;
  /** PROXY headers missing, malformed, oversize or too slow. */
  proxyHeaderFailures: number;
  /** TLS handshakes that did not complete (bad certificate, protocol error, client gone, timed out: a timeout may count here and in `handshakeTimeouts`). */
  tlsHandshakeFailures: number;
  /** HTTP requests answered with an error instead of a WebSocket (wrong path, no upgrade, no acceptable subprotocol, malformed). */
  httpRefusals: number;
  /** Connections dropped because the TLS handshake and/or WebSocket upgrade did not finish within the handshake timeout (an absolute deadline, so trickling bytes does not extend it). */
  handshakeTimeouts: number;
  /** Connections closed at accept because {@link BindOptions.admit} refused their address (connection rate). */
  refusedAtAccept: number;
}

/** A listener after it bound: the real port when 0 was configured. */
export interface BoundListener {
  readonly name: string;
  readonly type: ListenerConfig['type'];
  readonly host: string;
  readonly port: number;
  readonly stats: Readonly<ListenerStats>;
  /** Stop accepting and drop connections still in their handshake; resolves once every accepted connection has closed (the MQTT layer closes its own). */
  close(): Promise<void>;
}

/** Called with each accepted byte stream and where it came from. */
export type AcceptHandler = (socket: Duplex, origin: ConnectionOrigin) => void;

export interface BindOptions {
  /** Handshake failures are logged here at debug. Default: silent. */
  readonly logger?: Logger;
  /** Default {@link PROXY_HEADER_TIMEOUT_MS}. */
  readonly proxyHeaderTimeoutMs?: number;
  /** Default {@link HANDSHAKE_TIMEOUT_MS}. */
  readonly handshakeTimeoutMs?: number;
  /**
   * Asked once per TCP connection with the client's address (the PROXY header's when the listener
   * reads one), before TLS, HTTP and MQTT: false closes the socket at once (the per-address
   * connection rate, security.connectionRate). Default: every connection is admitted.
   */
  readonly admit?: (remoteAddress: string, listener: string) => boolean;
}

/** A TCP connection that is not yet an MQTT byte stream: waiting for its PROXY header, TLS handshake or WebSocket upgrade. */
interface PendingConnection {
  readonly raw: net.Socket;
  /** Address and port of the TCP peer (the proxy when PROXY protocol is on): the key in the pending map. */
  readonly key: string;
  /** The client named by the PROXY header. */
  client: ProxyAddress | undefined;
  timer: NodeJS.Timeout | undefined;
}

const SILENT: Logger = pino({ level: 'silent' });

function peerKey(socket: net.Socket): string | undefined {
  const address = socket.remoteAddress;
  const port = socket.remotePort;
  return address === undefined || port === undefined ? undefined : `${address}|${port}`;
}

/**
 * Bind one listener. Every type starts with a plain TCP server (noDelay); connections then go
 * through the stages the type needs — PROXY header (when `proxyProtocol`), TLS handshake (tls,
 * wss), HTTP upgrade (ws, wss) — and reach `onAccept` as a byte stream with their origin.
 * Rejects with BIFRO_LISTENER_TLS_INVALID when the TLS files are unusable and with
 * BIFRO_LISTENER_BIND_FAILED naming the listener, address and cause when it cannot listen.
 */
export async function bindListener(config: ListenerConfig, onAccept: AcceptHandler, options: BindOptions = {}): Promise<BoundListener> {
  const secure = config.type === 'tls' || config.type === 'wss' ? await loadTlsOptions(config) : undefined;
  const listener = new TransportListener(
    config,
    onAccept,
    options,
    secure === undefined ? undefined : tlsServerOptions(secure, handshakeTimeoutOf(options)),
  );
  await listener.listen();
  return listener;
}

function handshakeTimeoutOf(options: BindOptions): number {
  return options.handshakeTimeoutMs ?? HANDSHAKE_TIMEOUT_MS;
}

class TransportListener implements BoundListener {
  readonly name: string;
  readonly type: ListenerConfig['type'];
  readonly host: string;
  port = 0;
  readonly stats: ListenerStats = {
    accepted: 0,
    proxyHeaderFailures: 0,
    tlsHandshakeFailures: 0,
    httpRefusals: 0,
    handshakeTimeouts: 0,
    refusedAtAccept: 0,
  };
  private readonly server: net.Server;
  private readonly pending = new Map<string, PendingConnection>();
  private readonly logger: Logger;
  private readonly proxyHeaderTimeoutMs: number;
  private readonly handshakeTimeoutMs: number;
  private readonly admit: ((remoteAddress: string, listener: string) => boolean) | undefined;
  /** The next stage after the PROXY header: hands the raw socket to TLS / HTTP, or straight to MQTT. */
  private readonly nextStage: (conn: PendingConnection) => void;

  constructor(
    private readonly config: ListenerConfig,
    private readonly onAccept: AcceptHandler,
    options: BindOptions,
    tlsOptions: tls.TlsOptions | undefined,
  ) {
    this.name = config.name;
    this.type = config.type;
    this.host = config.host;
    this.logger = options.logger ?? SILENT;
    this.proxyHeaderTimeoutMs = options.proxyHeaderTimeoutMs ?? PROXY_HEADER_TIMEOUT_MS;
    this.handshakeTimeoutMs = handshakeTimeoutOf(options);
    this.admit = options.admit;
    this.server = net.createServer({ noDelay: true }, (raw) => this.onTcpConnection(raw));
    this.nextStage = this.buildStages(tlsOptions);
  }

  listen(): Promise<void> {
    const { config } = this;
    return new Promise<void>((resolve, reject) => {
      const onError = (err: NodeJS.ErrnoException): void => {
        reject(
          new BifroError(
            'BIFRO_LISTENER_BIND_FAILED',
            `listener "${config.name}" cannot listen on ${config.host}:${config.port}: ${err.code ?? err.message}`,
            { listener: config.name },
          ),
        );
      };
      this.server.once('error', onError);
      this.server.listen(config.port, config.host, () => {
        this.server.off('error', onError);
        this.port = (this.server.address() as net.AddressInfo).port;
        resolve();
      });
    });
  }

  close(): Promise<void> {
    return new Promise<void>((resolve) => {
      this.server.close(() => resolve());
      for (const conn of this.pending.values()) {
        clearTimeout(conn.timer);
        conn.raw.destroy();
      }
      this.pending.clear();
    });
  }

  // ------------------------------------------------------------------------------ stage 0: TCP

  private onTcpConnection(raw: net.Socket): void {
    // Without a PROXY header the socket's address is the client's: refuse a flood before anything else.
    if (!this.config.proxyProtocol && !this.admitted(raw, raw.remoteAddress ?? '')) return;
    if (!this.config.proxyProtocol && this.type === 'tcp') {
      // The common case stays as lean as it was: no bookkeeping, no timer.
      this.handOver(raw, raw.remoteAddress ?? '', raw.remotePort ?? 0, undefined);
      return;
    }
    const key = peerKey(raw);
    if (key === undefined) {
      raw.destroy();
      return;
    }
    raw.on('error', (err: Error) => this.logger.debug({ listener: this.name, err: err.message }, 'connection error during handshake'));
    const conn: PendingConnection = { raw, key, client: undefined, timer: undefined };
    this.pending.set(key, conn);
    raw.once('close', () => {
      clearTimeout(conn.timer);
      if (this.pending.get(key) === conn) this.pending.delete(key);
    });
    if (this.config.proxyProtocol) this.readProxyHeader(conn);
    else this.nextStage(conn);
  }

  /** The connection-rate check: false when the socket was closed. */
  private admitted(raw: net.Socket, remoteAddress: string): boolean {
    if (this.admit === undefined || this.admit(remoteAddress, this.name)) return true;
    this.stats.refusedAtAccept++;
    raw.destroy();
    return false;
  }

  private arm(conn: PendingConnection, ms: number, onTimeout: () => void): void {
    clearTimeout(conn.timer);
    conn.timer = setTimeout(() => {
      conn.timer = undefined;
      onTimeout();
      conn.raw.destroy();
    }, ms);
  }

  // ------------------------------------------------------------------------------ stage 1: PROXY header

  private readProxyHeader(conn: PendingConnection): void {
    const { raw } = conn;
    let received: Buffer | undefined;
    this.arm(conn, this.proxyHeaderTimeoutMs, () => {
      this.stats.proxyHeaderFailures++;
      this.logger.debug({ listener: this.name, remote: raw.remoteAddress }, 'PROXY protocol header timed out');
    });
    const onData = (chunk: Buffer): void => {
      received = received === undefined ? chunk : Buffer.concat([received, chunk]);
      const result = parseProxyHeader(received);
      if (result.status === 'incomplete') return;
      raw.off('data', onData);
      clearTimeout(conn.timer);
      if (result.status === 'invalid') {
        this.stats.proxyHeaderFailures++;
        this.logger.debug({ listener: this.name, remote: raw.remoteAddress, reason: result.reason }, 'PROXY protocol header refused');
        raw.destroy();
        return;
      }
      // What follows the header is the client's: give it back to the stream for the next stage.
      raw.pause();
      if (received.length > result.length) raw.unshift(received.subarray(result.length));
      // LOCAL / UNKNOWN carry no client: the socket's own address stands.
      conn.client = result.header.source;
      if (!this.admitted(raw, conn.client?.address ?? raw.remoteAddress ?? '')) return;
      this.nextStage(conn);
    };
    raw.on('data', onData);
  }

  // ------------------------------------------------------------------------------ stage 2: TLS / HTTP

  private buildStages(tlsOptions: tls.TlsOptions | undefined): (conn: PendingConnection) => void {
    switch (this.type) {
      case 'tcp':
        return (conn) => {
          this.handOverPending(conn, conn.raw, conn.raw, undefined);
          // The PROXY stage paused the socket; the MQTT layer reads in flowing mode.
          conn.raw.resume();
        };
      case 'tls': {
        const server = tls.createServer(tlsOptions ?? {});
        this.watchTls(server);
        server.on('secureConnection', (socket: tls.TLSSocket) => this.onSecured(socket));
        return (conn) => {
          this.armHandshake(conn);
          server.emit('connection', conn.raw);
        };
      }
      case 'ws': {
        const server = http.createServer();
        this.serveWebSocket(server);
        return (conn) => {
          this.armHandshake(conn);
          server.emit('connection', conn.raw);
          if (conn.raw.isPaused()) conn.raw.resume();
        };
      }
      case 'wss': {
        const server = https.createServer(tlsOptions ?? {});
        this.watchTls(server);
        this.serveWebSocket(server);
        return (conn) => {
          this.armHandshake(conn);
          server.emit('connection', conn.raw);
        };
      }
    }
  }

  private armHandshake(conn: PendingConnection): void {
    this.arm(conn, this.handshakeTimeoutMs, () => {
      this.stats.handshakeTimeouts++;
      this.logger.debug({ listener: this.name, remote: conn.raw.remoteAddress }, 'handshake timed out');
    });
  }

  private watchTls(server: tls.Server): void {
    server.on('tlsClientError', (err: Error, socket: tls.TLSSocket) => {
      this.stats.tlsHandshakeFailures++;
      this.logger.debug({ listener: this.name, remote: socket.remoteAddress, err: describeError(err) }, 'TLS handshake failed');
      socket.destroy();
    });
  }

  private onSecured(socket: tls.TLSSocket): void {
    const conn = this.pendingOf(socket);
    if (conn === undefined) {
      socket.destroy();
      return;
    }
    this.handOverPending(conn, socket, socket, clientCertificateOf(socket));
  }

  private serveWebSocket(server: http.Server): void {
    const endpoint = new WebSocketEndpoint({
      path: this.config.path ?? DEFAULT_WS_PATH,
      onConnection: (stream, socket) => {
        // The HTTP server runs on our net / TLS sockets, so this is always a net.Socket.
        const conn = socket instanceof net.Socket ? this.pendingOf(socket) : undefined;
        if (conn === undefined || !(socket instanceof net.Socket)) {
          stream.destroy();
          return;
        }
        this.handOverPending(conn, stream, socket, socket instanceof tls.TLSSocket ? clientCertificateOf(socket) : undefined);
      },
      onRefused: (reason: UpgradeRefusal, socket: Duplex, detail: string) => {
        this.stats.httpRefusals++;
        const remote = socket instanceof net.Socket ? socket.remoteAddress : undefined;
        this.logger.debug({ listener: this.name, remote, reason, detail }, 'WebSocket upgrade refused');
      },
    });
    server.on('upgrade', endpoint.onUpgrade);
    server.on('request', endpoint.onRequest);
    server.on('clientError', (err: Error, socket: Duplex) => {
      this.stats.httpRefusals++;
      this.logger.debug({ listener: this.name, err: describeError(err) }, 'malformed HTTP request');
      socket.destroy();
    });
  }

  // ------------------------------------------------------------------------------ stage 3: MQTT

  /** The pending connection a TLS / HTTP socket runs on (same TCP peer address and port). */
  private pendingOf(socket: net.Socket): PendingConnection | undefined {
    const key = peerKey(socket);
    return key === undefined ? undefined : this.pending.get(key);
  }

  private handOverPending(conn: PendingConnection, stream: Duplex, socket: net.Socket, certificate: ClientCertificate | undefined): void {
    clearTimeout(conn.timer);
    conn.timer = undefined;
    this.pending.delete(conn.key);
    const address = conn.client?.address ?? socket.remoteAddress ?? '';
    const port = conn.client?.port ?? socket.remotePort ?? 0;
    this.handOver(stream, address, port, certificate);
  }

  private handOver(stream: Duplex, remoteAddress: string, remotePort: number, clientCertificate: ClientCertificate | undefined): void {
    this.stats.accepted++;
    this.onAccept(stream, { listener: this.name, remoteAddress, remotePort, clientCertificate });
  }
}
