import * as fs from 'node:fs';
import * as os from 'node:os';
import * as path from 'node:path';
import type { SettingChange, SettingProvider } from '@bifro/spi';
import { testPluginContext, type LoggedLine, type TestPluginContext } from '@bifro/spi/testing';
import plugin from '../src';

/** A temporary folder, removed by {@link removeTempDir}. */
export function makeTempDir(): string {
  return fs.mkdtempSync(path.join(os.tmpdir(), 'bifro-settings-file-'));
}

export function removeTempDir(dir: string): void {
  fs.rmSync(dir, { recursive: true, force: true });
}

/** Replaces a file the way many editors do: write a sibling, then rename it over the original. */
export function writeAtomic(file: string, text: string): void {
  const tmp = `${file}.${process.pid}.${Date.now()}.tmp`;
  fs.writeFileSync(tmp, text);
  fs.renameSync(tmp, file);
}

/** Resolves after `ms` milliseconds. */
export function sleep(ms: number): Promise<void> {
  return new Promise((resolve) => setTimeout(resolve, ms));
}

/** Waits until `predicate` holds, checking every 20 ms; rejects after `timeoutMs`. */
export async function waitFor(predicate: () => boolean, timeoutMs: number, what: string): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  while (!predicate()) {
    if (Date.now() > deadline) throw new Error(`timed out after ${timeoutMs} ms waiting for ${what}`);
    await sleep(20);
  }
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
