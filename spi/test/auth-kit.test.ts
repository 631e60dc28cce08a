import type { AuthProvider, AuthRequest, AuthResult, ExtendedAuthRequest, ExtendedAuthResult } from '@bifro/spi';
import { authProviderConformance, runConformance, type AuthProviderConformanceOptions } from '@bifro/spi/testing';
import { expectAllPass, expectFailures } from './support/kit-runner';

const SECRET = new TextEncoder().encode('secret');
const sameBytes = (a: Uint8Array | undefined, b: Uint8Array): boolean =>
  a !== undefined && a.length === b.length && a.every((x, i) => x === b[i]);

/** A correct provider: `tenant/user` usernames with password `secret`; SCRAM-ish method `TOKEN` in two steps. */
class TenantPasswordAuth implements AuthProvider {
  readonly authMethods = ['TOKEN'] as const;
  initialised = false;

  async init(): Promise<void> {
    this.initialised = true;
  }

  authenticate(req: AuthRequest): AuthResult {
    if (req.username === undefined) return { type: 'defer' };
    const [tenantId, userId] = req.username.split('/');
    if (!tenantId || !userId) return { type: 'reject', reason: 'badCredentials', text: 'expected tenant/user' };
    if (!sameBytes(req.password, SECRET)) return { type: 'reject', reason: 'badCredentials' };
    return { type: 'ok', tenantId, userId, attrs: { via: 'password' }, userProperties: [['welcome', 'yes']] };
  }

  extendedAuth(req: ExtendedAuthRequest): ExtendedAuthResult {
    if (req.method !== 'TOKEN') return { type: 'defer' };
    if (req.phase === 'start') return { type: 'continue', data: Uint8Array.from([1]) };
    return sameBytes(req.data, SECRET)
      ? { type: 'success', tenantId: 't1', userId: 'token-user' }
      : { type: 'failed', reason: 'notAuthorized' };
  }
}

const specifics: Omit<AuthProviderConformanceOptions, 'create'> = {
  validRequest: { username: 'acme/alice', password: SECRET },
  expectedIdentity: { tenantId: 'acme', userId: 'alice' },
  invalidRequest: { username: 'acme/alice', password: new TextEncoder().encode('wrong') },
  expectedRejectReason: 'badCredentials',
};

/** A provider whose authenticate is replaced. */
const withAuthenticate = (authenticate: (req: AuthRequest) => unknown): AuthProviderConformanceOptions => ({
  create: () => ({ authenticate: authenticate as AuthProvider['authenticate'] }),
});

describe('auth kit', () => {
  it('passes a correct provider, with its specifics', async () => {
    const cases = authProviderConformance({ create: () => new TenantPasswordAuth(), ...specifics });
    expect(cases.length).toBeGreaterThanOrEqual(17);
    await expectAllPass(cases);
  });

  it('passes a provider that always defers and has no extended auth', async () => {
    await expectAllPass(authProviderConformance({ create: () => ({ authenticate: () => ({ type: 'defer' }) }) }));
  });

  it('fails an ok result with an empty tenant id', async () => {
    await expectFailures(
      authProviderConformance(withAuthenticate(() => ({ type: 'ok', tenantId: '', userId: 'u' }))),
      'authenticate answers without throwing: no username',
    );
  });

  it('fails an ok result without a user id', async () => {
    await expectFailures(
      authProviderConformance(withAuthenticate(() => ({ type: 'ok', tenantId: 't' }))),
      'authenticate answers without throwing: username and password',
    );
  });

  it('fails a reject with an unknown reason', async () => {
    await expectFailures(
      authProviderConformance(withAuthenticate(() => ({ type: 'reject', reason: 'wrongPassword' }))),
      'authenticate answers without throwing: username and password',
    );
  });

  it('fails an unknown result type and a missing result', async () => {
    await expectFailures(authProviderConformance(withAuthenticate(() => ({ type: 'maybe' }))), 'authenticate answers without throwing');
    await expectFailures(authProviderConformance(withAuthenticate(() => undefined)), 'authenticate answers without throwing');
  });

  it('fails a provider that throws on a missing password, an empty client id or a binary password', async () => {
    await expectFailures(
      authProviderConformance(
        withAuthenticate((req) => {
          if (req.password === undefined) throw new TypeError('password.toString of undefined');
          return { type: 'defer' };
        }),
      ),
      'no username and no password',
      'username without password',
    );
    await expectFailures(
      authProviderConformance(
        withAuthenticate(async (req) => {
          if (req.clientId === '') throw new Error('no client id');
          return { type: 'defer' };
        }),
      ),
      'empty client id',
    );
    await expectFailures(
      authProviderConformance(
        withAuthenticate((req) => {
          if (req.password !== undefined) new TextDecoder('utf-8', { fatal: true }).decode(req.password);
          return { type: 'defer' };
        }),
      ),
      'binary (non UTF-8) password',
    );
  });

  it('fails authMethods without extendedAuth', async () => {
    await expectFailures(
      authProviderConformance({ create: () => ({ authMethods: ['TOKEN'], authenticate: () => ({ type: 'defer' }) }) }),
      'authMethods, when present',
    );
  });

  it('fails extendedAuth that accepts an undeclared method', async () => {
    await expectFailures(
      authProviderConformance({
        create: () => ({
          authMethods: ['TOKEN'],
          authenticate: () => ({ type: 'defer' }),
          extendedAuth: () => ({ type: 'success', tenantId: 't', userId: 'u' }),
        }),
      }),
      'extendedAuth does not accept or continue an undeclared method',
    );
  });

  it('fails extendedAuth that answers a declared method badly', async () => {
    await expectFailures(
      authProviderConformance({
        create: () => ({
          authMethods: ['TOKEN'],
          authenticate: () => ({ type: 'defer' }),
          extendedAuth: () => ({ type: 'continue', data: 'not bytes' }) as unknown as ExtendedAuthResult,
        }),
      }),
      'extendedAuth answers the start step',
    );
  });

  it('fails a provider that does not accept the valid request or does not reject the invalid one', async () => {
    await expectFailures(
      authProviderConformance({ create: () => ({ authenticate: () => ({ type: 'defer' }) }), ...specifics }),
      'accepts the valid request',
      'rejects the invalid request',
    );
    await expectFailures(
      authProviderConformance({ create: () => ({ authenticate: () => ({ type: 'ok', tenantId: 'acme', userId: 'bob' }) }), ...specifics }),
      'accepts the valid request',
      'rejects the invalid request',
    );
  });

  it('fails a provider whose init rejects or whose call hangs', async () => {
    const report = await runConformance(
      authProviderConformance({
        create: () => ({ init: () => Promise.reject(new Error('no backend')), authenticate: () => ({ type: 'defer' }) }),
      }),
    );
    expect(report.passed).toEqual([]);
    expect(String(report.failed[0].error)).toContain('init() threw: Error: no backend');
    const failures = await expectFailures(
      authProviderConformance({
        create: () => ({
          authenticate: (req) => (req.username === 'alice' ? new Promise<AuthResult>(() => undefined) : { type: 'defer' }),
        }),
        callTimeoutMs: 20,
      }),
      'username without password',
    );
    expect(failures.join('\n')).toContain('did not settle within 20 ms');
  });
});
