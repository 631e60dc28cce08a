import type { IncomingMessage, ServerResponse } from 'node:http';
import type { Duplex } from 'node:stream';
import { WebSocketServer, type WebSocket } from 'ws';
import { WebSocketStream } from './websocket-stream';

/** The path a ws / wss listener serves when it names none. */
export const DEFAULT_WS_PATH = '/mqtt';

/**
 * Subprotocols accepted, in order of preference: `mqtt` (MQTT 3.1.1 and 5 [MQTT-6.0.0-4]) and
 * `mqttv3.1` (what MQTT 3.1 clients such as MQTT.js with protocolVersion 3 offer). A client that
 * offers no subprotocol at all is accepted too (lenient: some embedded and browser clients omit it);
 * one that offers only others is refused with HTTP 400 rather than accepted without a subprotocol,
 * which such a client would reject anyway.
 */
export const WS_SUBPROTOCOLS = ['mqtt', 'mqttv3.1'] as const;

/** The largest WebSocket message accepted: the largest MQTT packet (256 MiB - 1) plus a 5-byte fixed header. */
export const WS_MAX_PAYLOAD = 268435455 + 5;

/** Why an HTTP request on a WebSocket listener did not become an MQTT connection. */
export type UpgradeRefusal = 'not-found' | 'no-upgrade' | 'subprotocol';

export interface WebSocketEndpointOptions {
  readonly path: string;
  /** Called with the upgraded connection as a byte stream and the HTTP socket it runs on. */
  readonly onConnection: (stream: Duplex, socket: Duplex) => void;
  /** Called when a request is answered with an HTTP error instead. */
  readonly onRefused: (reason: UpgradeRefusal, socket: Duplex, detail: string) => void;
}

function offeredProtocols(req: IncomingMessage): string[] {
  const header = req.headers['sec-websocket-protocol'];
  if (header === undefined) return [];
  return header
    .split(',')
    .map((p) => p.trim())
    .filter((p) => p.length > 0);
}

function pathOf(req: IncomingMessage): string {
  const url = req.url ?? '/';
  const query = url.indexOf('?');
  return query < 0 ? url : url.slice(0, query);
}

function refuse(socket: Duplex, status: 400 | 404 | 426, reason: string): void {
  const body = `${reason}\n`;
  socket.end(
    `HTTP/1.1 ${status} ${reason}\r\nConnection: close\r\nContent-Type: text/plain\r\nContent-Length: ${Buffer.byteLength(body)}\r\n\r\n${body}`,
  );
}

/**
 * The MQTT-over-WebSocket endpoint of one ws / wss listener: attach `upgrade` and `request` to
 * the listener's HTTP server. Only `path` upgrades; every other request gets a plain HTTP error.
 */
export class WebSocketEndpoint {
  private readonly wss: WebSocketServer;

  constructor(private readonly options: WebSocketEndpointOptions) {
    this.wss = new WebSocketServer({
      noServer: true,
      clientTracking: false,
      perMessageDeflate: false,
      maxPayload: WS_MAX_PAYLOAD,
      handleProtocols: (protocols) => WS_SUBPROTOCOLS.find((p) => protocols.has(p)) ?? false,
    });
  }

  /** The HTTP server's `upgrade` event. */
  readonly onUpgrade = (req: IncomingMessage, socket: Duplex, head: Buffer): void => {
    const path = pathOf(req);
    if (path !== this.options.path) {
      this.options.onRefused('not-found', socket, path);
      refuse(socket, 404, 'Not Found');
      return;
    }
    const offered = offeredProtocols(req);
    if (offered.length > 0 && !offered.some((p) => (WS_SUBPROTOCOLS as readonly string[]).includes(p))) {
      this.options.onRefused('subprotocol', socket, offered.join(','));
      refuse(socket, 400, 'Bad Request');
      return;
    }
    this.wss.handleUpgrade(req, socket, head, (ws: WebSocket) => this.options.onConnection(new WebSocketStream(ws), socket));
  };

  /** The HTTP server's `request` event: plain HTTP is not served here. */
  readonly onRequest = (req: IncomingMessage, res: ServerResponse): void => {
    const path = pathOf(req);
    const wrongPath = path !== this.options.path;
    this.options.onRefused(wrongPath ? 'not-found' : 'no-upgrade', req.socket, path);
    res.statusCode = wrongPath ? 404 : 426;
    res.setHeader('Connection', 'close');
    res.setHeader('Content-Type', 'text/plain');
    if (!wrongPath) res.setHeader('Upgrade', 'websocket');
    res.end(wrongPath ? 'Not Found\n' : 'Upgrade Required: MQTT over WebSocket\n');
  };
}
