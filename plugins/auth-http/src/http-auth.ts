import { createHmac, randomBytes } from 'node:crypto';
import { promises as fs } from 'node:fs';
import * as path from 'node:path';
import { createSecureContext } from 'node:tls';
import type { AuthProvider, AuthRequest, AuthResult, PluginLogger } from '@bifro/spi';
import { interpretAnswer, type ServiceDecision } from './answer';
import { AuthHttpError, PLUGIN_NAME } from './errors';
import { isPem, type AuthHttpOptions, type TlsOptions } from './options';
import { renderTemplate, TemplateValues } from './template';
import { HttpTransport, TransportError, type HttpRequest, type TlsMaterial } from './transport';
import { TtlCache } from './cache';

/** What tests inject. */
export interface HttpAuthDeps {
  /** The clock of the cache (ms since the epoch); `Date.now` by default. */
  readonly now?: () => number;
}

/** Counters of one provider (for tests and diagnostics). */
export interface HttpAuthStats {
  /** Requests sent to the service (a retry on a stale kept-alive connection counts once). */
  requests: number;
  /** CONNECTs answered from the cache. */
  cacheHits: number;
  /** CONNECTs that joined an identical request already on its way. */
  joined: number;
  /** Requests that got no usable answer (timeout, refused, 5xx, malformed...). */
  failures: number;
}

/** A rendered request and the cache key of everything it sends. */
interface Rendered {
  readonly request: HttpRequest;
  readonly key: string;
}

/** Minimum time between two warn lines for the same code; the lines in between are counted. */
const WARN_INTERVAL_MS = 10_000;

const USER_AGENT = `${PLUGIN_NAME}`;

/**
 * Authenticates each CONNECT by asking an HTTP service (see the README): the request is rendered
 * from the options' templates, sent over a keep-alive pool with a deadline, and the answer maps to
 * ok / reject / defer. Answers are cached by a keyed hash (HMAC-SHA-256 with a key made at start)
 * of everything the request sends — allow for `cache.allowTtlMs`, deny and ignore for
 * `cache.denyTtlMs`, failures never — so the plain password is kept only while its request is
 * under way. Identical CONNECTs arriving while a request is under way wait for its answer instead
 * of sending their own.
 */
export class HttpAuthProvider implements AuthProvider {
  readonly stats: HttpAuthStats = { requests: 0, cacheHits: 0, joined: 0, failures: 0 };
  private readonly cache: TtlCache<ServiceDecision>;
  private readonly pending = new Map<string, Promise<ServiceDecision>>();
  private readonly hashKey = randomBytes(32);
  private readonly now: () => number;
  private transport: HttpTransport | undefined;
  private starting: Promise<HttpTransport> | undefined;
  private closed = false;
  private readonly warned = new Map<string, { at: number; suppressed: number }>();

  constructor(
    readonly options: AuthHttpOptions,
    private readonly logger: PluginLogger,
    private readonly configDir: string,
    deps: HttpAuthDeps = {},
  ) {
    this.now = deps.now ?? Date.now;
    this.cache = new TtlCache(options.cache.maxEntries, this.now);
  }

  /** Reads the TLS files and sets up the connection pool. */
  async init(): Promise<void> {
    await this.ready();
    this.logger.info(`auth service ${this.options.origin} (${this.options.method}, ${this.options.mode} answers)`, {
      origin: this.options.origin,
      method: this.options.method,
      mode: this.options.mode,
      timeoutMs: this.options.timeoutMs,
      connections: this.options.pool.connections,
      allowTtlMs: this.options.cache.allowTtlMs,
      denyTtlMs: this.options.cache.denyTtlMs,
      failOpen: this.options.failOpen,
    });
  }

  /** Synchronous on a cache hit (the broker then spends no promise or timer on the call); a promise when the service is asked. */
  authenticate(req: AuthRequest): AuthResult | Promise<AuthResult> {
    const values = new TemplateValues(req);
    const rendered = this.render(values);
    const cached = this.cache.get(rendered.key);
    if (cached !== undefined) {
      this.stats.cacheHits++;
      return this.result(cached, values, req);
    }
    return this.decide(rendered).then((decision) => this.result(decision, values, req));
  }

  close(): void {
    this.closed = true;
    this.transport?.close();
    this.cache.clear();
  }

  private ready(): Promise<HttpTransport> {
    this.starting ??= readTls(this.options.tls, this.configDir).then((tls) => {
      const transport = new HttpTransport({
        origin: this.options.origin,
        connections: this.options.pool.connections,
        keepAliveTimeoutMs: this.options.pool.keepAliveTimeoutMs,
        ...(tls === undefined ? {} : { tls }),
      });
      if (this.closed) transport.close();
      this.transport = transport;
      return transport;
    });
    return this.starting;
  }

  /** Asks the service (or joins the identical request under way) and caches the decision. */
  private decide(rendered: Rendered): Promise<ServiceDecision> {
    const under = this.pending.get(rendered.key);
    if (under !== undefined) {
      this.stats.joined++;
      return under;
    }
    const asked = this.ask(rendered.request).then((decision) => {
      this.store(rendered.key, decision);
      return decision;
    });
    const done = asked.finally(() => this.pending.delete(rendered.key));
    this.pending.set(rendered.key, done);
    return done;
  }

  private async ask(request: HttpRequest): Promise<ServiceDecision> {
    const transport = this.transport ?? (await this.ready());
    this.stats.requests++;
    let decision: ServiceDecision;
    try {
      const res = await transport.request(request, this.options.timeoutMs, this.options.maxResponseBytes);
      decision = interpretAnswer(res, this.options.mode);
    } catch (err) {
      const message = err instanceof TransportError ? err.message : String(err);
      decision = { kind: 'failed', code: 'BIFRO_AUTH_HTTP_SERVICE_FAILED', message };
    }
    if (decision.kind === 'failed') {
      this.stats.failures++;
      this.warn(decision.code, decision.message);
    }
    return decision;
  }

  private store(key: string, decision: ServiceDecision): void {
    const { allowTtlMs, denyTtlMs } = this.options.cache;
    switch (decision.kind) {
      case 'allow': {
        const left = decision.expiresAt === undefined ? allowTtlMs : Math.min(allowTtlMs, decision.expiresAt - this.now());
        this.cache.set(key, decision, left);
        return;
      }
      case 'deny':
      case 'ignore':
        this.cache.set(key, decision, denyTtlMs);
        return;
      case 'failed':
        return; // never cached: the next CONNECT asks again
    }
  }

  /** The AuthResult of a decision for this CONNECT (the identity is read per CONNECT, so it can use fields the request does not send). */
  private result(decision: ServiceDecision, values: TemplateValues, req: AuthRequest): AuthResult {
    switch (decision.kind) {
      case 'allow': {
        const tenantId =
          decision.tenantId ?? (this.options.tenant === undefined ? undefined : renderTemplate(this.options.tenant, values, 'text'));
        if (tenantId === undefined || tenantId === '') {
          const message = 'the allow answer names no tenant and options.tenant gives none';
          this.warn('BIFRO_AUTH_HTTP_ANSWER_INVALID', message);
          return this.failure();
        }
        let userId = decision.userId ?? renderTemplate(this.options.user, values, 'text');
        if (userId === '') userId = req.clientId;
        return {
          type: 'ok',
          tenantId,
          userId,
          attrs: decision.attrs,
          ...(decision.expiresAt === undefined ? {} : { expiresAt: decision.expiresAt }),
        };
      }
      case 'deny':
        return { type: 'reject', reason: decision.reason, text: decision.text ?? 'refused by the auth service' };
      case 'ignore':
        return { type: 'defer' };
      case 'failed':
        return this.failure();
    }
  }

  private failure(): AuthResult {
    return this.options.failOpen ? { type: 'defer' } : { type: 'reject', reason: 'error', text: 'the auth service could not decide' };
  }

  /** Renders the request of one CONNECT and its cache key. */
  private render(values: TemplateValues): Rendered {
    const o = this.options;
    let requestPath = renderTemplate(o.path, values, 'url');
    const fields = o.body.map((f): [string, string] => [f.name, renderTemplate(f.value, values, 'text')]);
    const headers: Record<string, string> = { accept: 'application/json', 'user-agent': USER_AGENT };
    let body: string | undefined;
    if (o.method === 'GET') {
      if (fields.length > 0) requestPath += (requestPath.includes('?') ? '&' : '?') + new URLSearchParams(fields).toString();
    } else if (o.bodyFormat === 'json') {
      body = JSON.stringify(Object.fromEntries(fields));
      headers['content-type'] = 'application/json';
    } else {
      body = new URLSearchParams(fields).toString();
      headers['content-type'] = 'application/x-www-form-urlencoded';
    }
    for (const h of o.headers) headers[h.name] = renderTemplate(h.value, values, 'header');
    const hmac = createHmac('sha256', this.hashKey);
    hmac.update(
      JSON.stringify([o.method, requestPath, Object.entries(headers).sort(([a], [b]) => (a < b ? -1 : a > b ? 1 : 0)), body ?? null]),
    );
    return {
      request: { method: o.method, path: requestPath, headers, body: body === undefined ? undefined : Buffer.from(body, 'utf8') },
      key: hmac.digest('base64'),
    };
  }

  /** A warn line, at most one per code every 10 s (with the count of those left out). */
  private warn(code: string, message: string): void {
    const now = Date.now();
    const last = this.warned.get(code);
    if (last !== undefined && now - last.at < WARN_INTERVAL_MS) {
      last.suppressed++;
      return;
    }
    const suppressed = last?.suppressed ?? 0;
    this.warned.set(code, { at: now, suppressed: 0 });
    const outcome = this.options.failOpen
      ? 'the client is passed to the next auth provider (failOpen)'
      : 'the client is refused (0x80 / v3 3)';
    this.logger.warn(
      `${code}: ${PLUGIN_NAME}: ${this.options.origin}: ${message}; ${outcome}${suppressed > 0 ? ` (${suppressed} more since the last line)` : ''}`,
      { code, origin: this.options.origin, problem: message, suppressed },
    );
  }
}

async function readOne(value: string | undefined, key: string, configDir: string): Promise<Buffer | undefined> {
  if (value === undefined) return undefined;
  if (isPem(value)) return Buffer.from(value, 'utf8');
  const file = path.resolve(configDir, value);
  let data: Buffer;
  try {
    data = await fs.readFile(file);
  } catch (err) {
    throw new AuthHttpError('BIFRO_AUTH_HTTP_TLS_INVALID', `options.tls.${key}: cannot read ${file}: ${(err as Error).message}`, {
      cause: err,
    });
  }
  if (!data.includes('-----BEGIN ')) throw new AuthHttpError('BIFRO_AUTH_HTTP_TLS_INVALID', `options.tls.${key}: ${file} is not PEM`);
  return data;
}

/** Reads the TLS files (or takes the PEM texts) named by the options. */
export async function readTls(tls: TlsOptions | undefined, configDir: string): Promise<TlsMaterial | undefined> {
  if (tls === undefined) return undefined;
  const [ca, cert, key] = await Promise.all([
    readOne(tls.ca, 'ca', configDir),
    readOne(tls.cert, 'cert', configDir),
    readOne(tls.key, 'key', configDir),
  ]);
  try {
    createSecureContext({
      ...(ca === undefined ? {} : { ca }),
      ...(cert === undefined ? {} : { cert }),
      ...(key === undefined ? {} : { key }),
    });
  } catch (err) {
    throw new AuthHttpError(
      'BIFRO_AUTH_HTTP_TLS_INVALID',
      `options.tls: the certificates or the key cannot be used: ${(err as Error).message}`,
      {
        cause: err,
      },
    );
  }
  return {
    rejectUnauthorized: tls.rejectUnauthorized,
    ...(ca === undefined ? {} : { ca }),
    ...(cert === undefined ? {} : { cert }),
    ...(key === undefined ? {} : { key }),
    ...(tls.servername === undefined ? {} : { servername: tls.servername }),
  };
}
