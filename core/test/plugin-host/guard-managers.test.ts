import type { BrokerEvent, EventType } from '@bifro/spi';
import { loadPlugins, type PluginHost } from '../../src/plugin-host';
import { capturingLogger, client, configWith, fixture, FixedUsage, WARN } from './plugin-host-fixtures';

const hosts: PluginHost[] = [];
afterEach(async () => {
  await Promise.all(hosts.splice(0).map((host) => host.close()));
});

async function load(plugins: Parameters<typeof configWith>[0], usage = new FixedUsage()) {
  const { logger, lines } = capturingLogger();
  const host = await loadPlugins(configWith(plugins), logger, usage);
  hosts.push(host);
  return { host, lines };
}

function event(type: EventType, group: BrokerEvent['group']): BrokerEvent {
  return { type, group, time: 1, tenantId: 't1', clientId: 'c1', userId: 'u1', detail: {} };
}

describe('EventManager', () => {
  it('wants only the types some collector asked for, and hands each event to the collectors that want it', async () => {
    const connected: BrokerEvent[] = [];
    const retained: BrokerEvent[] = [];
    const { host } = await load({
      events: [
        fixture('valid-events', { sink: connected }),
        fixture('valid-events', { sink: retained, eventTypes: ['msgRetained', 'clientConnected'] }),
      ],
    });
    expect(host.events.wants('clientConnected')).toBe(true);
    expect(host.events.wants('msgRetained')).toBe(true);
    expect(host.events.wants('byClient')).toBe(false);
    host.events.report(event('clientConnected', 'clientConnected'));
    host.events.report(event('msgRetained', 'retained'));
    host.events.report(event('byClient', 'clientDisconnected'));
    expect(connected.map((e) => e.type)).toEqual(['clientConnected']);
    expect(retained.map((e) => e.type)).toEqual(['clientConnected', 'msgRetained']);
  });

  it('a collector without eventTypes wants every type', async () => {
    const sink: BrokerEvent[] = [];
    const { host } = await load({ events: [fixture('valid-events', { sink, all: true })] });
    expect(host.events.wants('byClient')).toBe(true);
    expect(host.events.wants('qos2Confirmed')).toBe(true);
  });

  it('no collector: nothing is wanted', async () => {
    const { host } = await load({});
    expect(host.events.wants('clientConnected')).toBe(false);
  });

  it('warns about unknown event types a collector asks for', async () => {
    const { host, lines } = await load({ events: [fixture('valid-events', { eventTypes: ['clientConnected', 'clientTeleported'] })] });
    expect(host.events.wants('clientConnected')).toBe(true);
    expect(lines.some((line) => line.level === WARN && String(line.msg).includes('clientTeleported'))).toBe(true);
  });

  it('catches and counts a collector that throws, and still reaches the others', async () => {
    const sink: BrokerEvent[] = [];
    const { host, lines } = await load({ events: [fixture('events-throws'), fixture('valid-events', { sink })] });
    expect(() => host.events.report(event('clientConnected', 'clientConnected'))).not.toThrow();
    expect(sink).toHaveLength(1);
    expect(host.plugins.find((p) => p.name === '@fixtures/events-throws')!.stats.events).toMatchObject({ calls: 1, failures: 1 });
    expect(lines.some((line) => line.level === WARN && line.err === 'collector is full')).toBe(true);
  });
});

describe('SettingsManager', () => {
  it('returns valid provider values and the registry default otherwise', async () => {
    const { host } = await load({
      settings: fixture('valid-settings', { values: { small: { MaxTopicLevels: 8, RetainEnabled: false } } }),
    });
    expect(host.settings.get('small', 'MaxTopicLevels')).toBe(8);
    expect(host.settings.get('small', 'RetainEnabled')).toBe(false);
    expect(host.settings.get('small', 'MaxTopicLength')).toBe(65535);
    expect(host.settings.get('other', 'MaxTopicLevels')).toBe(128);
  });

  it.each([
    ['MaxTopicLevels', 0, 'below the minimum 1'],
    ['MaxTopicLevels', 70000, 'above the maximum 65535'],
    ['MaxTopicLevels', 2.5, 'expected an integer'],
    ['MaxTopicLevels', '12', 'expected an integer'],
    ['RetainEnabled', 'yes', 'expected a boolean'],
  ])('rejects %s = %p with a warning naming tenant, setting and value, and uses the default', async (setting, value, problem) => {
    const { host, lines } = await load({ settings: fixture('valid-settings', { values: { acme: { [setting]: value } } }) });
    const expected = setting === 'RetainEnabled' ? true : 128;
    expect(host.settings.get('acme', setting as 'MaxTopicLevels' | 'RetainEnabled')).toBe(expected);
    const warning = lines.find((line) => line.level === WARN && line.setting === setting);
    expect(warning).toMatchObject({ tenantId: 'acme', problem });
    expect(warning!.msg).toContain('acme');
    expect(warning!.msg).toContain(setting);
    expect(warning!.msg).toContain(JSON.stringify(value));
    // cached: asking again does not warn again
    host.settings.get('acme', setting as 'MaxTopicLevels');
    expect(lines.filter((line) => line.level === WARN && line.setting === setting)).toHaveLength(1);
  });

  it('caches per tenant and setting until the provider announces a change, then tells listeners', async () => {
    const values: Record<string, Record<string, unknown>> = { acme: { MaxTopicLevels: 8 }, other: { MaxTopicLevels: 9 } };
    const control: { change?: (tenantId?: string) => void } = {};
    const { host } = await load({ settings: fixture('valid-settings', { values, control }) });
    const heard: Array<string | undefined> = [];
    const unsubscribe = host.settings.onChange((tenantId) => heard.push(tenantId));
    expect(host.settings.get('acme', 'MaxTopicLevels')).toBe(8);
    expect(host.settings.get('other', 'MaxTopicLevels')).toBe(9);
    values.acme = { MaxTopicLevels: 16 };
    values.other = { MaxTopicLevels: 17 };
    expect(host.settings.get('acme', 'MaxTopicLevels')).toBe(8);
    control.change!('acme');
    expect(heard).toEqual(['acme']);
    expect(host.settings.get('acme', 'MaxTopicLevels')).toBe(16);
    expect(host.settings.get('other', 'MaxTopicLevels')).toBe(9);
    control.change!();
    expect(heard).toEqual(['acme', undefined]);
    expect(host.settings.get('other', 'MaxTopicLevels')).toBe(17);
    unsubscribe();
    control.change!('acme');
    expect(heard).toHaveLength(2);
  });

  it('a throwing provider gives the default, counts the failure and is asked again next time', async () => {
    const control: { throwFor?: (tenantId: string | undefined) => void } = {};
    const { host } = await load({ settings: fixture('valid-settings', { values: { acme: { MaxTopicLevels: 8 } }, control }) });
    control.throwFor!('acme');
    expect(host.settings.get('acme', 'MaxTopicLevels')).toBe(128);
    control.throwFor!(undefined);
    expect(host.settings.get('acme', 'MaxTopicLevels')).toBe(8);
    expect(host.plugins.find((p) => p.name === '@fixtures/valid-settings')!.stats.settings).toMatchObject({ calls: 2, failures: 1 });
  });

  it('stops listening to the provider on close', async () => {
    const control: { listenerCount?: () => number } = {};
    const { host } = await load({ settings: fixture('valid-settings', { control }) });
    expect(control.listenerCount!()).toBe(1);
    await host.close();
    expect(control.listenerCount!()).toBe(0);
  });
});

describe('ThrottlerManager', () => {
  it('asks the plugin, which reads live tenant usage, and fails open on a throw', async () => {
    const usage = new FixedUsage();
    const { host } = await load({ throttler: fixture('valid-throttler', { exhausted: ['full'] }) }, usage);
    expect(host.throttler.hasResource('full', 'TotalConnections')).toBe(true);
    usage.set('full', 'TotalConnections', 1);
    expect(host.throttler.hasResource('full', 'TotalConnections')).toBe(false);
    expect(host.throttler.hasResource('other', 'TotalConnections')).toBe(true);
    expect(host.throttler.hasResource('broken', 'TotalConnections')).toBe(true);
    expect(host.plugins.find((p) => p.name === '@fixtures/valid-throttler')!.stats.throttler).toMatchObject({ calls: 4, failures: 1 });
  });

  it("passes the plugin's quota through; 0, a throw or an answer that is not a finite non-negative number is undefined", async () => {
    const quotas = { big: 1000, free: 0, negative: -1, text: '10', endless: Infinity, nan: NaN, nothing: undefined };
    const sink: BrokerEvent[] = [];
    const { host } = await load({
      throttler: fixture('valid-throttler', { exhausted: ['full'], quotas }),
      events: [fixture('valid-events', { sink, eventTypes: ['pluginCallFailed'] })],
    });
    expect(host.throttler.quota('big', 'TotalConnections')).toBe(1000);
    expect(host.throttler.quota('full', 'TotalConnections')).toBe(1);
    expect(host.throttler.quota('big', 'TotalRetainTopics')).toBeUndefined();
    expect(host.throttler.quota('other', 'TotalConnections')).toBeUndefined();
    expect(host.throttler.quota('nothing', 'TotalConnections')).toBeUndefined();
    expect(host.throttler.quota('free', 'TotalConnections')).toBeUndefined();
    const stats = host.plugins.find((p) => p.name === '@fixtures/valid-throttler')!.stats.throttler!;
    expect(stats).toMatchObject({ calls: 6, failures: 0 });
    for (const tenant of ['negative', 'text', 'endless', 'nan', 'broken'])
      expect(host.throttler.quota(tenant, 'TotalConnections')).toBeUndefined();
    expect(stats).toMatchObject({ calls: 11, failures: 5 });
    expect(sink.map((e) => [e.tenantId, e.detail.method, e.detail.reason])).toEqual([
      ['negative', 'quota', 'invalidResult'],
      ['text', 'quota', 'invalidResult'],
      ['endless', 'quota', 'invalidResult'],
      ['nan', 'quota', 'invalidResult'],
      ['broken', 'quota', 'error'],
    ]);
  });

  it('answers undefined without calling a throttler that has no quota', async () => {
    const { host } = await load({});
    expect(host.throttler.quota('acme', 'TotalConnections')).toBeUndefined();
  });
});

describe('BalancerManager', () => {
  it('passes the plugin decision through and turns a throw into no redirect', async () => {
    const { host } = await load({ balancer: fixture('valid-balancer') });
    expect(host.balancer.needRedirect(client({ tenantId: 'moved' }))).toEqual({
      type: 'redirect',
      permanent: true,
      serverReference: 'eu.example.com:1883',
    });
    expect(host.balancer.needRedirect(client())).toEqual({ type: 'none' });
    expect(host.balancer.needRedirect(client({ tenantId: 'broken' }))).toEqual({ type: 'none' });
    expect(host.plugins.find((p) => p.name === '@fixtures/valid-balancer')!.stats.balancer).toMatchObject({ calls: 3, failures: 1 });
  });
});
