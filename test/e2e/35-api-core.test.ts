import http from 'node:http';
import https from 'node:https';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { validate as validateOpenApi } from '@readme/openapi-parser';
import { chromium } from 'playwright-core';
import { tokenHash } from '../../core/src/api/api-auth';
import { API_ERRORS } from '../../core/src/api/api-errors';
import { main } from '../../core/src/cli/main';
import type { CliIo } from '../../core/src/cli/cli-io';
import { loadConfig } from '../../core/src/runtime/config';
import { startApiBroker, API_TOKENS, type ApiBroker } from '../support/api-broker';
import { startTestBroker } from '../support/test-broker';
import { connectAsync, expectPacket, rawConnect, sleep, waitUntil } from '../support/mqtt-helpers';
import { createTestCerts, type TestCerts } from '../support/tls-certs';

/**
 * The admin API's frame: configuration, bearer tokens, failed-auth rate limiting, error bodies,
 * health and readiness, the OpenAPI document and its page, TLS, request logs, `bifro token`,
 * and the drain at shutdown. The resources have their own files (36-39).
 */

function configIn(dir: string, yaml: string): Promise<unknown> {
  const file = path.join(dir, 'bifro.yml');
  writeFileSync(file, yaml);
  return loadConfig({ file, cwd: dir, env: {} });
}

describe('api configuration', () => {
  let dir: string;
  beforeAll(() => (dir = mkdtempSync(path.join(os.tmpdir(), 'bifro-api-conf-'))));
  afterAll(() => rmSync(dir, { recursive: true, force: true }));
  const hash = tokenHash('x');

  it('is off without an api section, loopback port 8091 by default with one', async () => {
    expect(((await configIn(dir, 'nodeId: a\n')) as { api?: unknown }).api).toBeUndefined();
    const config = (await configIn(dir, `api:\n  tokens: [{ name: ops, hash: "${hash}" }]\n`)) as {
      api: Record<string, unknown>;
      sysInterval: number;
    };
    expect(config.api).toMatchObject({
      host: '127.0.0.1',
      port: 8091,
      tokens: [{ name: 'ops', hash }],
      authFailuresPerMinute: 30,
      docsPage: true,
    });
    expect(config.sysInterval).toBe(10);
  });

  it('refuses an api without tokens, naming the key and the command that makes one', async () => {
    await expect(configIn(dir, 'api: { port: 0 }\n')).rejects.toMatchObject({
      code: 'BIFRO_CONFIG_API_TOKENS',
      message: expect.stringMatching(/api\.tokens.*bifro token create/s),
    });
  });

  it('refuses a token stored in clear, a bad hash and two tokens with one name', async () => {
    await expect(configIn(dir, 'api:\n  tokens: [{ name: ops, hash: "my-secret" }]\n')).rejects.toMatchObject({
      code: 'BIFRO_CONFIG_INVALID_VALUE',
      message: expect.stringContaining('api.tokens[0].hash'),
    });
    await expect(
      configIn(dir, `api:\n  tokens: [{ name: ops, hash: "${hash}" }, { name: ops, hash: "${tokenHash('y')}" }]\n`),
    ).rejects.toMatchObject({ code: 'BIFRO_CONFIG_API_TOKENS', message: expect.stringContaining('api.tokens[1].name') });
    await expect(configIn(dir, `api:\n  tokens: [{ name: ops, hash: "${hash}" }]\n  bind: 0.0.0.0\n`)).rejects.toMatchObject({
      code: 'BIFRO_CONFIG_UNKNOWN_KEY',
    });
  });

  it('refuses the api with several worker processes (no one worker could answer for every tenant)', async () => {
    await expect(configIn(dir, `workers: 2\napi:\n  tokens: [{ name: ops, hash: "${hash}" }]\n`)).rejects.toMatchObject({
      code: 'BIFRO_CONFIG_WORKERS_API',
      message: expect.stringContaining('workers: 2'),
    });
  });

  it('names an unreadable api.tls file', async () => {
    await expect(
      configIn(dir, `api:\n  tokens: [{ name: ops, hash: "${hash}" }]\n  tls: { cert: missing.crt, key: missing.key }\n`),
    ).rejects.toMatchObject({ message: expect.stringContaining('api.tls.cert') });
  });
});

describe('api frame', () => {
  let b: ApiBroker;
  beforeAll(async () => {
    b = await startApiBroker('', { apiExtra: '  authFailuresPerMinute: 5' });
  });
  afterAll(() => b.stop());

  it('answers /health and /ready without a token', async () => {
    const health = await b.http('GET', '/health', { token: null });
    expect(health.status).toBe(200);
    expect(health.body).toMatchObject({ status: 'ok', version: expect.any(String), nodeId: expect.any(String) });
    const ready = await b.http('GET', '/ready', { token: null });
    expect(ready).toMatchObject({
      status: 200,
      body: { ready: true, checks: { listeners: true, storage: true, plugins: true, stopping: false } },
    });
  });

  it('listens on loopback only', () => {
    expect(b.api.host).toBe('127.0.0.1');
    expect(b.api.url).toMatch(/^http:\/\/127\.0\.0\.1:\d+$/);
  });

  it('answers 401 { code, message } without a token, with a wrong one and with a non-bearer scheme', async () => {
    for (const headers of [{}, { authorization: 'Bearer nope' }, { authorization: `Basic ${API_TOKENS.admin}` }]) {
      const res = await b.inject({ method: 'GET', url: '/api/v1/tenants', token: null, headers });
      expect(res.statusCode).toBe(401);
      expect(res.json()).toEqual({ code: 'BIFRO_API_UNAUTHORIZED', message: expect.any(String) });
    }
  });

  it('answers 404 { code, message } to an unknown route with a valid token', async () => {
    const res = await b.inject({ method: 'GET', url: '/api/v1/no-such-thing' });
    expect(res.statusCode).toBe(404);
    expect(res.json()).toEqual({ code: 'BIFRO_API_NOT_FOUND', message: 'no route GET /api/v1/no-such-thing' });
  });

  it('answers a broken JSON body with 400 and no stack trace', async () => {
    const res = await b.inject({
      method: 'POST',
      url: '/api/v1/tenants/t1/publish',
      headers: { 'content-type': 'application/json' },
      payload: '{"topic": ',
    });
    expect(res.statusCode).toBe(400);
    const body = res.json() as { code: string; message: string };
    expect(body.code).toBe('BIFRO_API_INVALID_REQUEST');
    expect(Object.keys(body).sort()).toEqual(['code', 'message']);
    expect(res.body).not.toMatch(/\bat .+:\d+:\d+/);
  });

  it('serves the OpenAPI document, which validates, and a page to browse it, without a token', async () => {
    const res = await b.inject({ method: 'GET', url: '/api/v1/openapi.json', token: null });
    expect(res.statusCode).toBe(200);
    const doc = res.json() as { openapi: string; paths: Record<string, unknown> };
    expect(doc.openapi).toBe('3.0.3');
    expect(Object.keys(doc.paths)).toEqual(expect.arrayContaining(['/health', '/ready']));
    const result = await validateOpenApi(structuredClone(doc) as never);
    expect(result).toMatchObject({ valid: true });
    const page = await b.http('GET', '/api/v1/docs/', { token: null });
    expect(page.status).toBe(200);
    expect(page.text).toContain('swagger');
  });

  it('every route the document lists has a summary and, off the health routes, a bearer requirement', async () => {
    const doc = (await b.inject({ method: 'GET', url: '/api/v1/openapi.json', token: null })).json() as {
      paths: Record<string, Record<string, { summary?: string; security?: unknown[] }>>;
    };
    for (const [route, methods] of Object.entries(doc.paths)) {
      for (const [method, op] of Object.entries(methods)) {
        expect(`${method} ${route}: ${op.summary ?? ''}`).not.toMatch(/: $/);
        if (route !== '/health' && route !== '/ready') expect(op.security).toBeUndefined();
      }
    }
  });

  it('logs requests with the token name, never the token', async () => {
    await b.inject({ method: 'GET', url: '/api/v1/no-such-thing' });
    const line = b.logs.filter((l) => l.msg === 'api request').pop()!;
    expect(line).toMatchObject({ token: 'admin', status: 404, method: 'GET' });
    expect(JSON.stringify(b.logs)).not.toContain(API_TOKENS.admin);
  });

  it('rate limits requests without a valid token per address (429, Retry-After), never those with one', async () => {
    let limited: { status: number; body: unknown; headers: Headers } | undefined;
    for (let i = 0; i < 10 && limited === undefined; i++) {
      const res = await b.http('GET', '/api/v1/tenants', { token: 'wrong' });
      if (res.status === 429) limited = res;
      else expect(res.status).toBe(401);
    }
    expect(limited).toBeDefined();
    expect(limited!.body).toMatchObject({ code: 'BIFRO_API_RATE_LIMITED' });
    expect(Number(limited!.headers.get('retry-after'))).toBeGreaterThan(0);
    // A valid token from the same address is still served; health stays public.
    expect((await b.http('GET', '/api/v1/no-such-thing')).status).toBe(404);
    expect((await b.http('GET', '/health', { token: null })).status).toBe(200);
  });

  it('knows every error code it answers', () => {
    expect(Object.keys(API_ERRORS)).toEqual(
      expect.arrayContaining(['BIFRO_API_UNAUTHORIZED', 'BIFRO_API_FORBIDDEN', 'BIFRO_API_RATE_LIMITED', 'BIFRO_API_INTERNAL']),
    );
  });
});

/** The answer of {@link rawHttp}. */
interface RawAnswer {
  status: number;
  headers: http.IncomingHttpHeaders;
  text: string;
}

/**
 * One request on a connection of its own, the path sent as it is (no URL normalising). With
 * `sendOnly`, only that many bytes of `body` are sent and the rest never comes: the answer must
 * arrive without the body. Resolves once the answer is complete, even when the server closed the
 * connection while the body was still on its way.
 */
function rawHttp(
  url: string,
  method: string,
  path: string,
  opts: { token?: string; headers?: Record<string, string>; body?: Buffer; sendOnly?: number; timeoutMs?: number } = {},
): Promise<RawAnswer> {
  const headers: Record<string, string> = {
    ...(opts.token !== undefined ? { authorization: `Bearer ${opts.token}` } : {}),
    ...(opts.body !== undefined ? { 'content-type': 'application/json' } : {}),
    // Chunked when the caller says so, else the length of the body.
    ...(opts.body !== undefined && opts.headers?.['transfer-encoding'] === undefined ? { 'content-length': String(opts.body.length) } : {}),
    ...opts.headers,
  };
  return new Promise((resolve, reject) => {
    let answered = false;
    const timeoutMs = opts.timeoutMs ?? 10_000;
    const timer = setTimeout(() => {
      req.destroy();
      reject(new Error(`no answer to ${method} ${path} within ${timeoutMs} ms`));
    }, timeoutMs);
    const req = http.request(`${url}${path}`, { method, headers, agent: false }, (res) => {
      answered = true;
      let text = '';
      res.setEncoding('utf8');
      res.on('data', (d: string) => (text += d));
      res.on('end', () => {
        clearTimeout(timer);
        resolve({ status: res.statusCode ?? 0, headers: res.headers, text });
        req.destroy();
      });
    });
    req.on('error', (err) => {
      if (answered) return;
      clearTimeout(timer);
      reject(err);
    });
    if (opts.body === undefined) req.end();
    else if (opts.sendOnly === undefined) req.end(opts.body);
    else req.write(opts.body.subarray(0, opts.sendOnly));
  });
}

/**
 * A JSON body of about `bytes` that is costly to parse: its many `constructor` keys make the JSON
 * parser's prototype-poisoning check walk every object (about 0.3 s of one core per 8 MiB here).
 */
function costlyBody(bytes: number): Buffer {
  const item = '{"constructor":1},';
  return Buffer.from(`[${item.repeat(Math.floor((bytes - 2) / item.length)).slice(0, -1)}]`);
}

function median(xs: readonly number[]): number {
  const sorted = [...xs].sort((a, b) => a - b);
  return sorted[Math.floor(sorted.length / 2)]!;
}

const MiB = 1024 * 1024;

describe('api authentication before the body', () => {
  let b: ApiBroker;
  beforeAll(async () => {
    // Enough failed attempts per minute for every request here to be answered 401, not 429.
    b = await startApiBroker('', { apiExtra: '  authFailuresPerMinute: 1000' });
  });
  afterAll(() => b.stop());

  it('answers 401 to a request without a valid token once its headers are in, without waiting for the body, and closes the connection', async () => {
    const body = costlyBody(8 * MiB);
    for (const token of [undefined, 'wrong-token']) {
      const res = await rawHttp(b.api.url, 'POST', '/api/v1/tenants/t1/publish', { token, body, sendOnly: 64 * 1024, timeoutMs: 5000 });
      expect(res.status).toBe(401);
      expect(JSON.parse(res.text)).toEqual({ code: 'BIFRO_API_UNAUTHORIZED', message: expect.any(String) });
      // The rest of the body is not read: the connection ends with the answer.
      expect(res.headers.connection).toBe('close');
    }
  });

  it('answers 404 to an unknown route with a valid token without reading the body either', async () => {
    const res = await rawHttp(b.api.url, 'POST', '/api/v1/no-such-thing', {
      token: API_TOKENS.admin,
      body: costlyBody(MiB),
      sendOnly: 1024,
      timeoutMs: 5000,
    });
    expect(res.status).toBe(404);
    expect(JSON.parse(res.text)).toEqual({ code: 'BIFRO_API_NOT_FOUND', message: 'no route POST /api/v1/no-such-thing' });
  });

  it('ten unauthenticated 8 MiB bodies are answered 401 while MQTT pings stay fast', async () => {
    const body = costlyBody(8 * MiB);
    const { raw } = await rawConnect(b.port, { clientId: 'pinger', username: 't1/pinger' });
    const rtts: number[] = [];
    let sending = true;
    // Pings for a second at least: the old broker parsed for seconds, the 401s now take milliseconds.
    const start = performance.now();
    const pinging = (async () => {
      while (sending || performance.now() - start < 1000) {
        const sent = performance.now();
        raw.write([0xc0, 0x00]);
        await expectPacket(raw, 'pingresp', 30_000);
        rtts.push(performance.now() - sent);
        await sleep(5);
      }
    })();
    const answers = await Promise.all(
      Array.from({ length: 10 }, () => rawHttp(b.api.url, 'POST', '/api/v1/tenants/t1/publish', { body, timeoutMs: 30_000 })),
    );
    sending = false;
    await pinging;
    raw.destroy();
    for (const a of answers) {
      expect(a.status).toBe(401);
      expect(JSON.parse(a.text)).toEqual({ code: 'BIFRO_API_UNAUTHORIZED', message: expect.any(String) });
    }
    // Measured here: 690 ms median when the bodies were parsed before the token was checked, 2 ms now.
    expect(rtts.length).toBeGreaterThan(10);
    expect(median(rtts)).toBeLessThan(50);
  }, 60_000);

  it('keeps the 8 MiB body limit for a valid token, and allows 64 KiB without one (public routes)', async () => {
    const payload = 'x'.repeat(MiB);
    const published = await rawHttp(b.api.url, 'POST', '/api/v1/tenants/t1/publish', {
      token: API_TOKENS.admin,
      body: Buffer.from(JSON.stringify({ topic: 'big/one', payload })),
    });
    expect(published.status).toBe(200);
    const tooBig = await rawHttp(b.api.url, 'POST', '/api/v1/tenants/t1/publish', {
      token: API_TOKENS.admin,
      body: Buffer.from(JSON.stringify({ topic: 'big/one', payload: 'x'.repeat(8 * MiB) })),
    });
    expect(tooBig.status).toBe(413);
    expect(JSON.parse(tooBig.text)).toEqual({
      code: 'BIFRO_API_INVALID_REQUEST',
      message: 'the body is above the 8 MiB this route accepts',
    });
    // A public route takes no body, and a stranger may send 64 KiB at most: the rest is not read.
    const small = await rawHttp(b.api.url, 'GET', '/health', { body: Buffer.alloc(64 * 1024, 0x20) });
    expect(small.status).toBe(200);
    const large = await rawHttp(b.api.url, 'GET', '/health', { body: Buffer.alloc(64 * 1024 + 1, 0x20), sendOnly: 1024, timeoutMs: 5000 });
    expect(large.status).toBe(413);
    expect(JSON.parse(large.text)).toEqual({
      code: 'BIFRO_API_INVALID_REQUEST',
      message: 'a request without a valid token may send a body of 64 KiB at most, with a Content-Length',
    });
    expect(large.headers.connection).toBe('close');
    // A body of unknown length (chunked) is refused the same way, before it is read.
    const chunked = await rawHttp(b.api.url, 'GET', '/health', {
      headers: { 'transfer-encoding': 'chunked' },
      body: Buffer.from('{}'),
      sendOnly: 2,
      timeoutMs: 5000,
    });
    expect(chunked.status).toBe(413);
    expect(JSON.parse(chunked.text)).toMatchObject({ code: 'BIFRO_API_INVALID_REQUEST' });
  });

  it('answers a path that is not valid percent-encoding, an unknown route and a wrong method with { code, message }', async () => {
    for (const token of [undefined, API_TOKENS.admin]) {
      for (const path of ['/api/v1/%zz', '/api/v1/tenants/%E0%A4%A/sessions']) {
        const res = await rawHttp(b.api.url, 'GET', path, { token });
        expect(res.status).toBe(400);
        expect(res.headers['content-type']).toMatch(/^application\/json/);
        expect(JSON.parse(res.text)).toEqual({
          code: 'BIFRO_API_INVALID_REQUEST',
          message: `the path ${path} is not valid percent-encoding`,
        });
      }
    }
    // Without a token, no route exists for a stranger: 401 whatever the path or method.
    for (const [method, path] of [
      ['GET', '/api/v1/no-such-thing'],
      ['DELETE', '/health'],
      ['PUT', '/api/v1/tenants'],
    ] as const) {
      const stranger = await rawHttp(b.api.url, method, path);
      expect(stranger.status).toBe(401);
      expect(JSON.parse(stranger.text)).toEqual({ code: 'BIFRO_API_UNAUTHORIZED', message: 'missing Authorization: Bearer <token>' });
      const res = await rawHttp(b.api.url, method, path, { token: API_TOKENS.admin });
      expect(res.status).toBe(404);
      expect(JSON.parse(res.text)).toEqual({ code: 'BIFRO_API_NOT_FOUND', message: `no route ${method} ${path}` });
    }
  });
});

describe('api docs page', () => {
  let b: ApiBroker;
  beforeAll(async () => {
    b = await startApiBroker();
  });
  afterAll(() => b.stop());

  it('sends a Content-Security-Policy with the page and its files', async () => {
    for (const path of [
      '/api/v1/docs/',
      '/api/v1/docs/static/swagger-ui-bundle.js',
      '/api/v1/docs/static/swagger-initializer.js',
      '/api/v1/docs/json',
    ]) {
      const res = await b.http('GET', path, { token: null });
      expect(res.status).toBe(200);
      const csp = res.headers.get('content-security-policy') ?? '';
      expect(csp).toContain("default-src 'self'");
      expect(csp).toContain("script-src 'self';");
      expect(csp).toContain("frame-ancestors 'none'");
      expect(csp).not.toContain('unsafe-inline');
    }
  });

  it('renders under its policy in Chromium: every operation listed, nothing refused', async () => {
    const browser = await chromium.launch({
      executablePath: process.env.BIFRO_CHROMIUM ?? '/usr/bin/chromium',
      args: ['--no-sandbox', '--disable-gpu', '--no-first-run', '--disable-background-networking', '--disable-component-update'],
    });
    try {
      const page = await browser.newPage();
      const problems: string[] = [];
      page.on('pageerror', (err) => problems.push(`uncaught: ${err.message}`));
      page.on('console', (m) => {
        if (m.type() === 'error' || /Content Security Policy/i.test(m.text())) problems.push(`console: ${m.text()}`);
      });
      await page.goto(`${b.api.url}/api/v1/docs/`);
      await page.locator('.opblock').first().waitFor({ timeout: 15_000 });
      expect(await page.locator('.opblock-summary-path[data-path="/api/v1/tenants/{tenant}/publish"]').count()).toBe(1);
      // "Try it out" calls the API from the page.
      await page.locator('.opblock-summary-path[data-path="/health"]').click();
      await page.getByRole('button', { name: 'Try it out' }).click();
      await page.getByRole('button', { name: 'Execute' }).click();
      await page.locator('.live-responses-table .response-col_status', { hasText: '200' }).waitFor({ timeout: 15_000 });
      // The policy is in force: a script built from a string is refused.
      await expect(page.waitForFunction('window.bifroNever === true', undefined, { timeout: 5000 })).rejects.toThrow(
        /Content Security Policy/,
      );
      problems.splice(0, problems.length, ...problems.filter((p) => !p.includes("'unsafe-eval'")));
      expect(problems).toEqual([]);
    } finally {
      await browser.close();
    }
  }, 60_000);
});

describe('api over TLS', () => {
  let certs: TestCerts;
  beforeAll(() => (certs = createTestCerts()));
  afterAll(() => certs.remove());

  it('serves HTTPS with api.tls', async () => {
    const b = await startApiBroker('', {
      apiExtra: `  tls: { cert: ${JSON.stringify(certs.server.cert)}, key: ${JSON.stringify(certs.server.key)} }`,
    });
    try {
      expect(b.api.url).toMatch(/^https:/);
      const status = await new Promise<number>((resolve, reject) => {
        https
          .get(
            `${b.api.url}/api/v1/no-such-thing`,
            { ca: certs.ca.certPem, headers: { authorization: `Bearer ${API_TOKENS.admin}` } },
            (res) => {
              res.resume();
              resolve(res.statusCode ?? 0);
            },
          )
          .on('error', reject);
      });
      expect(status).toBe(404);
    } finally {
      await b.stop();
    }
  });
});

describe('bifro token create', () => {
  function io(): CliIo & { stdout: string[]; stderr: string[] } {
    const stdout: string[] = [];
    const stderr: string[] = [];
    return { stdout, stderr, out: (t) => stdout.push(t), err: (t) => stderr.push(t), cwd: process.cwd(), env: {} };
  }

  it('prints a random token and the api.tokens line that a broker accepts', async () => {
    const first = io();
    expect(await main(['token', 'create', '--name', 'billing', '--tenant', 't1'], first)).toBe(0);
    const token = first.stdout[0]!;
    expect(token).toMatch(/^[A-Za-z0-9_-]{43}$/);
    const line = first.stderr
      .join('\n')
      .split('\n')
      .find((l) => l.includes('hash:'))!;
    expect(line).toContain(tokenHash(token));
    expect(line).not.toContain(token);
    const again = io();
    await main(['token', 'create', '--name', 'billing'], again);
    expect(again.stdout[0]).not.toBe(token);

    const b = await startTestBroker(`api:\n  host: 127.0.0.1\n  port: 0\n  tokens:\n${line}\n`);
    try {
      const api = b.broker.api!;
      const withToken = await api.app.inject({
        method: 'GET',
        url: '/api/v1/no-such-thing',
        headers: { authorization: `Bearer ${token}` },
      });
      expect(withToken.statusCode).toBe(404);
      const without = await api.app.inject({ method: 'GET', url: '/api/v1/no-such-thing' });
      expect(without.statusCode).toBe(401);
    } finally {
      await b.stop();
    }
  });

  it('refuses a missing or bad --name and an unknown action with a usage error', async () => {
    for (const args of [
      ['token', 'create'],
      ['token', 'create', '--name', 'a b'],
      ['token', 'rotate', '--name', 'x'],
    ]) {
      const out = io();
      expect(await main(args, out)).toBe(2);
      expect(out.stderr.join('\n')).toMatch(/bifro token/);
    }
  });
});

describe('drain at shutdown', () => {
  it('turns /ready to 503, tells v5 clients 0x8B and closes the API', async () => {
    const b = await startApiBroker();
    const { client } = await connectAsync(b.port, { protocolVersion: 5, clientId: 'drained', username: 't1/alice' });
    let reason: number | undefined;
    client.on('disconnect', (packet) => (reason = packet.reasonCode));
    const stopping = b.broker.stop('test drain');
    const ready = await b.inject({ method: 'GET', url: '/ready', token: null });
    expect(ready.statusCode).toBe(503);
    await stopping;
    expect(await waitUntil(() => reason !== undefined)).toBe(true);
    expect(reason).toBe(0x8b);
    client.end(true);
    await expect(fetch(`${b.api.url}/health`)).rejects.toThrow();
    await b.stop();
  });
});
