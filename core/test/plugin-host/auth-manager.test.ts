import type { BrokerEvent } from '@bifro/spi';
import { loadPlugins, type PluginHost } from '../../src/plugin-host';
import { authRequest, capturingLogger, configWith, fixture, FixedUsage, WARN } from './plugin-host-fixtures';

const hosts: PluginHost[] = [];
afterEach(async () => {
  await Promise.all(hosts.splice(0).map((host) => host.close()));
});

async function load(plugins: Parameters<typeof configWith>[0]) {
  const { logger, lines } = capturingLogger();
  const host = await loadPlugins(configWith(plugins), logger, new FixedUsage());
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
