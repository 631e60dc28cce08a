import * as fs from 'node:fs';
import * as path from 'node:path';
import type { SettingProvider } from '@bifro/spi';
import { registerConformance, settingProviderConformance, testPluginContext } from '@bifro/spi/testing';
import plugin from '../src';
import { FileSettingProvider } from '../src/file-setting-provider';
import { makeTempDir, removeTempDir } from './helpers';

const SETTINGS_YML = `
defaults:
  MaximumQoS: 1
  MaxTopicLevels: 32
tenants:
  t1:
    MaxTopicLevels: 8
    RetainEnabled: false
  tenant-ü:
    MaximumQoS: 0
  '':
    SessionInboxSize: 7
  big:
    InBoundBandWidth: 9007199254740991
`;

/** Folder of each provider under test, to rewrite its file and remove it afterwards. */
const dirs = new WeakMap<SettingProvider, string>();
let rewrites = 0;

async function create(text: string | undefined): Promise<SettingProvider> {
  const dir = makeTempDir();
  if (text !== undefined) fs.writeFileSync(path.join(dir, 'settings.yml'), text);
  const factory = plugin.settings;
  if (factory === undefined) throw new Error('the plugin must provide settings');
  const provider = await factory(testPluginContext({ configDir: dir }));
  if (!(provider instanceof FileSettingProvider)) throw new Error('the factory must return a FileSettingProvider');
  dirs.set(provider, dir);
  return provider;
}

function destroy(provider: SettingProvider): void {
  const dir = dirs.get(provider);
  if (dir !== undefined) removeTempDir(dir);
}

describe('settings-file: setting provider conformance kit', () => {
  registerConformance(
    settingProviderConformance({
      create: () => create(SETTINGS_YML),
      destroy,
      tenants: ['t1', 'big', 'acme'],
      expectations: [
        { tenantId: 't1', setting: 'MaxTopicLevels', value: 8 },
        { tenantId: 't1', setting: 'RetainEnabled', value: false },
        { tenantId: 't1', setting: 'MaximumQoS', value: 1 },
        { tenantId: 'tenant-ü', setting: 'MaximumQoS', value: 0 },
        { tenantId: 'tenant-ü', setting: 'MaxTopicLevels', value: 32 },
        { tenantId: '', setting: 'SessionInboxSize', value: 7 },
        { tenantId: 'big', setting: 'InBoundBandWidth', value: Number.MAX_SAFE_INTEGER },
        { tenantId: 'unknown-tenant', setting: 'MaxTopicLevels', value: 32 },
        { tenantId: 'unknown-tenant', setting: 'SessionInboxSize', value: undefined },
      ],
      triggerChange: async (provider) => {
        const dir = dirs.get(provider);
        if (dir === undefined) throw new Error('unknown provider');
        rewrites++;
        await fs.promises.writeFile(path.join(dir, 'settings.yml'), `tenants:\n  t1:\n    MaxTopicLevels: ${100 + rewrites}\n`);
      },
      changeTimeoutMs: 2000,
    }),
    { it },
  );
});

describe('settings-file: conformance without a settings file', () => {
  registerConformance(settingProviderConformance({ create: () => create(undefined), destroy }), { it });
});
