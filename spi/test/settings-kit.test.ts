import { SETTINGS, type SettingChange, type SettingName, type SettingProvider, type SettingValue } from '@bifro/spi';
import { settingProviderConformance } from '@bifro/spi/testing';
import { expectAllPass, expectFailures } from './support/kit-runner';

/** A correct provider over an in-memory table, announcing changes made with `set`. */
class TableSettingProvider implements SettingProvider {
  private readonly listeners = new Set<(c: SettingChange) => void>();
  private readonly table = new Map<string, number | boolean>([
    ['small|MaxTopicLevels', 8],
    ['small|RetainEnabled', false],
  ]);

  provide<S extends SettingName>(setting: S, tenantId: string): SettingValue<S> | undefined {
    return this.table.get(`${tenantId}|${setting}`) as SettingValue<S> | undefined;
  }

  onChange(listener: (c: SettingChange) => void): () => void {
    this.listeners.add(listener);
    return () => this.listeners.delete(listener);
  }

  set(tenantId: string, setting: SettingName, value: number | boolean): void {
    this.table.set(`${tenantId}|${setting}`, value);
    setTimeout(() => this.listeners.forEach((l) => l({ tenantId })), 1);
  }
}

const settingCount = Object.keys(SETTINGS).length;
const provider = (provide: (setting: SettingName, tenantId: string) => unknown, extra: Partial<SettingProvider> = {}): SettingProvider => ({
  provide: provide as SettingProvider['provide'],
  ...extra,
});

describe('setting provider kit', () => {
  it('passes a correct provider, with its values and change notifications', async () => {
    const cases = settingProviderConformance({
      create: () => new TableSettingProvider(),
      tenants: ['small'],
      expectations: [
        { tenantId: 'small', setting: 'MaxTopicLevels', value: 8 },
        { tenantId: 'small', setting: 'RetainEnabled', value: false },
        { tenantId: 'big', setting: 'MaxTopicLevels', value: undefined },
      ],
      triggerChange: async (p) => (p as TableSettingProvider).set('small', 'MaxTopicLevels', 9),
    });
    expect(cases).toHaveLength(1 + settingCount + 1 + 3 + 1);
    await expectAllPass(cases);
  });

  it('passes a provider returning every default and one returning every bound', async () => {
    await expectAllPass(settingProviderConformance({ create: () => provider((s) => SETTINGS[s].default) }));
    await expectAllPass(
      settingProviderConformance({
        create: () =>
          provider((s, tenantId) => {
            const spec = SETTINGS[s] as { type: string; min?: number; max?: number };
            if (spec.type === 'boolean') return tenantId === 't1';
            return tenantId === 't1' ? spec.min : spec.max;
          }),
      }),
    );
  });

  it('fails a value of the wrong type', async () => {
    await expectFailures(
      settingProviderConformance({ create: () => provider((s) => (s === 'RetainEnabled' ? 'yes' : undefined)) }),
      'provide(RetainEnabled)',
    );
    await expectFailures(
      settingProviderConformance({ create: () => provider((s) => (s === 'SessionInboxSize' ? 10.5 : undefined)) }),
      'provide(SessionInboxSize)',
    );
  });

  it('fails a value out of the registry bounds', async () => {
    await expectFailures(
      settingProviderConformance({ create: () => provider((s) => (s === 'MaxTopicLevels' ? 0 : undefined)) }),
      'provide(MaxTopicLevels)',
    );
    await expectFailures(
      settingProviderConformance({ create: () => provider((s) => (s === 'MaximumQoS' ? 3 : undefined)) }),
      'provide(MaximumQoS)',
    );
  });

  it('fails an async provide and a provide that throws for an unknown tenant', async () => {
    await expectFailures(settingProviderConformance({ create: () => provider(async () => undefined) }), 'provide(MQTT5Enabled)');
    await expectFailures(
      settingProviderConformance({
        create: () =>
          provider((_s, tenantId) => {
            if (tenantId === '') throw new Error('empty tenant');
            return undefined;
          }),
      }),
      'provide(MaxTopicLength)',
    );
  });

  it('fails an onChange that returns no unsubscribe function', async () => {
    await expectFailures(
      settingProviderConformance({
        create: () => provider(() => undefined, { onChange: (() => undefined) as unknown as SettingProvider['onChange'] }),
      }),
      'onChange, when present, returns an unsubscribe function',
    );
  });

  it('fails a provider that never announces a change, or keeps calling an unsubscribed listener', async () => {
    await expectFailures(
      settingProviderConformance({
        create: () => provider(() => undefined, { onChange: () => () => undefined }),
        triggerChange: async () => undefined,
        changeTimeoutMs: 50,
      }),
      'onChange listeners hear a change',
    );
    await expectFailures(
      settingProviderConformance({
        create: () => {
          const listeners: Array<(c: SettingChange) => void> = [];
          return Object.assign(
            provider(() => undefined),
            {
              onChange: (l: (c: SettingChange) => void) => {
                listeners.push(l);
                return () => undefined;
              },
              fire: () => listeners.forEach((l) => l({})),
            },
          );
        },
        triggerChange: async (p) => (p as unknown as { fire: () => void }).fire(),
      }),
      'onChange listeners hear a change; unsubscribed ones do not',
    );
  });

  it('fails a provider that does not give the expected value', async () => {
    await expectFailures(
      settingProviderConformance({
        create: () => provider(() => undefined),
        expectations: [{ tenantId: 'small', setting: 'MaxTopicLevels', value: 8 }],
      }),
      'expectation: MaxTopicLevels',
    );
  });
});
