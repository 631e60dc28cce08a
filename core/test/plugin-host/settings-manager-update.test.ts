import { loadPlugins, type PluginHost } from '../../src/plugin-host';
import { capturingLogger, configWith, fixture, FixedUsage, WARN } from './plugin-host-fixtures';

/**
 * The writable side of the settings manager (SPI 1.3.0): `writable`, `overrides` and `update`,
 * which checks every value against the registry before the provider sees it, guards the call
 * (timeout, failures counted and reported) and drops the tenant's cache once it is stored.
 */

const hosts: PluginHost[] = [];
afterEach(async () => {
  await Promise.all(hosts.splice(0).map((host) => host.close()));
});

async function load(settings: ReturnType<typeof fixture>) {
  const { logger, lines } = capturingLogger();
  const host = await loadPlugins(configWith({ settings }), logger, new FixedUsage());
  hosts.push(host);
  return { host, lines };
}

describe('SettingsManager: writable providers', () => {
  it('is writable with update; overrides leaves out invalid values; update applies at the next get and tells listeners', async () => {
    const values = { acme: { MaxTopicLevels: 8, MaximumQoS: 7 } };
    const calls: unknown[] = [];
    const { host } = await load(fixture('writable-settings', { values, calls, mode: 'silent' }));
    const settings = host.settings;
    expect(settings.writable).toBe(true);
    expect(settings.providerName).toBe('@fixtures/writable-settings');
    expect(settings.overrides('acme')).toEqual({ MaxTopicLevels: 8 });
    expect(settings.get('acme', 'MaxTopicLevels')).toBe(8);
    const heard: (string | undefined)[] = [];
    settings.onChange((tenantId) => heard.push(tenantId));
    // 'silent': the provider does not announce; the manager drops the cache itself.
    expect(await settings.update('acme', { MaxTopicLevels: 12, MaximumQoS: null })).toEqual({ ok: true });
    expect(calls).toEqual([{ tenantId: 'acme', changes: { MaxTopicLevels: 12, MaximumQoS: null } }]);
    expect(settings.get('acme', 'MaxTopicLevels')).toBe(12);
    expect(heard).toEqual(['acme']);
  });

  it('refuses invalid values and unknown names before the provider is called, naming each', async () => {
    const calls: unknown[] = [];
    const { host } = await load(fixture('writable-settings', { values: {}, calls }));
    const outcome = await host.settings.update('acme', { MaximumQoS: 3 as 2, maxtopiclevels: 4 } as never);
    expect(outcome).toEqual({
      ok: false,
      reason: 'invalid',
      problems: ['invalid MaximumQoS: 3 (above the maximum 2)', 'unknown setting maxtopiclevels (did you mean MaxTopicLevels?)'],
    });
    expect(calls).toEqual([]);
  });

  it('a rejection keeps its words and is counted; a provider that never answers times out', async () => {
    const rejecting = await load(fixture('writable-settings', { mode: 'reject' }));
    expect(await rejecting.host.settings.update('acme', { MaxTopicAlias: 3 })).toEqual({
      ok: false,
      reason: 'failed',
      problems: ['MaxTopicAlias: the store is read-only today'],
    });
    expect(rejecting.host.plugins.find((p) => p.name === '@fixtures/writable-settings')!.stats.settings).toMatchObject({ failures: 1 });
    expect(rejecting.lines.some((l) => l.level >= WARN && String(l.msg).includes('read-only today'))).toBe(true);

    const hanging = await load(fixture('writable-settings', { mode: 'hang' }));
    const outcome = await hanging.host.settings.update('acme', { MaxTopicAlias: 3 });
    expect(outcome).toMatchObject({ ok: false, reason: 'timeout' });
  });

  it('a provider without update is not writable; its overrides are what provide answers', async () => {
    const { host } = await load(fixture('valid-settings', { values: { acme: { MaxTopicLevels: 8, RetainEnabled: 'no' } } }));
    expect(host.settings.writable).toBe(false);
    expect(host.settings.overrides('acme')).toEqual({ MaxTopicLevels: 8 });
    expect(await host.settings.update('acme', { MaxTopicLevels: 9 })).toMatchObject({ ok: false, reason: 'not-writable' });
  });
});
