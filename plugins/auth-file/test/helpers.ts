import { execFileSync } from 'node:child_process';
import * as fs from 'node:fs';
import * as os from 'node:os';
import * as path from 'node:path';
import type { AuthProvider } from '@bifro/spi';
import { testPluginContext, type LoggedLine, type TestPluginContext } from '@bifro/spi/testing';
import plugin from '../src';
import { hashPassword } from '../src/hashes';
import { formatEntryLine, type EntryFields } from '../src/password-file';
import { FileAuthProvider } from '../src/provider';
import { deriveScramCredentials, SCRAM_METHODS, type ScramCredentials, type ScramMethod } from '../src/scram';

export function makeTempDir(): string {
  return fs.mkdtempSync(path.join(os.tmpdir(), 'bifro-auth-file-'));
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

/** A line for `user` with `password` (scrypt; SCRAM credentials of both methods when `scram`). */
export async function entryLine(
  fields: Omit<EntryFields, 'hash' | 'scram'> & { readonly password: string; readonly scram?: boolean },
): Promise<string> {
  const secret = Buffer.from(fields.password, 'utf8');
  const scram: Partial<Record<ScramMethod, ScramCredentials>> = {};
  if (fields.scram === true) for (const m of SCRAM_METHODS) scram[m] = await deriveScramCredentials(m, secret);
  return formatEntryLine({
    ...(fields.tenant === undefined ? {} : { tenant: fields.tenant }),
    user: fields.user,
    hash: await hashPassword(secret),
    scram,
    ...(fields.attrs === undefined ? {} : { attrs: fields.attrs }),
  });
}

/** A `$7$` line made by the real mosquitto_passwd (batch mode), e.g. `alice:$7$101$...`. */
export function mosquittoLine(dir: string, user: string, password: string, hash = 'sha512-pbkdf2'): string {
  const file = path.join(dir, `mosquitto-${user}-${hash}`);
  execFileSync('mosquitto_passwd', ['-H', hash, '-c', '-b', file, user, password], { stdio: ['ignore', 'ignore', 'pipe'], timeout: 5000 });
  return fs.readFileSync(file, 'utf8').trim();
}

/** A provider made through the plugin factory over a password file in a fresh folder. */
export interface Harness {
  readonly dir: string;
  readonly file: string;
  readonly ctx: TestPluginContext;
  readonly provider: FileAuthProvider;
  lines(level: LoggedLine['level']): LoggedLine[];
  dispose(): Promise<void>;
}

/** Writes `text` to `passwd` in a fresh folder, then creates and inits the provider (options: `file` defaults to `passwd`). */
export async function harness(text: string, options: Record<string, unknown> = {}): Promise<Harness> {
  const dir = makeTempDir();
  const file = path.join(dir, 'passwd');
  fs.writeFileSync(file, text);
  const ctx = testPluginContext({ configDir: dir, options: { file: 'passwd', pollMs: 50, ...options } });
  const instance: AuthProvider = await plugin.auth(ctx);
  if (!(instance instanceof FileAuthProvider)) throw new Error('the factory must return a FileAuthProvider');
  try {
    await instance.init();
  } catch (err) {
    removeTempDir(dir);
    throw err;
  }
  return {
    dir,
    file,
    ctx,
    provider: instance,
    lines: (level) => ctx.logged.filter((l) => l.level === level),
    dispose: async () => {
      instance.close();
      removeTempDir(dir);
    },
  };
}
