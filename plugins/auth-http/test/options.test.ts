import { testPluginContext } from '@bifro/spi/testing';
import plugin, { AUTH_HTTP_ERRORS, parseAclOptions, parseAuthOptions } from '../src';

const URL_OK = 'http://127.0.0.1:9/auth';

function authError(options: Record<string, unknown>): string {
  try {
    parseAuthOptions(options);
  } catch (err) {
    expect((err as { code?: string }).code).toBe('BIFRO_AUTH_HTTP_OPTIONS_INVALID');
    return (err as Error).message;
  }
  throw new Error(`options ${JSON.stringify(options)} were accepted`);
}

describe('auth-http: options', () => {
  it('applies the documented defaults', () => {
    const o = parseAuthOptions({ url: 'https://auth.example.com' });
    expect(o).toMatchObject({
      origin: 'https://auth.example.com',
      https: true,
      method: 'POST',
      bodyFormat: 'json',
      mode: 'json',
      timeoutMs: 2000,
      pool: { connections: 16, keepAliveTimeoutMs: 30000 },
      cache: { allowTtlMs: 60000, denyTtlMs: 5000, maxEntries: 10000 },
      failOpen: false,
      tls: undefined,
      tenant: undefined,
      maxResponseBytes: 65536,
    });
    expect(o.path.source).toBe('/');
    expect(o.user.source).toBe('{username}');
    expect(o.body.map((f) => f.name)).toEqual([
      'clientId',
      'username',
      'password',
      'remoteAddress',
      'listener',
      'protocolVersion',
      'certCN',
    ]);
    expect(o.uses.has('remotePort')).toBe(false);
  });

  it('keeps the path and query of the url as a template; a query alone gets a "/" path', () => {
    expect(parseAuthOptions({ url: 'http://h:8080/a/{clientId}?x=1' }).path.source).toBe('/a/{clientId}?x=1');
    expect(parseAuthOptions({ url: 'http://h?x=1' }).path.source).toBe('/?x=1');
    expect(parseAuthOptions({ url: 'HTTP://H:80/' }).origin).toBe('http://h');
    expect(parseAuthOptions({ url: 'http://[::1]:81/' }).origin).toBe('http://[::1]:81');
  });

  it.each([
    [{}, /^BIFRO_AUTH_HTTP_OPTIONS_INVALID: @bifro\/plugin-auth-http: options.url is required/],
    [{ url: 5 }, /options.url must be an http:\/\/ or https:\/\/ URL, got number 5/],
    [{ url: 'ftp://x' }, /options.url must be an http/],
    [{ url: 'http://{username}.example.com/' }, /options.url may use placeholders in its path and query only/],
    [{ url: 'http://u:p@h/' }, /options.url must not carry credentials/],
    [{ url: 'http://h/#x' }, /options.url must not have a fragment/],
    [{ url: 'http://h:99999/' }, /options.url has an invalid host or port/],
    [{ url: 'http://h/a b' }, /options.url has characters that must be percent-encoded/],
    [{ url: 'http://h/{nope}' }, /options.url is not a valid template: unknown placeholder \{nope\}/],
    [{ url: URL_OK, extra: 1 }, /options.extra is not an option \(known: url, method/],
    [{ url: URL_OK, method: 'DELETE' }, /options.method must be one of POST, PUT, GET, got "DELETE"/],
    [{ url: URL_OK, headers: [] }, /options.headers must be a map/],
    [{ url: URL_OK, headers: { 'bad name': 'x' } }, /options.headers.bad name is not a valid HTTP header name/],
    [{ url: URL_OK, headers: { Host: 'x' } }, /options.headers.Host is set by the plugin itself/],
    [{ url: URL_OK, headers: { A: 'x', a: 'y' } }, /options.headers.a is given twice/],
    [{ url: URL_OK, headers: { A: 'x\ny' } }, /options.headers.A must contain printable ASCII only/],
    [{ url: URL_OK, headers: { A: 5 } }, /options.headers.A must be a string/],
    [{ url: URL_OK, headers: { A: '{pass}' } }, /options.headers.A is not a valid template: unknown placeholder \{pass\}/],
    [{ url: URL_OK, body: 'x' }, /options.body must be a map/],
    [{ url: URL_OK, body: { u: 1 } }, /options.body.u must be a string/],
    [{ url: URL_OK, body: { u: '{username' } }, /options.body.u is not a valid template: "\{" at position 0 is not closed/],
    [{ url: URL_OK, bodyFormat: 'xml' }, /options.bodyFormat must be one of json, form/],
    [{ url: URL_OK, method: 'GET', bodyFormat: 'form' }, /options.bodyFormat does not apply to GET/],
    [{ url: URL_OK, mode: 'x' }, /options.mode must be one of json, status/],
    [{ url: URL_OK, mode: 'status' }, /options.tenant is required with mode "status"/],
    [{ url: URL_OK, timeoutMs: 0 }, /options.timeoutMs must be an integer from 1 to 60000, got number 0/],
    [{ url: URL_OK, timeoutMs: 1.5 }, /options.timeoutMs must be an integer/],
    [{ url: URL_OK, pool: 4 }, /options.pool must be a map/],
    [{ url: URL_OK, pool: { connections: 0 } }, /options.pool.connections must be an integer from 1 to 1024/],
    [{ url: URL_OK, pool: { size: 2 } }, /options.pool.size is not an option/],
    [{ url: URL_OK, pool: { keepAliveTimeoutMs: '5s' } }, /options.pool.keepAliveTimeoutMs must be an integer/],
    [{ url: URL_OK, cache: { allowTtlMs: -1 } }, /options.cache.allowTtlMs must be an integer from 0/],
    [{ url: URL_OK, cache: { denyTtlMs: 'x' } }, /options.cache.denyTtlMs must be an integer/],
    [{ url: URL_OK, cache: { maxEntries: 0.5 } }, /options.cache.maxEntries must be an integer/],
    [{ url: URL_OK, cache: { ttl: 1 } }, /options.cache.ttl is not an option/],
    [{ url: URL_OK, failOpen: 'yes' }, /options.failOpen must be true or false, got "yes"/],
    [{ url: URL_OK, tls: { ca: 'ca.pem' } }, /options.tls applies to an https:\/\/ url only/],
    [{ url: 'https://h/', tls: 'x' }, /options.tls must be a map/],
    [{ url: 'https://h/', tls: { ca: '' } }, /options.tls.ca must be a non-empty string/],
    [{ url: 'https://h/', tls: { cert: 'c.pem' } }, /options.tls.key is needed too/],
    [{ url: 'https://h/', tls: { rejectUnauthorized: 'no' } }, /options.tls.rejectUnauthorized must be true or false/],
    [{ url: 'https://h/', tls: { verify: true } }, /options.tls.verify is not an option/],
    [{ url: URL_OK, tenant: 3 }, /options.tenant must be a string/],
    [{ url: URL_OK, user: '{x}' }, /options.user is not a valid template/],
    [{ url: URL_OK, maxResponseBytes: 1 }, /options.maxResponseBytes must be an integer from 64/],
  ])('refuses %j with a coded error naming the key', (options, message) => {
    expect(authError(options)).toMatch(message);
  });

  it('the factory refuses bad options with the coded error, as the broker would see it', () => {
    const factory = plugin.auth!;
    expect(() => factory(testPluginContext({ options: { url: URL_OK, timeoutMs: -5 } }))).toThrow(
      /^BIFRO_AUTH_HTTP_OPTIONS_INVALID: @bifro\/plugin-auth-http: options.timeoutMs/,
    );
    expect(() => plugin.acl!(testPluginContext({ options: { connect: 'deny' } }))).toThrow(
      /^BIFRO_AUTH_HTTP_OPTIONS_INVALID: @bifro\/plugin-auth-http: options.connect must be one of grant, defer, got "deny"/,
    );
  });

  it('acl options: defaults and checks', () => {
    expect(parseAclOptions({})).toEqual({ connect: 'grant', withoutRules: 'defer', unmatched: 'defer' });
    expect(parseAclOptions({ connect: 'defer', withoutRules: 'grant', unmatched: 'deny' })).toEqual({
      connect: 'defer',
      withoutRules: 'grant',
      unmatched: 'deny',
    });
    expect(() => parseAclOptions({ url: URL_OK })).toThrow(/options.url is not an option \(known: connect, withoutRules, unmatched\)/);
    expect(() => parseAclOptions({ unmatched: 'allow' })).toThrow(/options.unmatched must be one of defer, grant, deny/);
  });

  it('declares every code it uses, each with a summary and a remedy', () => {
    expect(plugin.errors).toBe(AUTH_HTTP_ERRORS);
    for (const [code, spec] of Object.entries(AUTH_HTTP_ERRORS)) {
      expect(code).toMatch(/^BIFRO_AUTH_HTTP_[A-Z_]+$/);
      expect(spec.summary.length).toBeGreaterThan(10);
      expect(spec.remedy.length).toBeGreaterThan(10);
    }
  });
});
