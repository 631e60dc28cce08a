import type { BrokerEvent } from '@bifro/spi';
import { loadPlugins, type PluginHost } from '../../src/plugin-host';
import type { BrokerConfig } from '../../src/base/config-types';
import { DEFAULT_SECURITY } from '../../src/runtime/config';
import { authRequest, capturingLogger, configWith, fixture, FixedUsage, WARN } from './plugin-host-fixtures';

const hosts: PluginHost[] = [];
afterEach(async () => {
  await Promise.all(hosts.splice(0).map((host) => host.close()));
});

async function load(plugins: Parameters<typeof configWith>[0], loginFailures?: Partial<BrokerConfig['security']['loginFailures']>) {
  const { logger, lines } = capturingLogger();
  const security = { ...DEFAULT_SECURITY, loginFailures: { ...DEFAULT_SECURITY.loginFailures, ...loginFailures } };
  const host = await loadPlugins(configWith(plugins, { security }), logger, new FixedUsage());
  hosts.push(host);
  return { host, lines, stats: (name: string) => host.plugins.find((p) => p.name === name)!.stats.auth! };
}

describe('AuthManager', () => {
  it('answers synchronously when the provider does (no promise on the fast path)', async () => {
    const { host } = await load({ auth: [fixture('valid-auth')] });
    const outcome = host.auth.authenticate(authRequest({ username: 'alice', password: Buffer.from('secret') }));
    expect(outcome).not.toBeInstanceOf(Promise);
    expect(outcome).toEqual({ type: 'ok', tenantId: 't1', userId: 'alice' });
    expect(host.auth.authenticate(authRequest({ username: 'alice', password: Buffer.from('nope') }))).toEqual({
      type: 'reject',
      reason: 'badCredentials',
      text: 'wrong password',
    });
  });

  it('hands the plugin its options', async () => {
    const { host } = await load({ auth: [fixture('valid-auth', { tenantId: 'acme' })] });
    expect(host.auth.authenticate(authRequest({ username: 'a', password: Buffer.from('secret') }))).toMatchObject({ tenantId: 'acme' });
  });

  it('asks the next provider when the first defers; the first non-defer answer wins', async () => {
    const calls: string[] = [];
    const { host, stats } = await load({ auth: [fixture('auth-defer-first', { calls }), fixture('auth-accept-second')] });
    const outcome = host.auth.authenticate(authRequest({ clientId: 'dev-1', username: 'bob' }));
    expect(outcome).toBeInstanceOf(Promise);
    await expect(outcome).resolves.toEqual({ type: 'ok', tenantId: 'second', userId: 'bob' });
    expect(calls).toEqual(['dev-1']);
    expect(stats('@fixtures/auth-defer-first')).toMatchObject({ calls: 1, failures: 0 });
    expect(stats('@fixtures/auth-accept-second')).toMatchObject({ calls: 1, failures: 0 });
  });

  it('a reject stops the chain', async () => {
    const { host } = await load({ auth: [fixture('valid-auth'), fixture('auth-accept-second')] });
    expect(host.auth.authenticate(authRequest({ username: 'x' }))).toMatchObject({ type: 'reject', reason: 'badCredentials' });
  });

  it('when every provider defers the client is refused notAuthorized', async () => {
    const { host } = await load({ auth: [fixture('auth-defer-first'), fixture('valid-auth')] });
    expect(host.auth.authenticate(authRequest({ username: 'defer' }))).toEqual({
      type: 'reject',
      reason: 'notAuthorized',
      text: 'no auth provider accepted the client',
    });
  });

  it('a throwing provider refuses with error, counts the failure and logs a warning', async () => {
    const { host, lines, stats } = await load({ auth: [fixture('valid-auth'), fixture('auth-accept-second')] });
    expect(host.auth.authenticate(authRequest({ username: 'boom' }))).toMatchObject({ type: 'reject', reason: 'error' });
    expect(stats('@fixtures/valid-auth')).toMatchObject({ calls: 1, failures: 1, timeouts: 0 });
    const warning = lines.find((line) => line.level === WARN && line.method === 'authenticate');
    expect(warning).toMatchObject({ plugin: '@fixtures/valid-auth', kind: 'auth', reason: 'error', err: 'backend exploded' });
  });

  it.each([
    ['a U+0000 (storage joins tenant and key with it)', 'acme\u0000x', 'alice'],
    ['a "/"', 'acme/x', 'alice'],
    ['65 characters', 'a'.repeat(65), 'alice'],
    ['a leading "."', '.acme', 'alice'],
    ['a user id with U+0000', 'acme', 'ali\u0000ce'],
  ])('an identity with %s is refused with error and logged, for every plugin (core checks it once)', async (_what, tenantId, username) => {
    const { host, lines, stats } = await load({ auth: [fixture('valid-auth', { tenantId })] });
    expect(host.auth.authenticate(authRequest({ username, password: Buffer.from('secret') }))).toMatchObject({
      type: 'reject',
      reason: 'error',
    });
    expect(stats('@fixtures/valid-auth')).toMatchObject({ failures: 1 });
    const warning = lines.find((line) => line.level === WARN && line.method === 'authenticate');
    expect(String(warning?.err)).toMatch(/answered (tenantId|userId) ".*": a (tenant|user) id/);
  });

  it('accepts tenant ids of letters, digits, "_", "-" and "." and user ids with "/" or "@"', async () => {
    const { host } = await load({ auth: [fixture('valid-auth', { tenantId: 'acme-eu.2_b' })] });
    expect(host.auth.authenticate(authRequest({ username: 'bob@acme.io/x', password: Buffer.from('secret') }))).toMatchObject({
      type: 'ok',
      tenantId: 'acme-eu.2_b',
    });
  });

  it('a provider that does not answer within callTimeoutMs refuses with error and reports pluginCallFailed', async () => {
    const sink: BrokerEvent[] = [];
    const { host, stats } = await load({
      auth: [fixture('valid-auth')],
      events: [fixture('valid-events', { sink, eventTypes: ['pluginCallFailed'] })],
    });
    const started = Date.now();
    await expect(host.auth.authenticate(authRequest({ clientId: 'slowpoke', username: 'slow' }))).resolves.toMatchObject({
      type: 'reject',
      reason: 'error',
    });
    expect(Date.now() - started).toBeLessThan(1000);
    expect(stats('@fixtures/valid-auth')).toMatchObject({ calls: 1, failures: 1, timeouts: 1 });
    expect(sink).toHaveLength(1);
    expect(sink[0]).toMatchObject({
      type: 'pluginCallFailed',
      group: 'plugin',
      clientId: 'slowpoke',
      detail: { plugin: '@fixtures/valid-auth', kind: 'auth', method: 'authenticate', reason: 'timeout' },
    });
  });

  it('rate-limits failure logging to one line per plugin per second', async () => {
    const { host, lines, stats } = await load({ auth: [fixture('valid-auth')] });
    for (let i = 0; i < 50; i++) host.auth.authenticate(authRequest({ username: 'boom' }));
    expect(stats('@fixtures/valid-auth').failures).toBe(50);
    expect(lines.filter((line) => line.level === WARN && line.method === 'authenticate')).toHaveLength(1);
  });

  it('routes v5 enhanced auth by method', async () => {
    const { host } = await load({ auth: [fixture('auth-defer-first'), fixture('valid-auth')] });
    expect(host.auth.supportsMethod('TEST-CHALLENGE')).toBe(true);
    expect(host.auth.supportsMethod('SCRAM-SHA-1')).toBe(false);
    const state = new Map<string, unknown>();
    const base = { ...authRequest(), method: 'TEST-CHALLENGE', state };
    await expect(host.auth.extendedAuth({ ...base, phase: 'start' })).resolves.toMatchObject({ type: 'continue' });
    await expect(host.auth.extendedAuth({ ...base, phase: 'continue', data: Buffer.from('pass') })).resolves.toMatchObject({
      type: 'success',
      tenantId: 't1',
      userId: 'challenged',
    });
    await expect(host.auth.extendedAuth({ ...base, phase: 'continue', data: Buffer.from('fail') })).resolves.toMatchObject({
      type: 'failed',
      reason: 'badCredentials',
    });
    expect(host.auth.extendedAuth({ ...base, method: 'SCRAM-SHA-1', phase: 'start' })).toMatchObject({
      type: 'failed',
      reason: 'badAuthMethod',
    });
  });
});

describe('AuthManager: back-off of password guessing (security.loginFailures)', () => {
  const wrong = (fields: Parameters<typeof authRequest>[0] = {}) => authRequest({ password: Buffer.from('nope'), ...fields });

  it('past perAddress failures an address is refused badCredentials without asking the plugin; other addresses are served', async () => {
    const { host, stats } = await load({ auth: [fixture('valid-auth')] }, { perLogin: 0, perAddress: 3, backoffMs: 60_000 });
    for (const user of ['a', 'b', 'c'])
      expect(host.auth.authenticate(wrong({ username: user, remoteAddress: '10.6.6.6' }))).toMatchObject({ reason: 'badCredentials' });
    expect(stats('@fixtures/valid-auth').calls).toBe(3);
    // Even the right password: refused, and the plugin is not called.
    expect(host.auth.authenticate(authRequest({ username: 'd', password: Buffer.from('secret'), remoteAddress: '10.6.6.6' }))).toEqual({
      type: 'reject',
      reason: 'badCredentials',
      text: 'too many failed logins: try again later',
    });
    expect(stats('@fixtures/valid-auth').calls).toBe(3);
    expect(
      host.auth.authenticate(authRequest({ username: 'a', password: Buffer.from('secret'), remoteAddress: '10.0.0.2' })),
    ).toMatchObject({
      type: 'ok',
    });
  });

  it('past perLogin failures the login is delayed, not locked: the right password from elsewhere gets in after the back-off', async () => {
    const { host, stats } = await load(
      { auth: [fixture('valid-auth')] },
      { perLogin: 2, perAddress: 0, backoffMs: 300, maxBackoffMs: 300 },
    );
    for (let i = 0; i < 2; i++)
      expect(host.auth.authenticate(wrong({ username: 'bob', remoteAddress: '10.6.6.6' }))).toMatchObject({ type: 'reject' });
    const started = Date.now();
    const outcome = host.auth.authenticate(authRequest({ username: 'bob', password: Buffer.from('secret'), remoteAddress: '10.0.0.2' }));
    expect(outcome).toBeInstanceOf(Promise);
    await expect(outcome).resolves.toMatchObject({ type: 'ok', userId: 'bob' });
    expect(Date.now() - started).toBeGreaterThanOrEqual(250);
    expect(stats('@fixtures/valid-auth').calls).toBe(3);
    // The success forgot the count: the next attempt is not delayed.
    expect(host.auth.authenticate(authRequest({ username: 'bob', password: Buffer.from('secret') }))).toMatchObject({ type: 'ok' });
  });

  it('an all-defer refusal counts as a failure (unknown users); an error does not', async () => {
    const { host } = await load({ auth: [fixture('valid-auth')] }, { perLogin: 0, perAddress: 2, backoffMs: 60_000 });
    expect(host.auth.authenticate(authRequest({ username: 'defer' }))).toMatchObject({ reason: 'notAuthorized' });
    expect(host.auth.authenticate(authRequest({ username: 'boom' }))).toMatchObject({ reason: 'error' });
    expect(host.auth.authenticate(authRequest({ username: 'defer' }))).toMatchObject({ reason: 'notAuthorized' });
    expect(host.auth.authenticate(authRequest({ username: 'a', password: Buffer.from('secret') }))).toMatchObject({
      text: 'too many failed logins: try again later',
    });
  });

  it('enhanced auth: a failed exchange counts for its address and the next exchange is refused at its first step', async () => {
    const { host } = await load({ auth: [fixture('valid-auth')] }, { perLogin: 0, perAddress: 1, backoffMs: 60_000 });
    const state = new Map<string, unknown>();
    const base = { ...authRequest({ remoteAddress: '10.6.6.6' }), method: 'TEST-CHALLENGE', state };
    await expect(host.auth.extendedAuth({ ...base, phase: 'start' })).resolves.toMatchObject({ type: 'continue' });
    await expect(host.auth.extendedAuth({ ...base, phase: 'continue', data: Buffer.from('fail') })).resolves.toMatchObject({
      type: 'failed',
      reason: 'badCredentials',
    });
    expect(host.auth.extendedAuth({ ...base, state: new Map(), phase: 'start' })).toEqual({
      type: 'failed',
      reason: 'badCredentials',
      text: 'too many failed logins: try again later',
    });
    await expect(host.auth.extendedAuth({ ...base, remoteAddress: '10.0.0.2', state: new Map(), phase: 'start' })).resolves.toMatchObject({
      type: 'continue',
    });
  });
});
