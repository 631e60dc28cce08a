import * as fs from 'node:fs';
import * as path from 'node:path';
import { ACL_RULES_ATTR, type AuthResult, type ExtendedAuthRequest } from '@bifro/spi';
import { sampleAuthRequest, sampleClient } from '@bifro/spi/testing';
import { tokenOf } from '../src/jwt-auth';
import { claims, cleanup, keyPair, makeTempDir, nowSeconds, onCleanup, provider, SECRET, sign, tamper, withPassword } from './helpers';

afterEach(cleanup);

function expectOk(r: AuthResult): Extract<AuthResult, { type: 'ok' }> {
  if (r.type !== 'ok') throw new Error(`expected ok, got ${JSON.stringify(r)}`);
  return r;
}

function expectReject(r: AuthResult, reason: string, text?: RegExp): void {
  expect(r).toMatchObject({ type: 'reject', reason });
  if (text !== undefined && r.type === 'reject') expect(r.text).toMatch(text);
}

describe('auth-jwt: algorithms', () => {
  it.each(['HS256', 'HS384', 'HS512'])('%s with a secret: accepted as the claims say, expiresAt = exp * 1000', async (alg) => {
    const { auth } = await provider({ secret: SECRET });
    const c = claims();
    const r = expectOk(await auth.authenticate(withPassword(await sign(SECRET, alg, c))));
    expect(r).toMatchObject({ tenantId: 'acme', userId: 'alice', expiresAt: (c.exp as number) * 1000 });
    // The same token signed with another secret is refused.
    const other = await sign('another-secret-that-is-long-enough-0123456789', alg, c);
    expectReject(await auth.authenticate(withPassword(other)), 'badCredentials', /signature/);
  });

  it.each(['RS256', 'ES256', 'EdDSA', 'PS256', 'ES384', 'Ed25519'])('%s with a PEM public key file', async (alg) => {
    const dir = makeTempDir();
    onCleanup(() => fs.rmSync(dir, { recursive: true, force: true }));
    const kp = await keyPair(alg);
    fs.writeFileSync(path.join(dir, 'key.pem'), kp.pem);
    const { auth } = await provider({ publicKeyFile: 'key.pem' }, dir);
    expectOk(await auth.authenticate(withPassword(await sign(kp.privateKey, alg, claims()))));
    const stranger = await keyPair(alg);
    expectReject(await auth.authenticate(withPassword(await sign(stranger.privateKey, alg, claims()))), 'badCredentials', /signature/);
  });

  it.each(['RS256', 'ES256', 'EdDSA'])('%s with a JWKS file: the key is chosen by kid', async (alg) => {
    const dir = makeTempDir();
    onCleanup(() => fs.rmSync(dir, { recursive: true, force: true }));
    const a = await keyPair(alg);
    const b = await keyPair(alg);
    fs.writeFileSync(path.join(dir, 'jwks.json'), JSON.stringify({ keys: [a.jwk, b.jwk] }));
    const { auth } = await provider({ publicKeyFile: path.join(dir, 'jwks.json') });
    expectOk(await auth.authenticate(withPassword(await sign(a.privateKey, alg, claims(), { kid: a.kid }))));
    expectOk(await auth.authenticate(withPassword(await sign(b.privateKey, alg, claims(), { kid: b.kid }))));
    // Signed by a but naming b's kid: b's key does not verify it.
    expectReject(
      await auth.authenticate(withPassword(await sign(a.privateKey, alg, claims(), { kid: b.kid }))),
      'badCredentials',
      /signature/,
    );
    expectReject(
      await auth.authenticate(withPassword(await sign(a.privateKey, alg, claims(), { kid: 'nope' }))),
      'badCredentials',
      /no key/,
    );
  });

  it('a token without kid is tried against every key of its type (two PEM keys)', async () => {
    const dir = makeTempDir();
    onCleanup(() => fs.rmSync(dir, { recursive: true, force: true }));
    const a = await keyPair('ES256');
    const b = await keyPair('ES256');
    fs.writeFileSync(path.join(dir, 'keys.pem'), `${a.pem}\n${b.pem}`);
    const { auth } = await provider({ publicKeyFile: path.join(dir, 'keys.pem') });
    expectOk(await auth.authenticate(withPassword(await sign(a.privateKey, 'ES256', claims()))));
    expectOk(await auth.authenticate(withPassword(await sign(b.privateKey, 'ES256', claims()))));
    const c = await keyPair('ES256');
    expectReject(await auth.authenticate(withPassword(await sign(c.privateKey, 'ES256', claims()))), 'badCredentials', /signature/);
  });

  it('an algorithm outside the allow-list is refused, even with the right key', async () => {
    const { auth } = await provider({ secret: SECRET, algorithms: ['HS256'] });
    expectOk(await auth.authenticate(withPassword(await sign(SECRET, 'HS256', claims()))));
    expectReject(await auth.authenticate(withPassword(await sign(SECRET, 'HS512', claims()))), 'badCredentials', /algorithm not allowed/);
  });

  it('a public-key token is refused by a secret provider, and an HMAC token by a public key provider (no algorithm confusion)', async () => {
    const dir = makeTempDir();
    onCleanup(() => fs.rmSync(dir, { recursive: true, force: true }));
    const kp = await keyPair('RS256');
    fs.writeFileSync(path.join(dir, 'key.pem'), kp.pem);
    const { auth: byKey } = await provider({ publicKeyFile: path.join(dir, 'key.pem') });
    // HS256 "signed" with the public key's PEM text as the secret: the classic confusion attack.
    expectReject(await byKey.authenticate(withPassword(await sign(kp.pem, 'HS256', claims()))), 'badCredentials', /algorithm not allowed/);
    const { auth: bySecret } = await provider({ secret: SECRET });
    expectReject(await bySecret.authenticate(withPassword(await sign(kp.privateKey, 'RS256', claims()))), 'badCredentials', /algorithm/);
  });

  it('an unsigned token (alg none) is refused', async () => {
    const { auth } = await provider({ secret: SECRET });
    const b64 = (o: object): string => Buffer.from(JSON.stringify(o)).toString('base64url');
    const unsigned = `${b64({ alg: 'none', typ: 'JWT' })}.${b64(claims())}.`;
    expectReject(await auth.authenticate(withPassword(unsigned)), 'badCredentials');
  });

  it('a tampered signature or payload is refused', async () => {
    const { auth } = await provider({ secret: SECRET });
    const token = await sign(SECRET, 'HS256', claims());
    expectReject(await auth.authenticate(withPassword(tamper(token))), 'badCredentials', /signature/);
    const [h, , s] = token.split('.');
    const forged = `${h}.${Buffer.from(JSON.stringify(claims({ tenant: 'other' }))).toString('base64url')}.${s}`;
    expectReject(await auth.authenticate(withPassword(forged)), 'badCredentials', /signature/);
  });
});

describe('auth-jwt: claims checks', () => {
  it('issuer and audience: a match is accepted, a mismatch is notAuthorized, a missing one too', async () => {
    const { auth } = await provider({ secret: SECRET, issuer: 'https://idp.example', audience: ['mqtt', 'broker'] });
    expectOk(await auth.authenticate(withPassword(await sign(SECRET, 'HS256', claims({ iss: 'https://idp.example', aud: 'broker' })))));
    expectReject(
      await auth.authenticate(withPassword(await sign(SECRET, 'HS256', claims({ iss: 'https://evil.example', aud: 'mqtt' })))),
      'notAuthorized',
      /issuer/,
    );
    expectReject(
      await auth.authenticate(withPassword(await sign(SECRET, 'HS256', claims({ iss: 'https://idp.example', aud: 'web' })))),
      'notAuthorized',
      /audience/,
    );
    expectReject(await auth.authenticate(withPassword(await sign(SECRET, 'HS256', claims({ aud: 'mqtt' })))), 'notAuthorized', /issuer/);
  });

  it('expired: refused; within the clock skew: accepted', async () => {
    const { auth } = await provider({ secret: SECRET, clockSkewSeconds: 30 });
    const now = nowSeconds();
    expectReject(
      await auth.authenticate(withPassword(await sign(SECRET, 'HS256', claims({ exp: now - 120 })))),
      'badCredentials',
      /expired/,
    );
    expectOk(await auth.authenticate(withPassword(await sign(SECRET, 'HS256', claims({ exp: now - 10 })))));
    const { auth: strict } = await provider({ secret: SECRET, clockSkewSeconds: 0 });
    expectReject(
      await strict.authenticate(withPassword(await sign(SECRET, 'HS256', claims({ exp: now - 2 })))),
      'badCredentials',
      /expired/,
    );
  });

  it('nbf in the future: refused without skew, accepted within the skew, refused beyond it', async () => {
    const now = nowSeconds();
    const soon = await sign(SECRET, 'HS256', claims({ nbf: now + 10 }));
    const { auth: strict } = await provider({ secret: SECRET, clockSkewSeconds: 0 });
    expectReject(await strict.authenticate(withPassword(soon)), 'badCredentials', /not valid yet/);
    const { auth: lenient } = await provider({ secret: SECRET, clockSkewSeconds: 30 });
    expectOk(await lenient.authenticate(withPassword(soon)));
    expectReject(
      await lenient.authenticate(withPassword(await sign(SECRET, 'HS256', claims({ nbf: now + 120 })))),
      'badCredentials',
      /not valid yet/,
    );
  });

  it('exp is required by default; requireExp: false accepts a token without it (no expiresAt)', async () => {
    const noExp = await sign(SECRET, 'HS256', { sub: 'alice', tenant: 'acme' });
    const { auth } = await provider({ secret: SECRET });
    expectReject(await auth.authenticate(withPassword(noExp)), 'badCredentials', /no exp claim/);
    const { auth: lax } = await provider({ secret: SECRET, requireExp: false });
    const r = expectOk(await lax.authenticate(withPassword(noExp)));
    expect(r.expiresAt).toBeUndefined();
    expect('expiresAt' in r).toBe(false);
  });

  it('a non-numeric exp is refused', async () => {
    const { auth } = await provider({ secret: SECRET });
    expectReject(
      await auth.authenticate(withPassword(await sign(SECRET, 'HS256', claims({ exp: 'tomorrow' as unknown as number })))),
      'badCredentials',
    );
  });

  it('missing user or tenant claims are refused (notAuthorized); defaultTenant fills a missing tenant', async () => {
    const { auth } = await provider({ secret: SECRET });
    const { sub: _sub, ...noSub } = claims();
    expectReject(await auth.authenticate(withPassword(await sign(SECRET, 'HS256', noSub))), 'notAuthorized', /sub claim/);
    const { tenant: _tenant, ...noTenant } = claims();
    expectReject(await auth.authenticate(withPassword(await sign(SECRET, 'HS256', noTenant))), 'notAuthorized', /tenant claim/);
    expectReject(await auth.authenticate(withPassword(await sign(SECRET, 'HS256', claims({ tenant: '' })))), 'notAuthorized', /tenant/);
    expectReject(
      await auth.authenticate(withPassword(await sign(SECRET, 'HS256', claims({ sub: { id: 1 } as unknown as string })))),
      'notAuthorized',
    );
    const { auth: withDefault } = await provider({ secret: SECRET, defaultTenant: 'shared' });
    expect(expectOk(await withDefault.authenticate(withPassword(await sign(SECRET, 'HS256', noTenant))))).toMatchObject({
      tenantId: 'shared',
      userId: 'alice',
    });
    // A tenant claim that is present but unusable is not replaced by the default.
    expectReject(
      await withDefault.authenticate(withPassword(await sign(SECRET, 'HS256', claims({ tenant: ['a'] as unknown as string })))),
      'notAuthorized',
    );
  });

  it('tenantClaim, userClaim and attrsClaims map other claims', async () => {
    const { auth } = await provider({
      secret: SECRET,
      tenantClaim: 'https://bifro.io/tenant',
      userClaim: 'client_id',
      attrsClaims: { role: 'role', groups: 'groups', level: 'level' },
    });
    const token = await sign(SECRET, 'HS256', {
      ...claims(),
      'https://bifro.io/tenant': 'globex',
      client_id: 'device-7',
      role: 'admin',
      groups: ['a', 'b'],
      level: 3,
    });
    const r = expectOk(await auth.authenticate(withPassword(token)));
    expect(r).toMatchObject({ tenantId: 'globex', userId: 'device-7', attrs: { role: 'admin', groups: '["a","b"]', level: '3' } });
    const { auth: listed } = await provider({ secret: SECRET, attrsClaims: ['role', 'email'] });
    const viewer = await sign(SECRET, 'HS256', claims({ role: 'viewer' }));
    expect(expectOk(await listed.authenticate(withPassword(viewer))).attrs).toEqual({ role: 'viewer' });
  });

  it('the acl claim becomes the bifro.acl attribute; a malformed one refuses the token', async () => {
    const { auth } = await provider({ secret: SECRET });
    const acl = [
      { permission: 'allow', action: 'publish', topic: 'devices/%u/#' },
      { permission: 'deny', action: 'all', topic: '#' },
    ];
    const r = expectOk(await auth.authenticate(withPassword(await sign(SECRET, 'HS256', claims({ acl })))));
    expect(JSON.parse(r.attrs![ACL_RULES_ATTR]!)).toEqual(acl);
    expect(expectOk(await auth.authenticate(withPassword(await sign(SECRET, 'HS256', claims())))).attrs).toEqual({});
    expectReject(
      await auth.authenticate(
        withPassword(await sign(SECRET, 'HS256', claims({ acl: [{ permission: 'allow', action: 'pub', topic: 'x' }] }))),
      ),
      'notAuthorized',
      /token claim acl\[0\]\.action/,
    );
    expectReject(await auth.authenticate(withPassword(await sign(SECRET, 'HS256', claims({ acl: 'everything' })))), 'notAuthorized', /acl/);
    const { auth: other } = await provider({ secret: SECRET, aclClaim: 'mqtt_acl' });
    const r2 = expectOk(await other.authenticate(withPassword(await sign(SECRET, 'HS256', claims({ mqtt_acl: acl, acl: 'ignored' })))));
    expect(JSON.parse(r2.attrs![ACL_RULES_ATTR]!)).toEqual(acl);
  });
});

describe('auth-jwt: what is not a token', () => {
  it('defers without a password, with an empty one, a plain one, or bytes that are not UTF-8', async () => {
    const { auth } = await provider({ secret: SECRET });
    for (const password of [
      undefined,
      new Uint8Array(),
      Buffer.from('hunter2'),
      Buffer.from('a.b.c'),
      Uint8Array.from([0xff, 0xfe, 0x2e]),
    ]) {
      expect(await auth.authenticate(sampleAuthRequest(password === undefined ? {} : { password }))).toEqual({ type: 'defer' });
    }
    expect(tokenOf(Buffer.from(' eyJhbGciOiJIUzI1NiJ9.e30.sig \n'))).toBe('eyJhbGciOiJIUzI1NiJ9.e30.sig');
  });

  it('refuses JWT-shaped garbage as malformed, and a token above maxTokenBytes', async () => {
    const { auth } = await provider({ secret: SECRET, maxTokenBytes: 512 });
    const header = Buffer.from('{"alg":"HS256"}').toString('base64url');
    expectReject(await auth.authenticate(withPassword(`${header}.bm90LWpzb24.c2ln`)), 'badCredentials');
    expectReject(
      await auth.authenticate(withPassword(`${Buffer.from('{not json').toString('base64url')}.e30.c2ln`)),
      'badCredentials',
      /malformed/,
    );
    const big = await sign(SECRET, 'HS256', claims({ pad: 'x'.repeat(600) }));
    expectReject(await auth.authenticate(withPassword(big)), 'badCredentials', /longer than 512 bytes/);
  });
});

describe('auth-jwt: MQTT 5 enhanced authentication', () => {
  function ext(
    phase: ExtendedAuthRequest['phase'],
    data: Uint8Array | undefined,
    extra: Partial<ExtendedAuthRequest> = {},
  ): ExtendedAuthRequest {
    return { ...sampleAuthRequest({ protocolVersion: 5 }), phase, method: 'JWT', data, state: new Map(), ...extra };
  }

  it('declares the JWT method and succeeds on a start with the token as Authentication Data', async () => {
    const { auth } = await provider({ secret: SECRET });
    expect(auth.authMethods).toEqual(['JWT']);
    const c = claims();
    const r = await auth.extendedAuth(ext('start', Buffer.from(await sign(SECRET, 'HS256', c))));
    expect(r).toEqual({ type: 'success', tenantId: 'acme', userId: 'alice', attrs: {}, expiresAt: (c.exp as number) * 1000 });
  });

  it('fails a start with a bad token, without data, and a continue; defers another method', async () => {
    const { auth } = await provider({ secret: SECRET, authMethod: 'jwt-bearer' });
    expect(auth.authMethods).toEqual(['jwt-bearer']);
    const good = Buffer.from(await sign(SECRET, 'HS256', claims()));
    expect(await auth.extendedAuth(ext('start', Buffer.from(tamper(good.toString())), { method: 'jwt-bearer' }))).toMatchObject({
      type: 'failed',
      reason: 'badCredentials',
    });
    expect(await auth.extendedAuth(ext('start', undefined, { method: 'jwt-bearer' }))).toMatchObject({
      type: 'failed',
      reason: 'badCredentials',
    });
    expect(await auth.extendedAuth(ext('continue', good, { method: 'jwt-bearer' }))).toMatchObject({ type: 'failed' });
    expect(await auth.extendedAuth(ext('start', good, { method: 'JWT' }))).toEqual({ type: 'defer' });
  });

  it('re-authentication: a fresh token of the same user moves expiresAt; another user or tenant fails', async () => {
    const { auth } = await provider({ secret: SECRET });
    const client = sampleClient({ tenantId: 'acme', userId: 'alice' });
    const later = claims({ exp: nowSeconds() + 3600 });
    expect(await auth.extendedAuth(ext('reauth', Buffer.from(await sign(SECRET, 'HS256', later)), { client }))).toMatchObject({
      type: 'success',
      expiresAt: (later.exp as number) * 1000,
    });
    expect(
      await auth.extendedAuth(ext('reauth', Buffer.from(await sign(SECRET, 'HS256', claims({ sub: 'bob' }))), { client })),
    ).toMatchObject({
      type: 'failed',
      reason: 'notAuthorized',
    });
    expect(
      await auth.extendedAuth(ext('reauth', Buffer.from(await sign(SECRET, 'HS256', claims({ tenant: 'other' }))), { client })),
    ).toMatchObject({
      type: 'failed',
      reason: 'notAuthorized',
    });
    expect(
      await auth.extendedAuth(ext('reauth', Buffer.from(await sign(SECRET, 'HS256', claims({ exp: nowSeconds() - 300 }))), { client })),
    ).toMatchObject({ type: 'failed', reason: 'badCredentials', text: 'token expired' });
  });

  it('authMethod: false turns enhanced authentication off', async () => {
    const { auth } = await provider({ secret: SECRET, authMethod: false });
    expect(auth.authMethods).toEqual([]);
    expect(await auth.extendedAuth(ext('start', Buffer.from(await sign(SECRET, 'HS256', claims()))))).toEqual({ type: 'defer' });
  });
});
