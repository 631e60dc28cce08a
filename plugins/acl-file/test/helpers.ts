import * as fs from 'node:fs';
import * as path from 'node:path';
import type { AccessAction, ClientInfo } from '@bifro/spi';
import { sampleClient, testPluginContext, type LoggedLine, type TestPluginContext } from '@bifro/spi/testing';
import plugin from '../src';
import { FileAccessControl } from '../src/file-access-control';
import { makeTempDir as makeDir, removeTempDir, sleep, waitFor, writeAtomic } from '../../../test/support/temp-files';

export { removeTempDir, sleep, waitFor, writeAtomic };

export function makeTempDir(): string {
  return makeDir('bifro-acl-file-');
}

export const client = (over: Partial<ClientInfo> = {}): ClientInfo =>
  sampleClient({ tenantId: 'acme', userId: 'alice', clientId: 'c1', ...over });
export const pub = (topic: string, retain = false): AccessAction => ({ type: 'publish', topic, qos: 1, retain });
export const sub = (filter: string): AccessAction => ({ type: 'subscribe', filter, qos: 1 });

/** An ACL made through the plugin factory over `acl.conf` in a temporary folder. */
export interface Harness {
  readonly dir: string;
  readonly file: string;
  readonly ctx: TestPluginContext;
  readonly acl: FileAccessControl;
  lines(level: LoggedLine['level']): LoggedLine[];
  dispose(): Promise<void>;
}

/** Writes `text` (unless undefined) to `acl.conf` in a fresh folder, then creates and inits the plugin. */
export async function harness(text: string | undefined, options: Record<string, unknown> = {}): Promise<Harness> {
  const dir = makeTempDir();
  const file = path.join(dir, 'acl.conf');
  if (text !== undefined) fs.writeFileSync(file, text);
  const ctx = testPluginContext({ configDir: dir, options: { file: 'acl.conf', ...options } });
  try {
    const acl = await plugin.acl(ctx);
    if (!(acl instanceof FileAccessControl)) throw new Error('the factory must return a FileAccessControl');
    await acl.init();
    return {
      dir,
      file,
      ctx,
      acl,
      lines: (level) => ctx.logged.filter((l) => l.level === level),
      dispose: async () => {
        acl.close();
        removeTempDir(dir);
      },
    };
  } catch (err) {
    removeTempDir(dir);
    throw err;
  }
}
