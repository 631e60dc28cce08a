import type { AccessAction, BrokerEvent } from '@bifro/spi';
import { loadPlugins, type PluginHost } from '../../src/plugin-host';
import { capturingLogger, client, configWith, fixture, FixedUsage, WARN } from './plugin-host-fixtures';

const hosts: PluginHost[] = [];
afterEach(async () => {
  await Promise.all(hosts.splice(0).map((host) => host.close()));
});

async function load(plugins: Parameters<typeof configWith>[0]): Promise<PluginHost> {
  const host = await loadPlugins(configWith(plugins), capturingLogger().logger, new FixedUsage());
  hosts.push(host);
  return host;
}

const publish = (topic: string): AccessAction => ({ type: 'publish', topic, qos: 1, retain: false });

/** Tenant "open" bypasses permission check errors, tenant "strict" does not. */
const bypassSettings = fixture('valid-settings', {
  values: { open: { ByPassPermCheckError: true }, strict: { ByPassPermCheckError: false } },
});

describe('AclManager', () => {
  it('answers synchronously when the plugin does', async () => {
    const host = await load({ acl: [fixture('valid-acl')] });
    const granted = host.acl.check(client(), publish('a/b'));
    expect(granted).toBe(true);
    expect(host.acl.check(client(), publish('forbidden/x'))).toBe(false);
  });

  it('awaits plugins that answer with promises', async () => {
    const host = await load({ acl: [fixture('valid-acl', { async: true })] });
    await expect(host.acl.check(client(), publish('a/b'))).resolves.toBe(true);
    await expect(host.acl.check(client(), publish('forbidden/x'))).resolves.toBe(false);
  });

  it('denies when every plugin defers', async () => {
    expect((await load({ acl: [fixture('acl-defers')] })).acl.check(client(), { type: 'connect' })).toBe(false);
    const chain = await load({ acl: [fixture('valid-acl'), fixture('acl-defers')] });
    expect(chain.acl.check(client(), publish('defer/x'))).toBe(false);
    expect(chain.acl.check(client(), publish('a/b'))).toBe(true);
  });

  it('asks the next plugin after a defer', async () => {
    const host = await load({ acl: [fixture('acl-defers'), fixture('valid-acl', { async: true })] });
    await expect(host.acl.check(client(), publish('forbidden/x'))).resolves.toBe(false);
    await expect(host.acl.check(client(), publish('ok'))).resolves.toBe(true);
  });

  describe.each(['error', 'throw', 'reject', 'hang', 'invalid'])('a plugin failure (%s) is decided by ByPassPermCheckError', (mode) => {
    it('grants for a tenant with ByPassPermCheckError true and denies for one with false', async () => {
      const host = await load({ acl: [fixture('acl-errors', { mode })], settings: bypassSettings });
      await expect(Promise.resolve(host.acl.check(client({ tenantId: 'open' }), publish('a')))).resolves.toBe(true);
      await expect(Promise.resolve(host.acl.check(client({ tenantId: 'strict' }), publish('a')))).resolves.toBe(false);
      const stats = host.plugins.find((p) => p.name === '@fixtures/acl-errors')!.stats.acl!;
      expect(stats.calls).toBe(2);
      expect(stats.failures).toBe(mode === 'error' ? 0 : 2);
      expect(stats.timeouts).toBe(mode === 'hang' ? 2 : 0);
    });
  });

  it.each([
    ['error', 'answeredError'],
    ['throw', 'error'],
    ['reject', 'error'],
    ['hang', 'timeout'],
    ['invalid', 'invalidResult'],
  ])('reports a plugin failure (%s) as accessControlError with reason %s and the decision', async (mode, reason) => {
    const sink: BrokerEvent[] = [];
    const host = await load({
      acl: [fixture('acl-errors', { mode })],
      settings: bypassSettings,
      events: [fixture('valid-events', { sink, eventTypes: ['accessControlError'] })],
    });
    await Promise.resolve(host.acl.check(client({ tenantId: 'open', clientId: 'c-open' }), publish('a/b')));
    await Promise.resolve(
      host.acl.check(client({ tenantId: 'strict', clientId: 'c-strict' }), { type: 'subscribe', filter: 's/#', qos: 1 }),
    );
    expect(sink.map((e) => ({ type: e.type, group: e.group, tenantId: e.tenantId, clientId: e.clientId, detail: e.detail }))).toEqual([
      {
        type: 'accessControlError',
        group: 'accessControl',
        tenantId: 'open',
        clientId: 'c-open',
        detail: { plugin: '@fixtures/acl-errors', action: 'publish', topic: 'a/b', filter: undefined, reason, granted: true },
      },
      {
        type: 'accessControlError',
        group: 'accessControl',
        tenantId: 'strict',
        clientId: 'c-strict',
        detail: { plugin: '@fixtures/acl-errors', action: 'subscribe', topic: undefined, filter: 's/#', reason, granted: false },
      },
    ]);
  });

  it('fails closed by default: with no settings plugin, a failing plugin denies and the rest of the chain is not asked', async () => {
    for (const mode of ['error', 'throw', 'reject', 'hang', 'invalid']) {
      // valid-acl would grant a/b: the failure must not open it.
      const host = await load({ acl: [fixture('acl-errors', { mode }), fixture('valid-acl')] });
      await expect(Promise.resolve(host.acl.check(client({ tenantId: 'anyone' }), publish('a/b')))).resolves.toBe(false);
      await expect(Promise.resolve(host.acl.check(client({ tenantId: 'anyone' }), publish('forbidden/x')))).resolves.toBe(false);
      expect(host.plugins.find((p) => p.name === '@fixtures/valid-acl')!.stats.acl!.calls).toBe(0);
    }
  });

  it('logs the first failure of an episode with its decision, not the ones that follow', async () => {
    const { logger, lines } = capturingLogger();
    const host = await loadPlugins(
      configWith({ acl: [fixture('acl-errors', { mode: 'throw' })], settings: bypassSettings }),
      logger,
      new FixedUsage(),
    );
    hosts.push(host);
    for (let i = 0; i < 5; i++) host.acl.check(client({ tenantId: 'strict', clientId: `c${i}` }), publish(`a/${i}`));
    host.acl.check(client({ tenantId: 'open', clientId: 'c-open' }), { type: 'subscribe', filter: 's/#', qos: 1 });
    host.acl.check(client({ tenantId: 'open', clientId: 'c-open2' }), publish('b'));
    const ours = lines.filter((l) => String(l.msg).startsWith('access control plugin'));
    expect(ours.map((l) => [l.level, l.msg])).toEqual([
      [
        WARN,
        'access control plugin @fixtures/acl-errors threw or rejected: publish denied (fail closed: ByPassPermCheckError is false for tenant strict)',
      ],
      [
        WARN,
        'access control plugin @fixtures/acl-errors threw or rejected: subscribe granted (ByPassPermCheckError is true for tenant open)',
      ],
    ]);
    expect(ours[0]).toMatchObject({
      plugin: '@fixtures/acl-errors',
      reason: 'error',
      tenantId: 'strict',
      clientId: 'c0',
      topic: 'a/0',
      granted: false,
    });
    expect(ours[1]).toMatchObject({ tenantId: 'open', clientId: 'c-open', action: 'subscribe', filter: 's/#', granted: true });
  });
});
