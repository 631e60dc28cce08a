import { execFileSync, spawn } from 'node:child_process';
import { existsSync, mkdtempSync, readFileSync, rmSync, statSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { sampleAuthRequest, testPluginContext } from '@bifro/spi/testing';
import authFile from '../../../plugins/auth-file/src';
import { ScramClient } from '../../../plugins/auth-file/src/scram';

/** These tests run the built CLI (and the built @bifro/plugin-auth-file it loads): build first (`npx tsc -b`). */
const REPO = path.resolve(__dirname, '..', '..', '..');
const CLI = path.join(REPO, 'core', 'dist', 'cli', 'main.js');

interface Result {
  readonly code: number | null;
  readonly stdout: string;
  readonly stderr: string;
}

function cleanEnv(): NodeJS.ProcessEnv {
  const env: NodeJS.ProcessEnv = {};
  for (const [k, v] of Object.entries(process.env)) if (!k.startsWith('BIFRO_')) env[k] = v;
  return env;
}

/** Runs `bifro passwd ...args` with `input` on stdin (a pipe, not a terminal); killed after 20 s. */
function passwd(args: readonly string[], input = ''): Promise<Result> {
  return new Promise((resolve, reject) => {
    const child = spawn(process.execPath, [CLI, 'passwd', ...args], { cwd: tmp, env: cleanEnv(), stdio: ['pipe', 'pipe', 'pipe'] });
    let stdout = '';
    let stderr = '';
    const timer = setTimeout(() => child.kill('SIGKILL'), 20000);
    child.stdout.on('data', (d: Buffer) => (stdout += d.toString()));
    child.stderr.on('data', (d: Buffer) => (stderr += d.toString()));
    child.on('error', reject);
    child.on('close', (code) => {
      clearTimeout(timer);
      resolve({ code, stdout, stderr });
    });
    child.stdin.on('error', () => undefined);
    child.stdin.end(input);
  });
}

/** Whether the plugin, loading `file`, accepts `username` / `password` (and as whom). */
async function pluginSays(file: string, username: string, password: string, options: Record<string, unknown> = {}): Promise<string> {
  const provider = await authFile.auth(
    testPluginContext({ configDir: path.dirname(file), options: { file: path.basename(file), ...options } }),
  );
  await provider.init?.();
  try {
    const r = await provider.authenticate(sampleAuthRequest({ username, password: Buffer.from(password) }));
    return r.type === 'ok'
      ? `ok ${r.tenantId}/${r.userId} ${JSON.stringify(r.attrs ?? {})}`
      : r.type === 'reject'
        ? `reject ${r.reason}`
        : r.type;
  } finally {
    await provider.close?.();
  }
}

let tmp: string;
let file: string;

beforeAll(() => {
  if (!existsSync(CLI)) throw new Error(`${CLI} is missing: build first (npx tsc -b)`);
  if (!existsSync(path.join(REPO, 'plugins', 'auth-file', 'dist', 'index.js')))
    throw new Error('plugins/auth-file is not built: npx tsc -b');
});
beforeEach(() => {
  tmp = mkdtempSync(path.join(os.tmpdir(), 'bifro-passwd-'));
  file = path.join(tmp, 'passwd');
});
afterEach(() => rmSync(tmp, { recursive: true, force: true }));

describe('bifro passwd', () => {
  it('-c creates the file (mode 0600) with the user, and the plugin accepts the password', async () => {
    const r = await passwd(['-c', '--password-stdin', 'passwd', 'alice'], 's3cret\n');
    expect(r).toMatchObject({ code: 0, stdout: `created ${file} with user alice\n` });
    expect(r.stdout + r.stderr).not.toContain('s3cret');
    const text = readFileSync(file, 'utf8');
    expect(text).toMatch(/^# bifro password file/);
    expect(text).toMatch(/^alice:\$scrypt\$ln=15,r=8,p=1\$[^:\n]+$/m);
    expect(text).not.toContain('s3cret');
    expect(statSync(file).mode & 0o777).toBe(0o600);
    expect(await pluginSays(file, 'alice', 's3cret')).toBe('ok default/alice {}');
    expect(await pluginSays(file, 'alice', 's3cret', { tenant: 'plant' })).toBe('ok plant/alice {}');
    expect(await pluginSays(file, 'alice', 'wrong')).toBe('reject badCredentials');
  });

  it('refuses without -c on a missing file, and -c on an existing one (unless --force)', async () => {
    const missing = await passwd(['--password-stdin', 'passwd', 'alice'], 'pw\n');
    expect(missing.code).toBe(1);
    expect(missing.stderr).toContain(`error BIFRO_AUTH_FILE_NOT_FOUND: ${file} does not exist (add -c to create it)`);
    expect(missing.stderr).toContain('hint: Add `-c` to create the file');
    expect(existsSync(file)).toBe(false);
    expect((await passwd(['-c', '--password-stdin', 'passwd', 'alice'], 'pw\n')).code).toBe(0);
    const again = await passwd(['-c', '--password-stdin', 'passwd', 'bob'], 'pw\n');
    expect(again.code).toBe(1);
    expect(again.stderr).toContain('error BIFRO_AUTH_FILE_EXISTS');
    expect(readFileSync(file, 'utf8')).toContain('alice:');
    const forced = await passwd(['-c', '--force', '--password-stdin', 'passwd', 'bob'], 'pw\n');
    expect(forced.code).toBe(0);
    expect(readFileSync(file, 'utf8')).not.toContain('alice:');
  });

  it('adds users (with tenant, SCRAM credentials and attributes), keeping the other lines', async () => {
    writeFileSync(
      file,
      '# our devices\nalice:$7$101$KoxdhoyLe72qCyJn$T7xqOZfNfkgltSNfrqY9KG/4z4nxos9pZ/VkskwRdAcm62pgd/ZzECcXlrFr4/7iy9j4Fm0nI2YzHuuIUKrHRQ==\n',
    );
    const r = await passwd(
      ['--password-stdin', '--tenant', 'acme', '--scram', '--attr', 'role=admin', '--attr', 'note=a: b', 'passwd', 'bob'],
      'bob-pw\r\n',
    );
    expect(r).toMatchObject({ code: 0, stdout: `added user bob (tenant acme) in ${file}\n` });
    const lines = readFileSync(file, 'utf8').split('\n');
    expect(lines[0]).toBe('# our devices');
    expect(lines[1]).toMatch(/^alice:\$7\$101\$/);
    expect(lines[2]).toMatch(/^acme:bob:\$scrypt\$[^:]+:scram-sha-256=4096\$[^:]+:scram-sha-512=4096\$[^:]+:role=admin:note=a%3A%20b$/);
    expect(await pluginSays(file, 'acme/bob', 'bob-pw')).toBe('ok acme/bob {"role":"admin","note":"a: b"}');
    expect(await pluginSays(file, 'alice', 's3cret')).toBe('ok default/alice {}'); // the mosquitto line made with mosquitto_passwd
    // The SCRAM credentials work for the plugin's SCRAM exchange.
    const provider = await authFile.auth(testPluginContext({ configDir: tmp, options: { file: 'passwd' } }));
    await provider.init?.();
    try {
      const c = new ScramClient('SCRAM-SHA-512', 'acme/bob', 'bob-pw');
      const state = new Map<string, unknown>();
      const base = { ...sampleAuthRequest({ protocolVersion: 5 }), method: 'SCRAM-SHA-512', state };
      const first = await provider.extendedAuth!({ ...base, phase: 'start', data: Buffer.from(c.first) });
      expect(first.type).toBe('continue');
      const final = await c.final(Buffer.from((first as { data: Uint8Array }).data).toString());
      expect(await provider.extendedAuth!({ ...base, phase: 'continue', data: Buffer.from(final) })).toMatchObject({
        type: 'success',
        tenantId: 'acme',
        userId: 'bob',
      });
    } finally {
      await provider.close?.();
    }
  });

  it('changes a password: the old one stops working, attributes and SCRAM credentials follow', async () => {
    await passwd(['-c', '--password-stdin', '--scram', '--scram-iterations', '5000', '--attr', 'role=ops', 'passwd', 'alice'], 'old-pw\n');
    const before = readFileSync(file, 'utf8');
    const r = await passwd(['--password-stdin', 'passwd', 'alice'], 'new-pw\n');
    expect(r).toMatchObject({ code: 0, stdout: `changed the password of user alice in ${file}\n` });
    const after = readFileSync(file, 'utf8');
    expect(after).not.toBe(before);
    expect(after.match(/^alice:/gm)).toHaveLength(1);
    expect(after).toMatch(/:scram-sha-256=5000\$.*:scram-sha-512=5000\$.*:role=ops$/m);
    expect(await pluginSays(file, 'alice', 'old-pw')).toBe('reject badCredentials');
    expect(await pluginSays(file, 'alice', 'new-pw')).toBe('ok default/alice {"role":"ops"}');
    // --attr NAME removes an attribute.
    expect((await passwd(['--password-stdin', '--attr', 'role', 'passwd', 'alice'], 'new-pw\n')).code).toBe(0);
    expect(await pluginSays(file, 'alice', 'new-pw')).toBe('ok default/alice {}');
  });

  it('-D deletes a user (of its tenant) and refuses an unknown one', async () => {
    await passwd(['-c', '--password-stdin', 'passwd', 'alice'], 'a\n');
    await passwd(['--password-stdin', '--tenant', 'acme', 'passwd', 'alice'], 'b\n');
    const unknown = await passwd(['-D', 'passwd', 'bob']);
    expect(unknown.code).toBe(1);
    expect(unknown.stderr).toContain(`error BIFRO_AUTH_FILE_USER_NOT_FOUND: ${file} has no user bob`);
    const r = await passwd(['-D', '--tenant', 'acme', 'passwd', 'alice']);
    expect(r).toMatchObject({ code: 0, stdout: `deleted user alice (tenant acme) in ${file}\n` });
    const text = readFileSync(file, 'utf8');
    expect(text).toMatch(/^alice:/m);
    expect(text).not.toMatch(/^acme:alice:/m);
    expect(await pluginSays(file, 'acme/alice', 'b')).toBe('defer');
    expect(await pluginSays(file, 'alice', 'a')).toBe('ok default/alice {}');
  });

  it('refuses a default-tenant user name with "/", whose login would collide with a tenant-qualified one; -D still removes one', async () => {
    await passwd(['-c', '--password-stdin', '--tenant', 'acme', 'passwd', 'bob'], 'acme-pw\n');
    const before = readFileSync(file, 'utf8');
    const r = await passwd(['--password-stdin', 'passwd', 'acme/bob'], 'pw\n');
    expect(r.code).toBe(1);
    expect(r.stderr).toContain(
      'error BIFRO_AUTH_FILE_INVALID: user name "acme/bob" contains "/": a user of the default tenant (a line without --tenant) also logs in by its bare name, but the login acme/bob names user "bob" of tenant "acme"',
    );
    expect(r.stderr).toContain('`bifro passwd --tenant acme FILE bob`');
    // Refused before the password is read, and the file is as it was: the plugin still loads it.
    expect(readFileSync(file, 'utf8')).toBe(before);
    expect(await pluginSays(file, 'acme/bob', 'acme-pw')).toBe('ok acme/bob {}');
    // The default tenant named explicitly is the same line.
    const explicit = await passwd(['--password-stdin', '--tenant', 'default', 'passwd', 'acme/bob'], 'pw\n');
    expect(explicit.code).toBe(1);
    expect(explicit.stderr).toContain('a user of tenant default also logs in by its bare name');
    // In another tenant the login is tenant-qualified (t1/acme/bob): no collision.
    expect((await passwd(['--password-stdin', '--tenant', 't1', 'passwd', 'acme/bob'], 'pw\n')).code).toBe(0);
    // A colliding line written by hand (the broker refuses the file) can still be deleted.
    writeFileSync(
      file,
      `${readFileSync(file, 'utf8')}acme/bob:$7$101$KoxdhoyLe72qCyJn$T7xqOZfNfkgltSNfrqY9KG/4z4nxos9pZ/VkskwRdAcm62pgd/ZzECcXlrFr4/7iy9j4Fm0nI2YzHuuIUKrHRQ==\n`,
    );
    expect((await passwd(['-D', 'passwd', 'acme/bob'])).code).toBe(0);
    expect(readFileSync(file, 'utf8')).not.toMatch(/^acme\/bob:/m);
    expect(await pluginSays(file, 'acme/bob', 'acme-pw')).toBe('ok acme/bob {}');
  });

  it('re-hashes a user of a mosquitto file, including a refused $6$ line, and notes bad lines it leaves', async () => {
    const mos = path.join(tmp, 'mos');
    execFileSync('mosquitto_passwd', ['-H', 'sha512', '-c', '-b', mos, 'old', 'old-pw'], { timeout: 5000 });
    execFileSync('mosquitto_passwd', ['-H', 'sha512', '-b', mos, 'older', 'older-pw'], { timeout: 5000 });
    writeFileSync(file, readFileSync(mos));
    await expect(pluginSays(file, 'old', 'old-pw')).rejects.toThrow(/BIFRO_AUTH_FILE_INVALID: .*passwd:1: user old: a \$6\$ hash/);
    const r = await passwd(['--password-stdin', 'passwd', 'old'], 'new-pw\n');
    expect(r.code).toBe(0);
    expect(r.stderr).toMatch(new RegExp(`note: ${file}:2: user older: a \\$6\\$ hash .*\\(left as it is\\)`));
    expect((await passwd(['--password-stdin', 'passwd', 'older'], 'newer-pw\n')).stderr).toBe('');
    expect(await pluginSays(file, 'old', 'new-pw')).toBe('ok default/old {}');
  });

  it('--password-stdin: an empty line or no input is refused; a password is never taken from the command line', async () => {
    await passwd(['-c', '--password-stdin', 'passwd', 'alice'], 'pw\n');
    const before = readFileSync(file, 'utf8');
    for (const input of ['', '\n', '\r\n']) {
      const r = await passwd(['--password-stdin', 'passwd', 'alice'], input);
      expect(r.code).toBe(1);
      expect(r.stderr).toContain('error BIFRO_AUTH_FILE_PASSWORD_INVALID: --password-stdin: standard input has no password');
    }
    expect(readFileSync(file, 'utf8')).toBe(before);
    const extra = await passwd(['passwd', 'alice', 'secret-on-the-line']);
    expect(extra.code).toBe(2);
    expect(extra.stderr).toContain('error BIFRO_CLI_USAGE: bifro passwd: expected FILE and USER, got 3 argument(s)');
    // Without --password-stdin and without a terminal there is nobody to prompt.
    const noTty = await passwd(['passwd', 'alice'], 'pw\n');
    expect(noTty.code).toBe(1);
    expect(noTty.stderr).toContain('standard input is not a terminal: pipe the password in with --password-stdin');
  });

  it('usage errors exit 2; help describes the command', async () => {
    for (const args of [
      ['-c', '-D', 'passwd', 'u'],
      ['--bogus', 'passwd', 'u'],
      ['passwd'],
      ['--force', 'passwd', 'u'],
      ['-D', '--scram', 'passwd', 'u'],
    ]) {
      const r = await passwd(args);
      expect({ args, code: r.code }).toEqual({ args, code: 2 });
      expect(r.stderr).toContain('error BIFRO_CLI_USAGE: bifro passwd');
    }
    expect((await passwd(['--bogus', 'passwd', 'u'])).stderr).toContain('error BIFRO_CLI_USAGE: bifro passwd: unknown option "--bogus"');
    expect((await passwd(['passwd', 'u', '--tenant'])).stderr).toContain('error BIFRO_CLI_USAGE: bifro passwd: option --tenant');
    const bad = await passwd(['--password-stdin', 'passwd', 'a:b'], 'x\n');
    expect(bad.code).toBe(1);
    expect(bad.stderr).toContain('error BIFRO_AUTH_FILE_INVALID: a user name cannot contain ":"');
    const help = await passwd(['--help']);
    expect(help.code).toBe(0);
    expect(help.stdout).toContain('Usage: bifro passwd [-c [--force]]');
    expect(help.stdout).toContain('--password-stdin');
  });

  it('prompts twice on a terminal without echoing, and refuses passwords that differ', async () => {
    writeFileSync(file, '');
    // `script` gives the CLI a pseudo-terminal; we type as a person would.
    const typed = async (answers: string[]): Promise<Result> =>
      new Promise((resolve, reject) => {
        const child = spawn('script', ['-qfec', `${process.execPath} ${CLI} passwd passwd alice`, '/dev/null'], {
          cwd: tmp,
          env: cleanEnv(),
          stdio: ['pipe', 'pipe', 'pipe'],
        });
        let stdout = '';
        let stderr = '';
        const timer = setTimeout(() => child.kill('SIGKILL'), 20000);
        const pending = [...answers];
        child.stdout.on('data', (d: Buffer) => {
          stdout += d.toString();
          if (/password: $/i.test(stdout.replace(/\r/g, '')) && pending.length > 0) child.stdin.write(`${pending.shift()}\r`);
        });
        child.stderr.on('data', (d: Buffer) => (stderr += d.toString()));
        child.on('error', reject);
        child.on('close', (code) => {
          clearTimeout(timer);
          resolve({ code, stdout, stderr });
        });
      });
    const ok = await typed(['tty-secret', 'tty-secret']);
    expect(ok.code).toBe(0);
    expect(ok.stdout).toContain('Password: ');
    expect(ok.stdout).toContain('Reenter password: ');
    expect(ok.stdout).toContain(`added user alice in ${file}`);
    expect(ok.stdout).not.toContain('tty-secret');
    expect(await pluginSays(file, 'alice', 'tty-secret')).toBe('ok default/alice {}');
    const differ = await typed(['one', 'two']);
    expect(differ.code).toBe(1);
    expect(differ.stdout).toContain('BIFRO_AUTH_FILE_PASSWORD_INVALID: the passwords do not match');
    expect(await pluginSays(file, 'alice', 'tty-secret')).toBe('ok default/alice {}');
  });
});
