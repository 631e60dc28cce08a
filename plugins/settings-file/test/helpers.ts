import * as fs from 'node:fs';
import * as path from 'node:path';
import type { SettingChange, SettingProvider } from '@bifro/spi';
import { testPluginContext, type LoggedLine, type TestPluginContext } from '@bifro/spi/testing';
import plugin from '../src';
import { makeTempDir as makeDir, removeTempDir, sleep, waitFor, writeAtomic } from '../../../test/support/temp-files';

export { removeTempDir, sleep, waitFor, writeAtomic };

export function makeTempDir(): string {
  return makeDir('bifro-settings-file-');
}

/** A provider made through the plugin factory over a temporary folder, with what it logged and announced. */
export interface Harness {
  readonly dir: string;
  readonly file: string;
  readonly ctx: TestPluginContext;
  readonly provider: SettingProvider;
  readonly changes: SettingChange[];
  /** Log lines of one level. */
  lines(level: LoggedLine['level']): LoggedLine[];
  /** Closes the provider and removes the folder. */
  dispose(): Promise<void>;
}

/** Writes `text` (unless undefined) to `settings.yml` in a fresh folder, then creates and inits the provider. */
export async function harness(text: string | undefined, options: Record<string, unknown> = {}): Promise<Harness> {
  const dir = makeTempDir();
  const file = path.join(dir, 'settings.yml');
  if (text !== undefined) fs.writeFileSync(file, text);
  const ctx = testPluginContext({ configDir: dir, options });
  const factory = plugin.settings;
  if (factory === undefined) throw new Error('the plugin must provide settings');
  const provider = await factory(ctx);
  const changes: SettingChange[] = [];
  provider.onChange?.((change) => changes.push(change));
  try {
    await provider.init?.();
  } catch (err) {
    removeTempDir(dir);
    throw err;
  }
  return {
    dir,
    file,
    ctx,
    provider,
    changes,
    lines: (level) => ctx.logged.filter((l) => l.level === level),
    dispose: async () => {
      await provider.close?.();
      removeTempDir(dir);
    },
  };
}
