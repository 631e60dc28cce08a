import * as http from 'node:http';
import * as net from 'node:net';
import { inspect } from 'node:util';
import { ACL_RULES_ATTR } from '@bifro/spi';
import { closeAll, connect, make, ManualClock, sleep } from './helpers';
import { fields, startService, userTable, type AuthService } from './service';

jest.setTimeout(15000);

const USERS = {
  alice: { password: 's3cret', tenant: 'acme', attrs: { role: 'admin' } },
  bob: { password: 'hunter2', tenant: 'beta', acl: [{ permission: 'allow', action: 'publish', topic: 'beta/%u/#' }] },
};

let service: AuthService;

beforeEach(async () => {
  service = await startService({ handler: userTable(USERS) });
});

afterEach(async () => {
  closeAll();
  await service.close();
});

/** A port nothing listens on. */
async function closedPort(): Promise<number> {
  const server = net.createServer();
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const port = (server.address() as net.AddressInfo).port;
  await new Promise<void>((resolve) => server.close(() => resolve()));
  return port;
}

describe('auth-http: the request', () => {
  it('POSTs the default JSON fields with accept, content-type and user-agent', async () => {
    const { provider } = await make({ url: `${service.origin}/mqtt/auth` });
    await provider.authenticate(connect('alice', 's3cret', { remoteAddress: '10.1.2.3', listener: 'tcp', protocolVersion: 5 }));
    expect(service.requests).toHaveLength(1);
    const req = service.requests[0]!;
    expect(req.method).toBe('POST');
    expect(req.url).toBe('/mqtt/auth');
    expect(req.headers['content-type']).toBe('application/json');
    expect(req.headers.accept).toBe('application/json');
    expect(req.headers['user-agent']).toBe('@bifro/plugin-auth-http');
    expect(req.body).toEqual({
      clientId: 'c-alice',
      username: 'alice',
      password: 's3cret',
      remoteAddress: '10.1.2.3',
      listener: 'tcp',
      protocolVersion: '5',
      certCN: '',
    });
  });

  it('renders the url, headers and body templates, each escaped for where it lands', async () => {
    service.handle(() => ({ json: { result: 'allow', tenant: 't' } }));
    const { provider } = await make({
      url: `${service.origin}/auth/{username}?client={clientId}`,
      headers: { Authorization: 'Basic {basicAuth}', 'X-User': '{username}', 'X-Static': 'v1' },
      body: { user: '{username}', pass: '{passwordBase64}', both: '{username}:{clientId} {{literal}}' },
    });
    const username = 'a/b?"c"\r\nX-Evil: 1';
    await provider.authenticate(connect(username, 'pw', { clientId: 'id&x=1' }));
    const req = service.requests[0]!;
    expect(req.url).toBe(`/auth/${encodeURIComponent(username)}?client=id%26x%3D1`);
    expect(req.query).toEqual({ client: 'id&x=1' });
    expect(req.headers.authorization).toBe(`Basic ${Buffer.from(`${username}:pw`).toString('base64')}`);
    expect(req.headers['x-user']).toBe('a/b?"c"%0D%0AX-Evil: 1');
    expect(req.headers['x-evil']).toBeUndefined();
    expect(req.headers['x-static']).toBe('v1');
    expect(req.body).toEqual({ user: username, pass: Buffer.from('pw').toString('base64'), both: `${username}:id&x=1 {literal}` });
  });

  it('sends a form body with bodyFormat form', async () => {
    service.handle(() => ({ json: { result: 'allow', tenant: 't' } }));
    const { provider } = await make({ url: service.origin, bodyFormat: 'form', body: { u: '{username}', p: '{password}' } });
    await provider.authenticate(connect('ü&=x', 'p w'));
    expect(service.requests[0]!.headers['content-type']).toBe('application/x-www-form-urlencoded');
    expect(service.requests[0]!.body).toEqual({ u: 'ü&=x', p: 'p w' });
  });

  it('GET carries the fields in the query string and has no body', async () => {
    service.handle(() => ({ json: { result: 'allow', tenant: 't' } }));
    const { provider } = await make({ url: `${service.origin}/check?v=1`, method: 'GET', body: { u: '{username}', c: '{clientId}' } });
    await provider.authenticate(connect('a&b', 'x', { clientId: 'c d' }));
    const req = service.requests[0]!;
    expect(req.method).toBe('GET');
    expect(req.query).toEqual({ v: '1', u: 'a&b', c: 'c d' });
    expect(req.headers['content-type']).toBeUndefined();
    expect(req.headers['content-length']).toBeUndefined();
  });
});

describe('auth-http: outcomes', () => {
  it('allow: tenant, user and attrs from the answer; ACL rules under bifro.acl', async () => {
    const { provider } = await make({ url: service.origin });
    expect(await provider.authenticate(connect('alice', 's3cret'))).toEqual({
      type: 'ok',
      tenantId: 'acme',
      userId: 'alice',
      attrs: { role: 'admin' },
    });
    const bob = await provider.authenticate(connect('bob', 'hunter2'));
    expect(bob).toMatchObject({ type: 'ok', tenantId: 'beta', userId: 'bob' });
    if (bob.type === 'ok') expect(JSON.parse(bob.attrs![ACL_RULES_ATTR]!)).toEqual(USERS.bob.acl);
  });

  it('tenant and user come from the options when the answer names none; an empty user becomes the client id', async () => {
    service.handle(() => ({ json: { result: 'allow' } }));
    const { provider } = await make({ url: service.origin, tenant: 'site-{listener}', user: '{certCN}' });
    expect(await provider.authenticate(connect('x', 'y', { listener: 'north' }))).toMatchObject({
      type: 'ok',
      tenantId: 'site-north',
      userId: 'c-x',
    });
  });

  it('tenant and user templates can use fields the request does not send: cached answers still get the right identity', async () => {
    service.handle(() => ({ json: { result: 'allow' } }));
    const { provider } = await make({ url: service.origin, body: { u: '{username}' }, tenant: 't', user: '{clientId}' });
    expect(await provider.authenticate(connect('x', 'y', { clientId: 'one' }))).toMatchObject({ userId: 'one' });
    expect(await provider.authenticate(connect('x', 'y', { clientId: 'two' }))).toMatchObject({ userId: 'two' });
    expect(service.requests).toHaveLength(1);
  });

  it('status mode: 2xx allows with the identity from the options, 401/403 deny', async () => {
    service.handle((req) => ({ status: fields(req).username === 'ok' ? 204 : fields(req).username === 'who' ? 401 : 403 }));
    const { provider } = await make({ url: service.origin, mode: 'status', tenant: 'fixed' });
    expect(await provider.authenticate(connect('ok', 'p'))).toEqual({ type: 'ok', tenantId: 'fixed', userId: 'ok', attrs: {} });
    expect(await provider.authenticate(connect('who', 'p'))).toMatchObject({ type: 'reject', reason: 'badCredentials' });
    expect(await provider.authenticate(connect('no', 'p'))).toMatchObject({ type: 'reject', reason: 'notAuthorized' });
  });

  it('deny: the reason and message of the answer; 401 and 403 in json mode too', async () => {
    const { provider } = await make({ url: service.origin });
    expect(await provider.authenticate(connect('alice', 'wrong'))).toEqual({
      type: 'reject',
      reason: 'badCredentials',
      text: 'wrong password',
    });
    expect(await provider.authenticate(connect('mallory', 'x'))).toEqual({ type: 'reject', reason: 'notAuthorized', text: 'unknown user' });
    service.handle((req) => (fields(req).username === 'banned' ? { json: { result: 'deny', reason: 'banned' } } : { status: 401 }));
    expect(await provider.authenticate(connect('banned', 'x'))).toEqual({
      type: 'reject',
      reason: 'banned',
      text: 'refused by the auth service',
    });
    expect(await provider.authenticate(connect('other', 'x'))).toMatchObject({ type: 'reject', reason: 'badCredentials' });
  });

  it('ignore: defer to the next provider', async () => {
    service.handle(() => ({ json: { result: 'ignore' } }));
    const { provider } = await make({ url: service.origin });
    expect(await provider.authenticate(connect('x', 'y'))).toEqual({ type: 'defer' });
  });

  it('expiresAt is passed on', async () => {
    service.handle(() => ({ json: { result: 'allow', tenant: 't', user: 'u', expiresAt: 4_000_000_000_000 } }));
    const { provider } = await make({ url: service.origin });
    expect(await provider.authenticate(connect('x', 'y'))).toMatchObject({ type: 'ok', expiresAt: 4_000_000_000_000 });
  });
});

describe('auth-http: failures (fail closed by default)', () => {
  const ERROR = { type: 'reject', reason: 'error', text: 'the auth service could not decide' };

  it('HTTP 500 → reject error, logged with the code', async () => {
    service.handle(() => ({ status: 500, json: { result: 'allow', tenant: 't' } }));
    const m = await make({ url: service.origin });
    expect(await m.provider.authenticate(connect('alice', 's3cret'))).toEqual(ERROR);
    expect(m.warnings()).toEqual([
      expect.stringMatching(
        /^BIFRO_AUTH_HTTP_SERVICE_FAILED: @bifro\/plugin-auth-http: http:\/\/127\.0\.0\.1:\d+: the service answered HTTP 500; the client is refused/,
      ),
    ]);
    expect(m.provider.stats).toMatchObject({ requests: 1, failures: 1 });
  });

  it('malformed JSON → reject error, logged as ANSWER_INVALID', async () => {
    service.handle(() => ({ raw: '{"result": "allow", "tenant": ' }));
    const m = await make({ url: service.origin });
    expect(await m.provider.authenticate(connect('alice', 's3cret'))).toEqual(ERROR);
    expect(m.warnings()[0]).toMatch(/^BIFRO_AUTH_HTTP_ANSWER_INVALID: .*not JSON/);
  });

  it('an allow naming no tenant without options.tenant → reject error', async () => {
    service.handle(() => ({ json: { result: 'allow', user: 'u' } }));
    const m = await make({ url: service.origin });
    expect(await m.provider.authenticate(connect('x', 'y'))).toEqual(ERROR);
    expect(m.warnings()[0]).toMatch(/BIFRO_AUTH_HTTP_ANSWER_INVALID: .*names no tenant/);
  });

  it('a slow service → reject error after timeoutMs, not later', async () => {
    service.handle(() => ({ delayMs: 3000, json: { result: 'allow', tenant: 't' } }));
    const m = await make({ url: service.origin, timeoutMs: 200 });
    const started = Date.now();
    expect(await m.provider.authenticate(connect('alice', 's3cret'))).toEqual(ERROR);
    const took = Date.now() - started;
    expect(took).toBeGreaterThanOrEqual(190);
    expect(took).toBeLessThan(1500);
    expect(m.warnings()[0]).toMatch(/no answer within 200 ms/);
  });

  it('an answer whose body never ends → reject error after timeoutMs', async () => {
    const server = http.createServer((req, res) => {
      req.resume();
      res.writeHead(200, { 'content-type': 'application/json' });
      res.write('{"result": "allow", ');
    });
    await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
    try {
      const m = await make({ url: `http://127.0.0.1:${(server.address() as net.AddressInfo).port}/`, timeoutMs: 200 });
      const started = Date.now();
      expect(await m.provider.authenticate(connect('a', 'b'))).toEqual(ERROR);
      expect(Date.now() - started).toBeLessThan(1500);
      expect(m.warnings()[0]).toMatch(/no answer within 200 ms/);
    } finally {
      closeAll();
      server.closeAllConnections();
      await new Promise<void>((resolve) => server.close(() => resolve()));
    }
  });

  it('service down (connection refused) → reject error', async () => {
    const m = await make({ url: `http://127.0.0.1:${await closedPort()}/` });
    expect(await m.provider.authenticate(connect('alice', 's3cret'))).toEqual(ERROR);
    expect(m.warnings()[0]).toMatch(/connection refused \(ECONNREFUSED/);
  });

  it('an answer larger than maxResponseBytes → reject error', async () => {
    service.handle(() => ({ json: { result: 'allow', tenant: 't', attrs: { big: 'x'.repeat(5000) } } }));
    const m = await make({ url: service.origin, maxResponseBytes: 1024 });
    expect(await m.provider.authenticate(connect('alice', 's3cret'))).toEqual(ERROR);
    expect(m.warnings()[0]).toMatch(/larger than maxResponseBytes \(1024\)/);
  });

  it('failOpen: every failure defers to the next provider instead; denies stay denies', async () => {
    const m = await make({ url: service.origin, failOpen: true });
    service.handle(() => ({ status: 503 }));
    expect(await m.provider.authenticate(connect('a', 'b'))).toEqual({ type: 'defer' });
    service.handle(() => ({ raw: 'nope' }));
    expect(await m.provider.authenticate(connect('c', 'd'))).toEqual({ type: 'defer' });
    service.handle(() => ({ json: { result: 'deny' } }));
    expect(await m.provider.authenticate(connect('e', 'f'))).toMatchObject({ type: 'reject', reason: 'notAuthorized' });
    expect(m.warnings()[0]).toMatch(/passed to the next auth provider \(failOpen\)/);
    const down = await make({ url: `http://127.0.0.1:${await closedPort()}/`, failOpen: true });
    expect(await down.provider.authenticate(connect('a', 'b'))).toEqual({ type: 'defer' });
  });

  it('failures are logged at most once per code every 10 s, with the count left out', async () => {
    service.handle(() => ({ status: 500 }));
    const m = await make({ url: service.origin });
    for (let i = 0; i < 5; i++) await m.provider.authenticate(connect(`u${i}`, 'p'));
    expect(m.warnings()).toHaveLength(1);
    expect(m.provider.stats.failures).toBe(5);
  });

  it('after close, CONNECTs are refused with error', async () => {
    const m = await make({ url: service.origin });
    m.provider.close();
    expect(await m.provider.authenticate(connect('alice', 's3cret'))).toEqual(ERROR);
    expect(service.requests).toHaveLength(0);
  });
});

describe('auth-http: cache (injected clock)', () => {
  it('an allow is answered from the cache for allowTtlMs, then asked again', async () => {
    const clock = new ManualClock();
    const { provider } = await make({ url: service.origin, cache: { allowTtlMs: 1000, denyTtlMs: 100 } }, { now: clock.now });
    const first = await provider.authenticate(connect('alice', 's3cret'));
    clock.advance(999);
    const hit = provider.authenticate(connect('alice', 's3cret'));
    expect(hit).not.toBeInstanceOf(Promise); // a cache hit is answered synchronously
    expect(hit).toEqual(first);
    expect(service.requests).toHaveLength(1);
    expect(provider.stats.cacheHits).toBe(1);
    clock.advance(1);
    expect(await provider.authenticate(connect('alice', 's3cret'))).toEqual(first);
    expect(service.requests).toHaveLength(2);
  });

  it('a deny is cached for denyTtlMs (its own TTL), then asked again', async () => {
    const clock = new ManualClock();
    const { provider } = await make({ url: service.origin, cache: { allowTtlMs: 60000, denyTtlMs: 500 } }, { now: clock.now });
    const denied = await provider.authenticate(connect('alice', 'wrong'));
    expect(denied).toMatchObject({ type: 'reject', reason: 'badCredentials' });
    clock.advance(499);
    expect(await provider.authenticate(connect('alice', 'wrong'))).toEqual(denied);
    expect(service.requests).toHaveLength(1);
    clock.advance(1);
    await provider.authenticate(connect('alice', 'wrong'));
    expect(service.requests).toHaveLength(2);
  });

  it('the key covers every field sent: another password, client id or address asks again; a field not sent does not', async () => {
    const { provider } = await make({ url: service.origin });
    await provider.authenticate(connect('alice', 's3cret'));
    await provider.authenticate(connect('alice', 'wrong'));
    await provider.authenticate(connect('alice', 's3cret', { clientId: 'other' }));
    await provider.authenticate(connect('alice', 's3cret', { remoteAddress: '10.9.9.9' }));
    expect(service.requests).toHaveLength(4);
    await provider.authenticate(connect('alice', 's3cret', { remotePort: 1234 })); // remotePort is not sent by default
    expect(service.requests).toHaveLength(4);
  });

  it('a deny does not hide a later correct password (different key)', async () => {
    const { provider } = await make({ url: service.origin, cache: { denyTtlMs: 60000 } });
    expect(await provider.authenticate(connect('alice', 'wrong'))).toMatchObject({ type: 'reject' });
    expect(await provider.authenticate(connect('alice', 's3cret'))).toMatchObject({ type: 'ok' });
  });

  it('failures are never cached', async () => {
    service.handle(() => ({ status: 500 }));
    const { provider } = await make({ url: service.origin });
    await provider.authenticate(connect('alice', 's3cret'));
    service.handle(userTable(USERS));
    expect(await provider.authenticate(connect('alice', 's3cret'))).toMatchObject({ type: 'ok' });
    expect(service.requests).toHaveLength(2);
  });

  it('TTL 0 turns caching off; maxEntries bounds it (least recently used out)', async () => {
    const off = await make({ url: service.origin, cache: { allowTtlMs: 0, denyTtlMs: 0 } });
    await off.provider.authenticate(connect('alice', 's3cret'));
    await off.provider.authenticate(connect('alice', 's3cret'));
    expect(service.requests).toHaveLength(2);

    service.requests.length = 0;
    const small = await make({ url: service.origin, cache: { maxEntries: 2 } });
    await small.provider.authenticate(connect('alice', 's3cret')); // A
    await small.provider.authenticate(connect('bob', 'hunter2')); // B
    await small.provider.authenticate(connect('alice', 's3cret')); // A hit, now most recent
    await small.provider.authenticate(connect('carol', 'x')); // C evicts B
    expect(service.requests).toHaveLength(3);
    await small.provider.authenticate(connect('alice', 's3cret')); // still cached
    expect(service.requests).toHaveLength(3);
    await small.provider.authenticate(connect('bob', 'hunter2')); // evicted: asked again
    expect(service.requests).toHaveLength(4);
  });

  it('an allow whose expiresAt comes before allowTtlMs is cached only until expiresAt', async () => {
    const clock = new ManualClock();
    service.handle(() => ({ json: { result: 'allow', tenant: 't', user: 'u', expiresAt: clock.t + 300 } }));
    const { provider } = await make({ url: service.origin, cache: { allowTtlMs: 60000 } }, { now: clock.now });
    await provider.authenticate(connect('x', 'y'));
    clock.advance(299);
    await provider.authenticate(connect('x', 'y'));
    expect(service.requests).toHaveLength(1);
    clock.advance(1);
    await provider.authenticate(connect('x', 'y'));
    expect(service.requests).toHaveLength(2);
  });

  it('identical CONNECTs while a request is under way share it', async () => {
    service.handle((req) => ({ delayMs: 150, ...userTable(USERS)(req) }) as never);
    const { provider } = await make({ url: service.origin });
    const results = await Promise.all(Array.from({ length: 10 }, () => provider.authenticate(connect('alice', 's3cret'))));
    expect(new Set(results.map((r) => JSON.stringify(r))).size).toBe(1);
    expect(results[0]).toMatchObject({ type: 'ok', tenantId: 'acme' });
    expect(service.requests).toHaveLength(1);
    expect(provider.stats.joined).toBe(9);
  });

  it('keeps no plain password in memory: the cache holds keyed hashes', async () => {
    const { provider } = await make({ url: service.origin });
    await provider.authenticate(connect('alice', 's3cret'));
    await provider.authenticate(connect('alice', 'wrong-pass'));
    const dump = inspect(provider, { depth: 20, showHidden: true, maxArrayLength: null, maxStringLength: null });
    expect(dump).toContain('acme'); // the cached decision is in there
    expect(dump).not.toContain('s3cret');
    expect(dump).not.toContain('wrong-pass');
  });
});

describe('auth-http: connection pool', () => {
  it('many CONNECTs reuse one kept-alive connection', async () => {
    service.handle(() => ({ json: { result: 'allow', tenant: 't' } }));
    const { provider } = await make({ url: service.origin });
    for (let i = 0; i < 25; i++) await provider.authenticate(connect(`user${i}`, 'p'));
    expect(service.requests).toHaveLength(25);
    expect(service.connections()).toBe(1);
  });

  it('concurrent CONNECTs open at most pool.connections connections', async () => {
    service.handle(() => ({ delayMs: 30, json: { result: 'allow', tenant: 't' } }));
    const { provider } = await make({ url: service.origin, pool: { connections: 3 } });
    const results = await Promise.all(Array.from({ length: 30 }, (_, i) => provider.authenticate(connect(`user${i}`, 'p'))));
    expect(results.every((r) => r.type === 'ok')).toBe(true);
    expect(service.requests).toHaveLength(30);
    expect(service.connections()).toBeLessThanOrEqual(3);
    expect(service.connections()).toBeGreaterThanOrEqual(2);
  });

  it('an idle connection is closed after pool.keepAliveTimeoutMs', async () => {
    service.handle(() => ({ json: { result: 'allow', tenant: 't' } }));
    const { provider } = await make({ url: service.origin, pool: { keepAliveTimeoutMs: 100 } });
    await provider.authenticate(connect('a', 'p'));
    await sleep(300);
    await provider.authenticate(connect('b', 'p'));
    expect(service.connections()).toBe(2);
  });

  it('a kept-alive connection the service dropped is retried once on a new one', async () => {
    // A raw node server that resets every connection on its second request.
    const perSocket = new WeakMap<object, number>();
    let requests = 0;
    const server = http.createServer((req, res) => {
      requests++;
      const n = (perSocket.get(req.socket) ?? 0) + 1;
      perSocket.set(req.socket, n);
      req.resume();
      if (n === 2) {
        req.socket.destroy();
        return;
      }
      res.setHeader('content-type', 'application/json');
      res.end(JSON.stringify({ result: 'allow', tenant: 't', user: `n${requests}` }));
    });
    await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
    try {
      const { provider } = await make({ url: `http://127.0.0.1:${(server.address() as net.AddressInfo).port}/` });
      expect(await provider.authenticate(connect('a', 'p'))).toMatchObject({ type: 'ok' });
      expect(await provider.authenticate(connect('b', 'p'))).toMatchObject({ type: 'ok' });
      expect(requests).toBe(3);
      expect(provider.stats.requests).toBe(2);
    } finally {
      closeAll();
      server.closeAllConnections();
      await new Promise<void>((resolve) => server.close(() => resolve()));
    }
  });
});
