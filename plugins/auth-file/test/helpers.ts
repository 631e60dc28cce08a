import { execFileSync } from 'node:child_process';
import * as fs from 'node:fs';
import * as path from 'node:path';
import type { AuthProvider } from '@bifro/spi';
import { testPluginContext, type LoggedLine, type TestPluginContext } from '@bifro/spi/testing';
import plugin from '../src';
import { hashPassword } from '../src/hashes';
import { formatEntryLine, type EntryFields } from '../src/password-file';
import { FileAuthProvider } from '../src/provider';
import { deriveScramCredentials, SCRAM_METHODS, type ScramCredentials, type ScramMethod } from '../src/scram';
import { makeTempDir as makeDir, removeTempDir, sleep, waitFor, writeAtomic } from '../../../test/support/temp-files';

export { removeTempDir, sleep, waitFor, writeAtomic };

export function makeTempDir(): string {
  return makeDir('bifro-auth-file-');
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
