import { generateKeyPairSync } from 'node:crypto';
import * as fs from 'node:fs';
import * as http from 'node:http';
import * as path from 'node:path';
import { parseKeyFile } from '../src/keys';
import { claims, cleanup, JwksServer, keyPair, makeTempDir, onCleanup, provider, sign, sleep, withPassword } from './helpers';

afterEach(cleanup);

function tempDir(): string {
  const dir = makeTempDir();
  onCleanup(() => fs.rmSync(dir, { recursive: true, force: true }));
  return dir;
}

async function jwks(keys: Parameters<typeof JwksServer.start>[0] = []): Promise<JwksServer> {
  const server = await JwksServer.start(keys);
  onCleanup(() => server.stop());
  return server;
}

describe('auth-jwt: publicKeyFile formats', () => {
  it('reads PEM SPKI, PKCS#1 RSA, a certificate-free JWK and a JWKS; defaults the algorithms per key type', async () => {
    const rsa = generateKeyPairSync('rsa', { modulusLength: 2048 });
    expect(parseKeyFile(rsa.publicKey.export({ type: 'spki', format: 'pem' }).toString()).algorithms).toEqual([
      'RS256',
      'RS384',
      'RS512',
      'PS256',
      'PS384',
      'PS512',
    ]);
    expect(parseKeyFile(rsa.publicKey.export({ type: 'pkcs1', format: 'pem' }).toString()).jwks.keys[0]).toMatchObject({ kty: 'RSA' });
    const p384 = generateKeyPairSync('ec', { namedCurve: 'P-384' });
    expect(parseKeyFile(p384.publicKey.export({ type: 'spki', format: 'pem' }).toString()).algorithms).toEqual(['ES384']);
    const ed = generateKeyPairSync('ed25519');
    expect(parseKeyFile(ed.publicKey.export({ type: 'spki', format: 'pem' }).toString()).algorithms).toEqual(['EdDSA', 'Ed25519']);
    const es = await keyPair('ES256');
    expect(parseKeyFile(JSON.stringify(es.jwk))).toMatchObject({ algorithms: ['ES256'], jwks: { keys: [{ kid: es.kid }] } });
    expect(parseKeyFile(JSON.stringify({ keys: [es.jwk, { ...(await keyPair('RS256')).jwk }] })).algorithms).toEqual(['ES256', 'RS256']);
  });

  it('refuses private keys, symmetric keys, unsupported curves, garbage and an empty set, saying which', () => {
    const rsa = generateKeyPairSync('rsa', { modulusLength: 2048 });
    expect(() => parseKeyFile(rsa.privateKey.export({ type: 'pkcs8', format: 'pem' }).toString())).toThrow(
      /PEM block 1 \(PRIVATE KEY\) is a private key/,
    );
    const privJwk = rsa.privateKey.export({ format: 'jwk' });
    expect(() => parseKeyFile(JSON.stringify({ keys: [privJwk] }))).toThrow(/keys\[0\] is a private key/);
    expect(() => parseKeyFile(JSON.stringify({ kty: 'oct', k: 'c2VjcmV0' }))).toThrow(/symmetric key/);
    const k1 = generateKeyPairSync('ec', { namedCurve: 'secp256k1' });
    expect(() => parseKeyFile(JSON.stringify(k1.publicKey.export({ format: 'jwk' })))).toThrow(/curve "secp256k1"/);
    expect(() => parseKeyFile('hello')).toThrow(/holds no key/);
    expect(() => parseKeyFile('{"keys": []}')).toThrow(/empty "keys" list/);
    expect(() => parseKeyFile('{"keys": [')).toThrow(/not valid JSON/);
    expect(() => parseKeyFile('-----BEGIN PUBLIC KEY-----\nAAAA\n-----END PUBLIC KEY-----')).toThrow(
      /PEM block 1 \(PUBLIC KEY\) cannot be read/,
    );
    expect(() => parseKeyFile(JSON.stringify({ kty: 'RSA', n: 'AQAB', e: 'AQAB', alg: 'HS256' }))).toThrow(/alg "HS256"/);
    const es = generateKeyPairSync('ec', { namedCurve: 'P-256' }).publicKey.export({ format: 'jwk' });
    expect(() => parseKeyFile(JSON.stringify({ ...es, alg: 'ES384' }))).toThrow(/has alg ES384, which does not fit its key type \(ES256\)/);
  });

  it('keys without kid (PEM, or a JWK without one) verify tokens whatever their kid; a kid of the file picks its key', async () => {
    const dir = tempDir();
    const a = await keyPair('ES256', 'a');
    const b = await keyPair('ES256');
    const { kid: _kid, ...bWithoutKid } = b.jwk;
    fs.writeFileSync(path.join(dir, 'keys.json'), JSON.stringify({ keys: [a.jwk, bWithoutKid] }));
    const { auth } = await provider({ publicKeyFile: 'keys.json' }, dir);
    const ok = async (key: typeof a, header: Record<string, unknown>): Promise<string> =>
      (await auth.authenticate(withPassword(await sign(key.privateKey, 'ES256', claims(), header)))).type;
    expect(await ok(a, { kid: 'a' })).toBe('ok');
    expect(await ok(a, {})).toBe('ok');
    expect(await ok(b, {})).toBe('ok');
    expect(await ok(b, { kid: 'whatever' })).toBe('ok');
    expect(await ok(b, { kid: 'a' })).toBe('reject');
    fs.writeFileSync(path.join(dir, 'key.pem'), a.pem);
    const { auth: pem } = await provider({ publicKeyFile: 'key.pem' }, dir);
    expect((await pem.authenticate(withPassword(await sign(a.privateKey, 'ES256', claims(), { kid: 'from-the-idp' })))).type).toBe('ok');
  });

  it('a bad file fails init with BIFRO_AUTH_JWT_KEY_INVALID naming the file; algorithms must fit a key', async () => {
    const dir = tempDir();
    await expect(provider({ publicKeyFile: 'missing.pem' }, dir)).rejects.toThrow(
      new RegExp(`^BIFRO_AUTH_JWT_KEY_INVALID: @bifro/plugin-auth-jwt: publicKeyFile ${path.join(dir, 'missing.pem')} cannot be read`),
    );
    const es = await keyPair('ES256');
    fs.writeFileSync(path.join(dir, 'es.pem'), es.pem);
    await expect(provider({ publicKeyFile: 'es.pem', algorithms: ['RS256'] }, dir)).rejects.toMatchObject({
      code: 'BIFRO_AUTH_JWT_KEY_INVALID',
      message: expect.stringMatching(/holds keys for ES256, none of which is in options.algorithms \(RS256\)/),
    });
    const rsa1024 = generateKeyPairSync('rsa', { modulusLength: 1024 });
    fs.writeFileSync(path.join(dir, 'weak.pem'), rsa1024.publicKey.export({ type: 'spki', format: 'pem' }));
    await expect(provider({ publicKeyFile: 'weak.pem' }, dir)).rejects.toThrow(/PEM block 1 \(PUBLIC KEY\) is an RSA key of 1024 bits/);
  });

  it('reloads the file when it changes (key rotation); a bad new content keeps the previous keys', async () => {
    const dir = tempDir();
    const file = path.join(dir, 'keys.json');
    const a = await keyPair('ES256');
    const b = await keyPair('ES256');
    fs.writeFileSync(file, JSON.stringify({ keys: [a.jwk] }));
    const { auth, ctx } = await provider({ publicKeyFile: file, keyFilePollMs: 100 });
    const byB = await sign(b.privateKey, 'ES256', claims(), { kid: b.kid });
    expect(await auth.authenticate(withPassword(byB))).toMatchObject({ type: 'reject', reason: 'badCredentials' });
    fs.writeFileSync(file, JSON.stringify({ keys: [a.jwk, b.jwk] }));
    const deadline = Date.now() + 3000;
    while ((await auth.authenticate(withPassword(byB))).type !== 'ok') {
      if (Date.now() > deadline) throw new Error('the new key was not picked up within 3 s');
      await sleep(50);
    }
    expect(ctx.logged.some((l) => l.level === 'info' && l.msg.startsWith('reloaded 2 key(s)'))).toBe(true);
    fs.writeFileSync(file, '{ broken');
    const until = Date.now() + 3000;
    while (!ctx.logged.some((l) => l.level === 'warn' && l.msg.startsWith('BIFRO_AUTH_JWT_KEY_INVALID'))) {
      if (Date.now() > until) throw new Error('no warning for the broken key file');
      await sleep(50);
    }
    expect((await auth.authenticate(withPassword(byB))).type).toBe('ok');
  });
});

describe('auth-jwt: jwksUrl', () => {
  it('verifies with the fetched keys, caches them (one fetch for many tokens) and fetches at init', async () => {
    const a = await keyPair('RS256');
    const server = await jwks([a.jwk]);
    const { auth } = await provider({ jwksUrl: server.url });
    expect(server.requests).toBe(1);
    for (let i = 0; i < 5; i++) {
      expect((await auth.authenticate(withPassword(await sign(a.privateKey, 'RS256', claims(), { kid: a.kid })))).type).toBe('ok');
    }
    expect(server.requests).toBe(1);
  });

  it('key rotation: an unknown kid triggers a refresh, at most once per cooldown however many tokens arrive', async () => {
    const a = await keyPair('ES256');
    const server = await jwks([a.jwk]);
    const { auth } = await provider({ jwksUrl: server.url, jwks: { cooldownMs: 0 } });
    expect(server.requests).toBe(1);
    const b = await keyPair('ES256');
    server.keys = [a.jwk, b.jwk];
    expect((await auth.authenticate(withPassword(await sign(b.privateKey, 'ES256', claims(), { kid: b.kid })))).type).toBe('ok');
    expect(server.requests).toBe(2);

    const { auth: limited } = await provider({ jwksUrl: server.url, jwks: { cooldownMs: 60_000 } });
    const before = server.requests;
    const strangers = await Promise.all(
      Array.from({ length: 20 }, async (_, i) => sign(a.privateKey, 'ES256', claims(), { kid: `unknown-${i}` })),
    );
    const results = await Promise.all(strangers.map((t) => limited.authenticate(withPassword(t))));
    for (const r of results) expect(r).toMatchObject({ type: 'reject', reason: 'badCredentials' });
    // Fetched at init; a refresh for an unknown kid waits for the cooldown after it.
    expect(server.requests - before).toBe(0);
  });

  it('a refresh for unknown kids after the cooldown is one fetch, shared by concurrent tokens', async () => {
    const a = await keyPair('ES256');
    const server = await jwks([a.jwk]);
    const { auth } = await provider({ jwksUrl: server.url, jwks: { cooldownMs: 200 } });
    await sleep(250);
    const before = server.requests;
    const tokens = await Promise.all(
      Array.from({ length: 20 }, async (_, i) => sign(a.privateKey, 'ES256', claims(), { kid: `unknown-${i}` })),
    );
    await Promise.all(tokens.map((t) => auth.authenticate(withPassword(t))));
    expect(server.requests - before).toBe(1);
  });

  it('JWKS down: refused with error (fail closed), logged once with BIFRO_AUTH_JWT_JWKS_UNAVAILABLE; not refetched within failureBackoffMs', async () => {
    const a = await keyPair('EdDSA');
    const server = await jwks([a.jwk]);
    server.up = false;
    const { auth, ctx } = await provider({ jwksUrl: server.url, jwks: { failureBackoffMs: 60_000 } });
    expect(server.requests).toBe(1);
    const token = await sign(a.privateKey, 'EdDSA', claims(), { kid: a.kid });
    for (let i = 0; i < 5; i++) {
      expect(await auth.authenticate(withPassword(token))).toMatchObject({ type: 'reject', reason: 'error' });
    }
    expect(server.requests).toBe(1);
    expect(ctx.logged.filter((l) => l.level === 'warn' && l.msg.startsWith('BIFRO_AUTH_JWT_JWKS_UNAVAILABLE'))).toHaveLength(1);
  });

  it('JWKS back after the backoff: accepted again (and the recovery is logged); a garbage answer is an error too', async () => {
    const a = await keyPair('ES256');
    const server = await jwks([a.jwk]);
    server.up = false;
    const { auth, ctx } = await provider({ jwksUrl: server.url, jwks: { failureBackoffMs: 100 } });
    const token = await sign(a.privateKey, 'ES256', claims(), { kid: a.kid });
    expect(await auth.authenticate(withPassword(token))).toMatchObject({ type: 'reject', reason: 'error' });
    server.up = true;
    await sleep(150);
    expect((await auth.authenticate(withPassword(token))).type).toBe('ok');
    expect(ctx.logged.some((l) => l.level === 'info' && l.msg.includes('answers again'))).toBe(true);

    const broken = await jwks();
    broken.body = '{"keys": "nope"}';
    const { auth: second } = await provider({ jwksUrl: broken.url });
    expect(await second.authenticate(withPassword(token))).toMatchObject({ type: 'reject', reason: 'error' });
  });

  it('a JWKS that does not answer in timeoutMs is an error, bounded in time', async () => {
    const a = await keyPair('ES256');
    const hang = http.createServer(() => undefined);
    await new Promise<void>((resolve) => hang.listen(0, '127.0.0.1', resolve));
    onCleanup(
      () =>
        new Promise<void>((resolve) => {
          hang.closeAllConnections();
          hang.close(() => resolve());
        }),
    );
    const port = (hang.address() as { port: number }).port;
    const started = Date.now();
    const { auth } = await provider({ jwksUrl: `http://127.0.0.1:${port}/jwks`, jwks: { timeoutMs: 200, failureBackoffMs: 0 } });
    const token = await sign(a.privateKey, 'ES256', claims(), { kid: a.kid });
    expect(await auth.authenticate(withPassword(token))).toMatchObject({ type: 'reject', reason: 'error' });
    expect(Date.now() - started).toBeLessThan(2000);
  });
});
