import * as http from 'node:http';
import * as https from 'node:https';

/** One request to the service, rendered. */
export interface HttpRequest {
  readonly method: string;
  /** Path and query, percent-encoded. */
  readonly path: string;
  /** Lower-case names; values already escaped. */
  readonly headers: Readonly<Record<string, string>>;
  readonly body: Buffer | undefined;
}

/** The service's answer. */
export interface HttpResponse {
  readonly status: number;
  readonly contentType: string | undefined;
  readonly body: Buffer;
}

/** Why a request got no usable answer. */
export type TransportFailure = 'timeout' | 'refused' | 'tls' | 'tooLarge' | 'network' | 'closed';

/** A request that got no usable answer: connection refused, timeout, TLS failure, an answer too large... */
export class TransportError extends Error {
  override readonly name = 'TransportError';

  constructor(
    readonly failure: TransportFailure,
    message: string,
  ) {
    super(message);
  }
}

/** TLS material, read. */
export interface TlsMaterial {
  readonly ca?: Buffer;
  readonly cert?: Buffer;
  readonly key?: Buffer;
  readonly rejectUnauthorized: boolean;
  readonly servername?: string;
}

export interface TransportOptions {
  /** `http://host:port` or `https://host:port`. */
  readonly origin: string;
  /** At most this many connections to the service at once; more requests wait for one (within their timeout). */
  readonly connections: number;
  /** An idle connection is closed after this long (or earlier, when the service announces `Keep-Alive: timeout=`). */
  readonly keepAliveTimeoutMs: number;
  readonly tls?: TlsMaterial;
}

const TLS_CODES = /CERT|SSL|TLS|SELF_SIGNED|UNABLE_TO_|HOSTNAME|ALTNAME|EPROTO/;

function describeError(err: unknown): { failure: TransportFailure; text: string } {
  if (err instanceof TransportError) return { failure: err.failure, text: err.message };
  const e = err as NodeJS.ErrnoException;
  const code = typeof e?.code === 'string' ? e.code : undefined;
  const text = `${code === undefined ? '' : `${code}: `}${e?.message ?? String(err)}`;
  if (code === 'ECONNREFUSED') return { failure: 'refused', text: `connection refused (${text})` };
  if (code !== undefined && TLS_CODES.test(code)) return { failure: 'tls', text: `TLS failure (${text})` };
  return { failure: 'network', text };
}

/**
 * HTTP/1.1 to one origin over a keep-alive pool (node's `http.Agent`/`https.Agent`: at most
 * `connections` sockets, idle ones reused most-recently-used first and closed after
 * `keepAliveTimeoutMs`, idle sockets do not keep the process alive). Each request has one
 * deadline covering the wait for a socket, the connection, the TLS handshake and the whole answer;
 * a request that fails because the service closed an idle kept-alive socket at the same moment
 * (ECONNRESET before any answer, on a reused socket) is sent once more on a fresh one.
 */
export class HttpTransport {
  private readonly agent: http.Agent;
  private readonly module: typeof http | typeof https;
  private readonly host: string;
  private readonly port: number;
  private closed = false;

  constructor(private readonly options: TransportOptions) {
    const url = new URL(options.origin);
    const secure = url.protocol === 'https:';
    this.module = secure ? https : http;
    this.host = url.hostname.startsWith('[') ? url.hostname.slice(1, -1) : url.hostname;
    this.port = url.port === '' ? (secure ? 443 : 80) : Number(url.port);
    const common: http.AgentOptions = {
      keepAlive: true,
      maxSockets: options.connections,
      maxFreeSockets: options.connections,
      timeout: options.keepAliveTimeoutMs,
      scheduling: 'lifo',
    };
    const tls = options.tls;
    this.agent = secure
      ? new https.Agent({
          ...common,
          ...(tls?.ca !== undefined ? { ca: tls.ca } : {}),
          ...(tls?.cert !== undefined ? { cert: tls.cert } : {}),
          ...(tls?.key !== undefined ? { key: tls.key } : {}),
          ...(tls?.servername !== undefined ? { servername: tls.servername } : {}),
          rejectUnauthorized: tls?.rejectUnauthorized ?? true,
        })
      : new http.Agent(common);
  }

  /** Sends the request; resolves with the status and the whole body (at most `maxBytes`), rejects with a {@link TransportError}. */
  async request(req: HttpRequest, timeoutMs: number, maxBytes: number): Promise<HttpResponse> {
    const deadline = Date.now() + timeoutMs;
    try {
      return await this.attempt(req, deadline, timeoutMs, maxBytes, true);
    } catch (err) {
      const { failure, text } = describeError(err);
      throw err instanceof TransportError ? err : new TransportError(failure, text);
    }
  }

  /** Closes every connection; later requests fail with `closed`. */
  close(): void {
    this.closed = true;
    this.agent.destroy();
  }

  private attempt(req: HttpRequest, deadline: number, timeoutMs: number, maxBytes: number, first: boolean): Promise<HttpResponse> {
    if (this.closed) return Promise.reject(new TransportError('closed', 'the plugin is closed'));
    return new Promise<HttpResponse>((resolve, reject) => {
      let settled = false;
      let answered = false;
      const headers: Record<string, string> = { ...req.headers };
      if (req.body !== undefined) headers['content-length'] = String(req.body.length);
      const outgoing = this.module.request({
        agent: this.agent,
        host: this.host,
        port: this.port,
        method: req.method,
        path: req.path,
        headers,
        ...(this.options.tls?.servername !== undefined ? { servername: this.options.tls.servername } : {}),
      });
      const timer = setTimeout(
        () => {
          fail(new TransportError('timeout', `no answer within ${timeoutMs} ms`));
          outgoing.destroy();
        },
        Math.max(1, deadline - Date.now()),
      );
      const fail = (err: unknown): void => {
        if (settled) return;
        settled = true;
        clearTimeout(timer);
        const code = (err as NodeJS.ErrnoException | undefined)?.code;
        if (first && !answered && outgoing.reusedSocket && (code === 'ECONNRESET' || code === 'EPIPE') && Date.now() < deadline) {
          this.attempt(req, deadline, timeoutMs, maxBytes, false).then(resolve, reject);
          return;
        }
        reject(err);
      };
      outgoing.on('error', fail);
      outgoing.on('response', (res: http.IncomingMessage) => {
        answered = true;
        const chunks: Buffer[] = [];
        let size = 0;
        res.on('data', (chunk: Buffer) => {
          size += chunk.length;
          if (size > maxBytes) {
            fail(new TransportError('tooLarge', `the answer is larger than maxResponseBytes (${maxBytes})`));
            res.destroy();
            outgoing.destroy();
            return;
          }
          chunks.push(chunk);
        });
        res.on('error', fail);
        res.on('aborted', () => fail(new TransportError('network', 'the service closed the connection before the answer was complete')));
        res.on('end', () => {
          if (settled) return;
          settled = true;
          clearTimeout(timer);
          const type = res.headers['content-type'];
          resolve({ status: res.statusCode ?? 0, contentType: typeof type === 'string' ? type : undefined, body: Buffer.concat(chunks) });
        });
      });
      outgoing.end(req.body);
    });
  }
}
