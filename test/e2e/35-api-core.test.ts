import https from 'node:https';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { validate as validateOpenApi } from '@readme/openapi-parser';
import { tokenHash } from '../../core/src/api/api-auth';
import { API_ERRORS } from '../../core/src/api/api-errors';
import { main } from '../../core/src/cli/main';
import type { CliIo } from '../../core/src/cli/cli-io';
import { loadConfig } from '../../core/src/runtime/config';
import { startApiBroker, API_TOKENS, type ApiBroker } from '../support/api-broker';
import { startTestBroker } from '../support/test-broker';
import { connectAsync, waitUntil } from '../support/mqtt-helpers';
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
