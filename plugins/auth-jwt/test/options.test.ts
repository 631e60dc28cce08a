import * as path from 'node:path';
import { testPluginContext } from '@bifro/spi/testing';
import plugin, { JWT_ERRORS, parseAclOptions, parseAuthOptions } from '../src';
import { SECRET } from './helpers';

const CODE = 'BIFRO_AUTH_JWT_OPTIONS_INVALID';

/** The message a bad auth option gives, through the plugin's factory (what the broker calls). */
function authError(options: Record<string, unknown>): string {
  try {
    plugin.auth(testPluginContext({ options }));
  } catch (err) {
    expect((err as { code?: unknown }).code).toBe(CODE);
    return (err as Error).message;
  }
  throw new Error(`options ${JSON.stringify(options)} were accepted`);
}

describe('auth-jwt: options', () => {
  it('defaults', () => {
    const o = parseAuthOptions({ secret: SECRET }, '/conf');
    expect(o).toMatchObject({
      algorithms: undefined,
      issuer: undefined,
      audience: undefined,
      clockSkewSeconds: 30,
      requireExp: true,
      tenantClaim: 'tenant',
      defaultTenant: undefined,
      userClaim: 'sub',
      aclClaim: 'acl',
      attrsClaims: [],
      authMethod: 'JWT',
      maxTokenBytes: 8192,
    });
    expect(o.key).toEqual({ kind: 'secret', secret: new TextEncoder().encode(SECRET) });
    expect(parseAuthOptions({ publicKeyFile: 'keys/jwt.pem' }, '/conf').key).toEqual({
      kind: 'file',
      file: path.resolve('/conf', 'keys/jwt.pem'),
      pollMs: 1000,
    });
    const jwks = parseAuthOptions({ jwksUrl: 'https://idp.example/jwks' }, '/conf').key;
    expect(jwks).toMatchObject({ kind: 'jwks', cacheMaxAgeMs: 600_000, cooldownMs: 30_000, timeoutMs: 3000, failureBackoffMs: 1000 });
    expect(parseAclOptions({})).toEqual({ standalone: false });
  });

  it.each<[string, Record<string, unknown>, RegExp]>([
    ['no key source', {}, /options\.secret is missing: give exactly one of secret, publicKeyFile or jwksUrl/],
    ['two key sources', { secret: SECRET, jwksUrl: 'https://x/jwks' }, /options\.secret\/jwksUrl are exclusive/],
    ['a short secret', { secret: 'short' }, /options\.secret must be at least 32 bytes long \(got 5; the value is not shown\)/],
    ['a secret that is not a string', { secret: 42 }, /options\.secret must be a string/],
    ['an empty publicKeyFile', { publicKeyFile: ' ' }, /options\.publicKeyFile must be a non-empty string/],
    ['a jwksUrl that is not a URL', { jwksUrl: 'idp/jwks' }, /options\.jwksUrl must be an absolute http\(s\) URL/],
    ['a jwksUrl of another scheme', { jwksUrl: 'ftp://idp/jwks' }, /options\.jwksUrl must be an http\(s\) URL/],
    ['plain http to a remote host', { jwksUrl: 'http://idp.example/jwks' }, /options\.jwksUrl must use https/],
    ['jwks without jwksUrl', { secret: SECRET, jwks: {} }, /options\.jwks only applies with jwksUrl/],
    [
      'keyFilePollMs without publicKeyFile',
      { secret: SECRET, keyFilePollMs: 100 },
      /options\.keyFilePollMs only applies with publicKeyFile/,
    ],
    ['an unknown jwks key', { jwksUrl: 'https://x/jwks', jwks: { cacheMaxAge: 1 } }, /options\.jwks\.cacheMaxAge is not an option/],
    [
      'a bad jwks.cooldownMs',
      { jwksUrl: 'https://x/jwks', jwks: { cooldownMs: -1 } },
      /options\.jwks\.cooldownMs must be an integer from 0/,
    ],
    ['a bad jwks.timeoutMs', { jwksUrl: 'https://x/jwks', jwks: { timeoutMs: 'fast' } }, /options\.jwks\.timeoutMs must be an integer/],
    ['jwks not a mapping', { jwksUrl: 'https://x/jwks', jwks: [1] }, /options\.jwks must be a mapping/],
    ['an unknown option', { secret: SECRET, audiance: 'x' }, /options\.audiance is not an option \(known: secret, /],
    ['algorithms none', { secret: SECRET, algorithms: ['HS256', 'none'] }, /options\.algorithms\[1\] must not be "none"/],
    ['an unknown algorithm', { secret: SECRET, algorithms: ['HS1'] }, /options\.algorithms\[0\] must be one of HS256/],
    ['an RSA algorithm with a secret', { secret: SECRET, algorithms: ['RS256'] }, /options\.algorithms\[0\] must be an HMAC algorithm/],
    [
      'an HMAC algorithm with a JWKS',
      { jwksUrl: 'https://x/jwks', algorithms: ['HS256'] },
      /options\.algorithms\[0\] must be a public key algorithm .* with jwksUrl/,
    ],
    ['empty algorithms', { secret: SECRET, algorithms: [] }, /options\.algorithms must be a non-empty list/],
    ['a bad issuer', { secret: SECRET, issuer: 5 }, /options\.issuer must be a non-empty string or a non-empty list/],
    ['an empty audience list', { secret: SECRET, audience: [] }, /options\.audience must be a non-empty string or a non-empty list/],
    [
      'a fractional clockSkewSeconds',
      { secret: SECRET, clockSkewSeconds: 1.5 },
      /options\.clockSkewSeconds must be an integer from 0 to 600 \(got number 1.5\)/,
    ],
    ['a huge clockSkewSeconds', { secret: SECRET, clockSkewSeconds: 3600 }, /options\.clockSkewSeconds must be an integer from 0 to 600/],
    ['requireExp not a boolean', { secret: SECRET, requireExp: 'yes' }, /options\.requireExp must be true or false \(got "yes"\)/],
    ['an empty tenantClaim', { secret: SECRET, tenantClaim: '' }, /options\.tenantClaim must be a non-empty string/],
    ['a bad userClaim', { secret: SECRET, userClaim: 1 }, /options\.userClaim must be a non-empty string/],
    ['a bad aclClaim', { secret: SECRET, aclClaim: [] }, /options\.aclClaim must be a non-empty string/],
    ['a bad defaultTenant', { secret: SECRET, defaultTenant: '' }, /options\.defaultTenant must be a non-empty string/],
    [
      'attrsClaims to bifro.acl',
      { secret: SECRET, attrsClaims: { roles: 'bifro.acl' } },
      /options\.attrsClaims\.roles must not name the attribute bifro\.acl/,
    ],
    ['attrsClaims not strings', { secret: SECRET, attrsClaims: ['role', 3] }, /options\.attrsClaims\[1\] must be a claim name/],
    ['attrsClaims twice', { secret: SECRET, attrsClaims: { a: 'x', b: 'x' } }, /options\.attrsClaims\.b names the attribute "x" twice/],
    ['attrsClaims a string', { secret: SECRET, attrsClaims: 'role' }, /options\.attrsClaims must be a mapping/],
    ['an empty authMethod', { secret: SECRET, authMethod: '' }, /options\.authMethod must be a non-empty string/],
    ['a tiny maxTokenBytes', { secret: SECRET, maxTokenBytes: 10 }, /options\.maxTokenBytes must be an integer from 256 to 65535/],
    ['a bad keyFilePollMs', { publicKeyFile: 'k.pem', keyFilePollMs: 5 }, /options\.keyFilePollMs must be an integer from 100/],
  ])('refuses %s, naming the plugin and the key', (_label, options, pattern) => {
    const message = authError(options);
    expect(message.startsWith(`${CODE}: @bifro/plugin-auth-jwt: options.`)).toBe(true);
    expect(message).toMatch(pattern);
  });

  it('never shows the secret in a message', () => {
    const secret = 'tiny-secret-value';
    expect(authError({ secret })).not.toContain(secret);
    expect(authError({ secret: SECRET, algorithms: ['RS256'] })).not.toContain(SECRET);
  });

  it('accepts plain http to a loopback host, or anywhere with jwks.allowHttp', () => {
    expect(parseAuthOptions({ jwksUrl: 'http://127.0.0.1:8080/jwks' }, '/').key.kind).toBe('jwks');
    expect(parseAuthOptions({ jwksUrl: 'http://localhost/jwks' }, '/').key.kind).toBe('jwks');
    expect(parseAuthOptions({ jwksUrl: 'http://[::1]/jwks' }, '/').key.kind).toBe('jwks');
    expect(parseAuthOptions({ jwksUrl: 'http://idp.internal/jwks', jwks: { allowHttp: true } }, '/').key.kind).toBe('jwks');
  });

  it('acl options: standalone must be a boolean, nothing else is known', () => {
    expect(parseAclOptions({ standalone: true })).toEqual({ standalone: true });
    expect(() => plugin.acl(testPluginContext({ options: { standalone: 'yes' } }))).toThrow(
      /^BIFRO_AUTH_JWT_OPTIONS_INVALID: @bifro\/plugin-auth-jwt: options\.standalone must be true or false/,
    );
    expect(() => plugin.acl(testPluginContext({ options: { secret: SECRET } }))).toThrow(
      /options\.secret is not an option \(known: standalone\)/,
    );
  });

  it('declares every code its sources use, each with a summary and a remedy', () => {
    expect(plugin.errors).toBe(JWT_ERRORS);
    for (const [code, spec] of Object.entries(JWT_ERRORS)) {
      expect(code).toMatch(/^BIFRO_AUTH_JWT_[A-Z_]+$/);
      expect(spec.summary.length).toBeGreaterThan(10);
      expect(spec.remedy.length).toBeGreaterThan(10);
    }
  });
});
