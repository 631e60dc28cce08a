import Fastify, { type FastifyInstance } from 'fastify';

/**
 * A real HTTP(S) auth service on 127.0.0.1 for the tests (fastify): every request is recorded,
 * TCP connections are counted on the server side, and the answer comes from a handler the test
 * sets (status, JSON, raw text, a delay). Delays end when the service closes, so nothing hangs.
 */

/** A request the service received. */
export interface ServiceRequest {
  readonly method: string;
  /** Path and query as received. */
  readonly url: string;
  readonly headers: Readonly<Record<string, string | string[] | undefined>>;
  /** The parsed body: JSON → value, form → object of strings, none → undefined. */
  readonly body: unknown;
  /** The query parameters. */
  readonly query: Readonly<Record<string, string>>;
}

/** What the handler answers. */
export interface Reply {
  readonly status?: number;
  /** Sent as JSON. */
  readonly json?: unknown;
  /** Sent as is (with `content-type: application/json` unless `contentType` says otherwise). */
  readonly raw?: string;
  readonly contentType?: string;
  /** Wait this long before answering. */
  readonly delayMs?: number;
}

export type Handler = (req: ServiceRequest) => Reply | Promise<Reply>;

export interface AuthService {
  /** `http://127.0.0.1:<port>` (or https). */
  readonly origin: string;
  readonly port: number;
  /** Requests received so far, in order. */
  readonly requests: ServiceRequest[];
  /** TCP connections accepted so far. */
  connections(): number;
  /** Replace the handler. */
  handle(handler: Handler): void;
  close(): Promise<void>;
}

export interface ServiceOptions {
  /** Serve HTTPS with this certificate and key (PEM). */
  readonly https?: {
    readonly cert: Buffer;
    readonly key: Buffer;
    /** Require a client certificate signed by this CA. */
    readonly clientCa?: Buffer;
  };
  readonly handler?: Handler;
}

/** Starts a service on 127.0.0.1 with an ephemeral port. */
export async function startService(options: ServiceOptions = {}): Promise<AuthService> {
  const requests: ServiceRequest[] = [];
  let handler: Handler = options.handler ?? (() => ({ status: 404 }));
  let connections = 0;
  const waiting = new Set<() => void>();
  const app: FastifyInstance = (
    options.https === undefined
      ? Fastify({ logger: false, forceCloseConnections: true })
      : Fastify({
          logger: false,
          forceCloseConnections: true,
          https: {
            cert: options.https.cert,
            key: options.https.key,
            ...(options.https.clientCa === undefined ? {} : { ca: options.https.clientCa, requestCert: true, rejectUnauthorized: true }),
          },
        })
  ) as FastifyInstance;
  app.addContentTypeParser('application/x-www-form-urlencoded', { parseAs: 'string' }, (_req, body, done) => {
    done(null, Object.fromEntries(new URLSearchParams(String(body))));
  });
  app.server.on(options.https === undefined ? 'connection' : 'secureConnection', () => connections++);
  app.all('/*', async (request, reply) => {
    const rec: ServiceRequest = {
      method: request.method,
      url: request.url,
      headers: request.headers,
      body: request.body,
      query: { ...(request.query as Record<string, string>) },
    };
    requests.push(rec);
    const answer = await handler(rec);
    if (answer.delayMs !== undefined && answer.delayMs > 0) {
      await new Promise<void>((resolve) => {
        const done = (): void => {
          clearTimeout(timer);
          waiting.delete(done);
          resolve();
        };
        const timer = setTimeout(done, answer.delayMs);
        waiting.add(done);
      });
    }
    reply.code(answer.status ?? 200);
    if (answer.raw !== undefined) {
      reply.header('content-type', answer.contentType ?? 'application/json');
      return reply.send(answer.raw);
    }
    if (answer.json !== undefined) return reply.send(answer.json);
    return reply.send('');
  });
  await app.listen({ host: '127.0.0.1', port: 0 });
  const address = app.server.address();
  if (address === null || typeof address === 'string') throw new Error('the service has no port');
  const scheme = options.https === undefined ? 'http' : 'https';
  return {
    origin: `${scheme}://127.0.0.1:${address.port}`,
    port: address.port,
    requests,
    connections: () => connections,
    handle: (h) => {
      handler = h;
    },
    close: async () => {
      for (const done of [...waiting]) done();
      await app.close();
    },
  };
}

/** The JSON body of a recorded request as an object of strings (throws when it is not one). */
export function fields(req: ServiceRequest): Record<string, string> {
  if (typeof req.body !== 'object' || req.body === null) throw new Error(`request body is not an object: ${JSON.stringify(req.body)}`);
  return req.body as Record<string, string>;
}

/** A small user table as a handler: `users[username] = { password, tenant, ... }`; else deny with the reason. */
export function userTable(
  users: Readonly<
    Record<string, { readonly password: string; readonly tenant: string; readonly attrs?: Record<string, string>; readonly acl?: unknown }>
  >,
): Handler {
  return (req) => {
    const f = fields(req);
    const user = users[f.username ?? ''];
    if (user === undefined) return { json: { result: 'deny', reason: 'notAuthorized', message: 'unknown user' } };
    if (user.password !== f.password) return { json: { result: 'deny', reason: 'badCredentials', message: 'wrong password' } };
    return {
      json: {
        result: 'allow',
        tenant: user.tenant,
        user: f.username,
        ...(user.attrs ? { attrs: user.attrs } : {}),
        ...(user.acl ? { acl: user.acl } : {}),
      },
    };
  };
}
