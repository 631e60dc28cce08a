import * as fs from 'node:fs';
import * as os from 'node:os';
import * as path from 'node:path';
import type { AccessAction, ClientInfo } from '@bifro/spi';
import { sampleClient, testPluginContext, type LoggedLine, type TestPluginContext } from '@bifro/spi/testing';
import plugin from '../src';
import { FileAccessControl } from '../src/file-access-control';

export function makeTempDir(): string {
  return fs.mkdtempSync(path.join(os.tmpdir(), 'bifro-acl-file-'));
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
