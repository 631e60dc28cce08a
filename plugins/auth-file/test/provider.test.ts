import { execFileSync } from 'node:child_process';
import { X509Certificate } from 'node:crypto';
import { readFileSync, rmSync } from 'node:fs';
import * as path from 'node:path';
import type { AuthResult, ClientCertificate, ExtendedAuthRequest, ExtendedAuthResult } from '@bifro/spi';
import { sampleAuthRequest, testPluginContext } from '@bifro/spi/testing';
import plugin from '../src';
import { ScramClient, type ScramMethod } from '../src/scram';
import { entryLine, harness, makeTempDir, mosquittoLine, removeTempDir, sleep, waitFor, writeAtomic, type Harness } from './helpers';

/** How long a file change may take to apply in these tests (poll every 50 ms + debounce). */
const APPLY_MS = 3000;

let ALICE: string; // acme:alice / alice-pw, SCRAM credentials, role=admin
let BOB: string; // bob / bob-pw (default tenant)
let CAROL: string; // acme:carol / carol-pw
let open: Harness[] = [];

beforeAll(async () => {
  [ALICE, BOB, CAROL] = await Promise.all([
    entryLine({ tenant: 'acme', user: 'alice', password: 'alice-pw', scram: true, attrs: { role: 'admin' } }),
    entryLine({ user: 'bob', password: 'bob-pw' }),
    entryLine({ tenant: 'acme', user: 'carol', password: 'carol-pw' }),
  ]);
});

afterEach(async () => {
  await Promise.all(open.map((h) => h.dispose()));
  open = [];
});

async function start(text: string, options: Record<string, unknown> = {}): Promise<Harness> {
  const h = await harness(text, options);
  open.push(h);
  return h;
}

function login(h: Harness, username: string | undefined, password?: string): Promise<AuthResult> {
  return Promise.resolve(
    h.provider.authenticate(
      sampleAuthRequest({ username, ...(password === undefined ? {} : { password: Buffer.from(password, 'utf8') }) }),
    ),
  );
}

describe('auth-file: passwords', () => {
  it('accepts the right password as tenant and user of the line, with its attributes', async () => {
    const h = await start(`${ALICE}\n${BOB}\n`);
    expect(await login(h, 'acme/alice', 'alice-pw')).toEqual({ type: 'ok', tenantId: 'acme', userId: 'alice', attrs: { role: 'admin' } });
    expect(await login(h, 'bob', 'bob-pw')).toEqual({ type: 'ok', tenantId: 'default', userId: 'bob', attrs: {} });
    expect(await login(h, 'default/bob', 'bob-pw')).toMatchObject({ type: 'ok', tenantId: 'default', userId: 'bob' });
    expect(h.lines('info').some((l) => l.msg.includes(`${h.file} loaded: 2 user(s), 1 with SCRAM credentials`))).toBe(true);
  });

  it('refuses a wrong or missing password with badCredentials', async () => {
    const h = await start(`${ALICE}\n`);
    expect(await login(h, 'acme/alice', 'wrong')).toMatchObject({ type: 'reject', reason: 'badCredentials' });
    expect(await login(h, 'acme/alice')).toMatchObject({ type: 'reject', reason: 'badCredentials' });
    expect(await login(h, 'acme/alice', '')).toMatchObject({ type: 'reject', reason: 'badCredentials' });
  });

  it('defers unknown users and clients without a user name; unknownUser: reject refuses them', async () => {
    const h = await start(`${ALICE}\n`);
    expect(await login(h, 'mallory', 'x')).toEqual({ type: 'defer' });
    expect(await login(h, 'alice', 'alice-pw')).toEqual({ type: 'defer' }); // alice is acme's, not the default tenant's
    expect(await login(h, undefined)).toEqual({ type: 'defer' });
    const strict = await start(`${ALICE}\n`, { unknownUser: 'reject' });
    expect(await login(strict, 'mallory', 'x')).toMatchObject({ type: 'reject', reason: 'badCredentials' });
    expect(await login(strict, undefined)).toEqual({ type: 'defer' });
  });

  it('an unknown user costs a KDF like a known one (deferred or rejected alike); without a password neither does', async () => {
    for (const unknownUser of ['defer', 'reject'] as const) {
      const h = await start(`${ALICE}\n${BOB}\n`, { unknownUser });
      expect(await login(h, 'mallory', 'x')).toEqual(
        unknownUser === 'defer' ? { type: 'defer' } : { type: 'reject', reason: 'badCredentials', text: 'unknown user mallory' },
      );
      expect(h.provider.kdfRuns).toBe(1);
      await login(h, 'acme/nobody', 'x');
      await login(h, 'bob', 'wrong');
      expect(h.provider.kdfRuns).toBe(3);
      await login(h, 'mallory');
      await login(h, 'bob');
      expect(h.provider.kdfRuns).toBe(3);
    }
  });

  it('uses the tenant option for lines without a tenant (a mosquitto file as it is)', async () => {
    const dir = (await start('')).dir;
    const h = await start(`${mosquittoLine(dir, 'dev1', 'dev1-pw')}\n`, { tenant: 'plant-7' });
    expect(await login(h, 'dev1', 'dev1-pw')).toEqual({ type: 'ok', tenantId: 'plant-7', userId: 'dev1', attrs: {} });
    expect(await login(h, 'plant-7/dev1', 'dev1-pw')).toMatchObject({ type: 'ok' });
    expect(await login(h, 'dev1', 'nope')).toMatchObject({ type: 'reject', reason: 'badCredentials' });
    expect(h.lines('warn').some((l) => l.msg.includes(`${h.file}:1: user dev1 has a $7$ hash of only 101`))).toBe(true);
  });

  it('remembers a successful check: the next CONNECT with the same credentials is answered synchronously', async () => {
    const h = await start(`${BOB}\n`);
    const request = sampleAuthRequest({ username: 'bob', password: Buffer.from('bob-pw') });
    const first = h.provider.authenticate(request);
    expect(first).toBeInstanceOf(Promise);
    expect(await first).toMatchObject({ type: 'ok' });
    const second = h.provider.authenticate(request);
    expect(second).toEqual({ type: 'ok', tenantId: 'default', userId: 'bob', attrs: {} });
    // A wrong password is never answered from the cache.
    const wrong = h.provider.authenticate(sampleAuthRequest({ username: 'bob', password: Buffer.from('bob-pw!') }));
    expect(wrong).toBeInstanceOf(Promise);
    expect(await wrong).toMatchObject({ type: 'reject' });
    expect(h.provider.cachedVerifications).toBe(1);
  });

  it('a storm of the same credentials costs one KDF (checks in flight are shared); cacheTtlMs: 0 turns the cache off', async () => {
    const h = await start(`${BOB}\n`);
    const request = sampleAuthRequest({ username: 'bob', password: Buffer.from('bob-pw') });
    const answers = await Promise.all(Array.from({ length: 20 }, () => h.provider.authenticate(request)));
    expect(answers.every((a) => a.type === 'ok')).toBe(true);
    expect(h.provider.kdfRuns).toBe(1);
    await h.provider.authenticate(request);
    expect(h.provider.kdfRuns).toBe(1);
    // Wrong passwords are each checked.
    await Promise.all([login(h, 'bob', 'x1'), login(h, 'bob', 'x2')]);
    expect(h.provider.kdfRuns).toBe(3);
    const off = await start(`${BOB}\n`, { cacheTtlMs: 0 });
    expect(await off.provider.authenticate(request)).toMatchObject({ type: 'ok' });
    expect(off.provider.authenticate(request)).toBeInstanceOf(Promise);
    expect(off.provider.cachedVerifications).toBe(0);
  });

  it('the cache expires after cacheTtlMs', async () => {
    const h = await start(`${BOB}\n`, { cacheTtlMs: 100 });
    const request = sampleAuthRequest({ username: 'bob', password: Buffer.from('bob-pw') });
    await h.provider.authenticate(request);
    expect(h.provider.authenticate(request)).not.toBeInstanceOf(Promise);
    await sleep(150);
    expect(h.provider.authenticate(request)).toBeInstanceOf(Promise);
  });
});

describe('auth-file: reload', () => {
  it('applies a valid change to the next CONNECT and forgets cached checks', async () => {
    const h = await start(`${BOB}\n`);
    const bob = sampleAuthRequest({ username: 'bob', password: Buffer.from('bob-pw') });
    await h.provider.authenticate(bob);
    expect(h.provider.authenticate(bob)).not.toBeInstanceOf(Promise);
    writeAtomic(h.file, `# bob is gone\n${CAROL}\n`);
    await waitFor(() => h.lines('info').some((l) => l.msg.includes('reloaded: 1 user(s)')), APPLY_MS, 'the reload');
    expect(h.provider.cachedVerifications).toBe(0);
    expect(await h.provider.authenticate(bob)).toEqual({ type: 'defer' });
    expect(await login(h, 'acme/carol', 'carol-pw')).toMatchObject({ type: 'ok', tenantId: 'acme', userId: 'carol' });
  });

  it('keeps the previous users when the new file is invalid, and logs file:line of each problem', async () => {
    const h = await start(`${BOB}\n`);
    writeAtomic(h.file, `${BOB}\n# ok so far\nmallory:plaintext\n${CAROL}\nx:$6$abc$def\n`);
    await waitFor(() => h.lines('warn').some((l) => l.msg.includes('is invalid')), APPLY_MS, 'the warning');
    const warning = h.lines('warn').find((l) => l.msg.includes('is invalid'))!;
    expect(warning.msg).toContain('the previous 1 user(s) stay');
    expect(warning.msg).toContain(`${h.file}:3: the password is not hashed`);
    expect(warning.msg).toContain(`${h.file}:5: user x: a $6$ hash`);
    expect(warning.fields).toMatchObject({ code: 'BIFRO_AUTH_FILE_INVALID', file: h.file });
    expect(await login(h, 'bob', 'bob-pw')).toMatchObject({ type: 'ok' });
    expect(await login(h, 'acme/carol', 'carol-pw')).toEqual({ type: 'defer' });
    // Fixing the file applies it.
    writeAtomic(h.file, `${BOB}\n${CAROL}\n`);
    await waitFor(() => h.lines('info').some((l) => l.msg.includes('reloaded: 2 user(s)')), APPLY_MS, 'the fixed file');
    expect(await login(h, 'acme/carol', 'carol-pw')).toMatchObject({ type: 'ok' });
  });

  it('keeps the users when the file is removed, and picks it up again when it is back', async () => {
    const h = await start(`${BOB}\n`, { watch: false });
    rmSync(h.file);
    await waitFor(() => h.lines('warn').some((l) => l.msg.includes('cannot be read')), APPLY_MS, 'the warning');
    expect(await login(h, 'bob', 'bob-pw')).toMatchObject({ type: 'ok' });
    writeAtomic(h.file, `${CAROL}\n`);
    await waitFor(() => h.lines('info').some((l) => l.msg.includes('reloaded: 1 user(s)')), APPLY_MS, 'the new file');
    expect(await login(h, 'bob', 'bob-pw')).toEqual({ type: 'defer' });
  });

  it('fails init on a missing or invalid file with a coded error naming the file and line', async () => {
    await expect(start(`${BOB}\nbob2:plain\n`)).rejects.toThrow(
      /^BIFRO_AUTH_FILE_INVALID: the password file is invalid: .*passwd:2: the password is not hashed/,
    );
    const ctx = testPluginContext({ options: { file: 'does-not-exist' }, configDir: '/nonexistent-dir' });
    const provider = await plugin.auth(ctx);
    await expect(Promise.resolve(provider.init?.())).rejects.toThrow(/^BIFRO_AUTH_FILE_UNREADABLE: .*\/nonexistent-dir\/does-not-exist/);
  });
});

/** Drives one SCRAM exchange against the provider; returns each step's answer. */
async function scram(
  h: Harness,
  method: ScramMethod,
  username: string,
  password: string,
  phase: 'start' | 'reauth' = 'start',
  client?: ExtendedAuthRequest['client'],
): Promise<{ first: ExtendedAuthResult; final?: ExtendedAuthResult; verified?: boolean }> {
  const state = new Map<string, unknown>();
  const base = { ...sampleAuthRequest({ protocolVersion: 5 }), method, state, ...(client === undefined ? {} : { client }) };
  const c = new ScramClient(method, username, password);
  const first = await h.provider.extendedAuth({ ...base, phase, data: Buffer.from(c.first) });
  if (first.type !== 'continue') return { first };
  const clientFinal = await c.final(Buffer.from(first.data!).toString('utf8'));
  const final = await h.provider.extendedAuth({ ...base, phase: 'continue', data: Buffer.from(clientFinal) });
  const verified = final.type === 'success' ? c.verifyServer(Buffer.from(final.data!).toString('utf8')) : undefined;
  return { first, final, ...(verified === undefined ? {} : { verified }) };
}

describe('auth-file: SCRAM over AUTH', () => {
  it('offers SCRAM-SHA-256 and SCRAM-SHA-512 (scram: false offers none)', async () => {
    expect((await start(`${ALICE}\n`)).provider.authMethods).toEqual(['SCRAM-SHA-256', 'SCRAM-SHA-512']);
    expect((await start(`${ALICE}\n`, { scram: false })).provider.authMethods).toEqual([]);
  });

  it.each<ScramMethod>(['SCRAM-SHA-256', 'SCRAM-SHA-512'])(
    "%s: the right password succeeds with v=, as the line's tenant and user",
    async (method) => {
      const h = await start(`${ALICE}\n`);
      const r = await scram(h, method, 'acme/alice', 'alice-pw');
      expect(r.first.type).toBe('continue');
      expect(r.final).toMatchObject({ type: 'success', tenantId: 'acme', userId: 'alice', attrs: { role: 'admin' } });
      expect(r.verified).toBe(true);
    },
  );

  it('a wrong password fails badCredentials; a malformed message fails notAuthorized', async () => {
    const h = await start(`${ALICE}\n`);
    expect((await scram(h, 'SCRAM-SHA-256', 'acme/alice', 'wrong')).final).toMatchObject({ type: 'failed', reason: 'badCredentials' });
    const state = new Map<string, unknown>();
    const req = { ...sampleAuthRequest({ protocolVersion: 5 }), method: 'SCRAM-SHA-256', state, phase: 'start' as const };
    expect(await h.provider.extendedAuth({ ...req, data: Buffer.from('garbage') })).toMatchObject({
      type: 'failed',
      reason: 'notAuthorized',
    });
    expect(await h.provider.extendedAuth(req)).toMatchObject({ type: 'failed', reason: 'notAuthorized' });
  });

  it('defers unknown users, users without SCRAM credentials, other methods and continues it did not start', async () => {
    const h = await start(`${ALICE}\n${BOB}\n`);
    expect((await scram(h, 'SCRAM-SHA-256', 'mallory', 'x')).first).toEqual({ type: 'defer' });
    expect((await scram(h, 'SCRAM-SHA-256', 'bob', 'bob-pw')).first).toEqual({ type: 'defer' });
    const state = new Map<string, unknown>();
    const req = { ...sampleAuthRequest({ protocolVersion: 5 }), state, data: Buffer.from('n,,n=x,r=y') };
    expect(await h.provider.extendedAuth({ ...req, method: 'OTHER', phase: 'start' })).toEqual({ type: 'defer' });
    expect(await h.provider.extendedAuth({ ...req, method: 'SCRAM-SHA-256', phase: 'continue' })).toEqual({ type: 'defer' });
  });

  it('unknownUser: reject answers an unknown user as a wrong password: made-up salt (the same each time), failed at the proof', async () => {
    const strict = await start(`${ALICE}\n${BOB}\n`, { unknownUser: 'reject' });
    const salt = (r: ExtendedAuthResult): string | undefined =>
      r.type === 'continue' ? /,s=([^,]+),i=4096$/.exec(Buffer.from(r.data!).toString('utf8'))?.[1] : undefined;
    for (const [user, password] of [
      ['mallory', 'x'],
      ['bob', 'bob-pw'], // no SCRAM credentials
      ['acme/alice', 'wrong'],
    ]) {
      const r = await scram(strict, 'SCRAM-SHA-256', user!, password!);
      expect({ user, first: r.first.type, final: r.final }).toMatchObject({
        user,
        first: 'continue',
        final: { type: 'failed', reason: 'badCredentials', text: 'SCRAM-SHA-256: wrong client proof' },
      });
    }
    const again = [await scram(strict, 'SCRAM-SHA-256', 'mallory', 'y'), await scram(strict, 'SCRAM-SHA-256', 'mallory', 'z')];
    expect(salt(again[0]!.first)).toBeDefined();
    expect(salt(again[0]!.first)).toBe(salt(again[1]!.first));
    expect(salt((await scram(strict, 'SCRAM-SHA-256', 'trudy', 'z')).first)).not.toBe(salt(again[0]!.first));
  });

  it('re-authenticates the connected user; another user is refused', async () => {
    const h = await start(`${ALICE}\n${await entryLine({ tenant: 'acme', user: 'eve', password: 'eve-pw', scram: true })}\n`);
    const alice = {
      tenantId: 'acme',
      userId: 'alice',
      clientId: 'c1',
      protocolVersion: 5 as const,
      remoteAddress: '127.0.0.1',
      remotePort: 1,
      listener: 'tcp',
      attrs: {},
    };
    expect((await scram(h, 'SCRAM-SHA-512', 'acme/alice', 'alice-pw', 'reauth', alice)).final).toMatchObject({
      type: 'success',
      userId: 'alice',
    });
    expect((await scram(h, 'SCRAM-SHA-512', 'acme/eve', 'eve-pw', 'reauth', alice)).first).toMatchObject({
      type: 'failed',
      reason: 'notAuthorized',
    });
  });

  it('keeps its step in the shared state under its own key (two instances in one chain do not mix)', async () => {
    const a = await start(`${ALICE}\n`);
    const b = await start(`${ALICE}\n`);
    const state = new Map<string, unknown>();
    const base = { ...sampleAuthRequest({ protocolVersion: 5 }), method: 'SCRAM-SHA-256', state };
    const c = new ScramClient('SCRAM-SHA-256', 'acme/alice', 'alice-pw');
    const first = await a.provider.extendedAuth({ ...base, phase: 'start', data: Buffer.from(c.first) });
    expect(first.type).toBe('continue');
    const final = Buffer.from(await c.final(Buffer.from((first as { data: Uint8Array }).data).toString('utf8')));
    expect(await b.provider.extendedAuth({ ...base, phase: 'continue', data: final })).toEqual({ type: 'defer' });
    expect(await a.provider.extendedAuth({ ...base, phase: 'continue', data: final })).toMatchObject({ type: 'success' });
    // A step is used once.
    expect(await a.provider.extendedAuth({ ...base, phase: 'continue', data: final })).toEqual({ type: 'defer' });
  });
});

describe('auth-file: client certificate identity', () => {
  let certDir: string;
  let cert: (subject: string, san?: string) => ClientCertificate;

  beforeAll(async () => {
    certDir = makeTempDir();
    cert = (subject, san) => {
      const name = `c${Math.random().toString(36).slice(2)}`;
      execFileSync(
        'openssl',
        [
          'req',
          '-x509',
          '-newkey',
          'ec',
          '-pkeyopt',
          'ec_paramgen_curve:prime256v1',
          '-nodes',
          '-days',
          '1',
          '-keyout',
          `${name}.key`,
          '-out',
          `${name}.crt`,
          '-subj',
          subject,
          ...(san === undefined ? [] : ['-addext', `subjectAltName=${san}`]),
        ],
        { cwd: certDir, stdio: ['ignore', 'ignore', 'pipe'], timeout: 10000 },
      );
      const x = new X509Certificate(readFileSync(path.join(certDir, `${name}.crt`)));
      const fields = Object.fromEntries(x.subject.split('\n').map((l) => l.split('=') as [string, string]));
      return {
        subject: fields,
        issuer: fields,
        fingerprint256: x.fingerprint256,
        serialNumber: x.serialNumber,
        authorized: true,
        raw: x.raw,
      };
    };
  });

  afterAll(() => removeTempDir(certDir));

  function withCert(h: Harness, c: ClientCertificate, username?: string, password?: string): Promise<AuthResult> {
    return Promise.resolve(
      h.provider.authenticate(
        sampleAuthRequest({
          clientCertificate: c,
          ...(username === undefined ? {} : { username }),
          ...(password === undefined ? {} : { password: Buffer.from(password) }),
        }),
      ),
    );
  }

  it('is off by default: a verified certificate alone is deferred', async () => {
    const h = await start(`${BOB}\n`);
    expect(await withCert(h, cert('/O=acme/CN=device-1'))).toEqual({ type: 'defer' });
  });

  it('names the user by CN and the tenant by O (or a fixed tenant), without a password', async () => {
    const h = await start(`${ALICE}\n`, { certificate: { user: 'CN', tenant: 'O' } });
    expect(await withCert(h, cert('/O=acme/CN=device-1'))).toEqual({ type: 'ok', tenantId: 'acme', userId: 'device-1', attrs: {} });
    // A user of the file gets its attributes.
    expect(await withCert(h, cert('/O=acme/CN=alice'))).toEqual({
      type: 'ok',
      tenantId: 'acme',
      userId: 'alice',
      attrs: { role: 'admin' },
    });
    const fixed = await start(`${BOB}\n`, { certificate: { user: 'CN', tenant: 'factory' } });
    expect(await withCert(fixed, cert('/O=acme/CN=device-1'))).toMatchObject({ type: 'ok', tenantId: 'factory', userId: 'device-1' });
    const dflt = await start(`${BOB}\n`, { certificate: { user: 'CN' }, tenant: 'plant' });
    expect(await withCert(dflt, cert('/CN=device-2'))).toMatchObject({ type: 'ok', tenantId: 'plant', userId: 'device-2' });
  });

  it('names the user by a SAN (DNS, URI, email)', async () => {
    const dns = await start(`${BOB}\n`, { certificate: { user: 'SAN:DNS', tenant: 't' } });
    expect(await withCert(dns, cert('/CN=x', 'DNS:dev-9.example.com,URI:spiffe://t/dev-9'))).toMatchObject({ userId: 'dev-9.example.com' });
    const uri = await start(`${BOB}\n`, { certificate: { user: 'SAN:URI', tenant: 't' } });
    expect(await withCert(uri, cert('/CN=x', 'DNS:dev-9.example.com,URI:spiffe://t/dev-9'))).toMatchObject({ userId: 'spiffe://t/dev-9' });
    const email = await start(`${BOB}\n`, { certificate: { user: 'SAN:EMAIL', tenant: 't' } });
    expect(await withCert(email, cert('/CN=x', 'email:ops@example.com'))).toMatchObject({ userId: 'ops@example.com' });
    // No SAN of that type: no certificate identity, and no user name: defer.
    expect(await withCert(uri, cert('/CN=x', 'DNS:only.example.com'))).toEqual({ type: 'defer' });
  });

  it('never authenticates with an unverified certificate; the password path still works', async () => {
    const h = await start(`${BOB}\n`, { certificate: { user: 'CN', tenant: 'O' } });
    const unverified = { ...cert('/O=acme/CN=device-1'), authorized: false };
    expect(await withCert(h, unverified)).toEqual({ type: 'defer' });
    expect(await withCert(h, unverified, 'bob', 'bob-pw')).toMatchObject({ type: 'ok', userId: 'bob', tenantId: 'default' });
    expect(await withCert(h, unverified, 'bob', 'wrong')).toMatchObject({ type: 'reject', reason: 'badCredentials' });
    // A certificate without the tenant field names nobody either.
    expect(await withCert(h, cert('/CN=device-1'))).toEqual({ type: 'defer' });
  });

  it('requireListed: the certificate user must be in the file', async () => {
    const h = await start(`${ALICE}\n`, { certificate: { user: 'CN', tenant: 'O', requireListed: true }, unknownUser: 'reject' });
    expect(await withCert(h, cert('/O=acme/CN=alice'))).toMatchObject({ type: 'ok', userId: 'alice' });
    expect(await withCert(h, cert('/O=acme/CN=device-1'))).toMatchObject({ type: 'reject', reason: 'badCredentials' });
  });
});
