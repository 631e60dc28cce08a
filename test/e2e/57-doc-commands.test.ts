import { createHash, randomBytes } from 'node:crypto';
import {
  appendFileSync,
  cpSync,
  existsSync,
  mkdirSync,
  mkdtempSync,
  readdirSync,
  readFileSync,
  readlinkSync,
  rmSync,
  symlinkSync,
} from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { DOC_PORTS, runBlock, runnableBlocks, withPorts, type DocBlock } from '../support/doc-commands';
import { freePort } from '../support/server-processes';
import { isRunning } from '../../core/src/runtime/pid-file';
import { REPO } from '../support/test-broker';

/**
 * The shell commands of README.md and docs/ that a reader runs work as written: every block
 * fenced ```sh runnable (or ```sh runnable broker) is run with bash, against this checkout's
 * build, and a command that fails or hangs fails here with its file and line. A doc edit that
 * breaks a command, or a CLI change the docs did not follow, fails CI.
 *
 * Each block runs in a fresh folder laid out like a clone, as far as the commands see it:
 * `conf/` (a copy of this repository's), `plugins/` (a link to its first-party plugins) and
 * `node_modules/.bin/bifro` (a link to core/bin/bifro.js, so `npx bifro` is this checkout's CLI).
 * A `broker` block finds the broker of the quick start running there (`npx bifro start --daemon`),
 * with the admin API on and `TOKEN` set to an admin token, as docs/api.md assumes.
 *
 * What differs from a reader's run, and why:
 * - the ports the docs write (1883, 1884, 1885, the API's 8091) become free ports, in the text of
 *   the block and through BIFRO_PORT for a start that names none, so runs never collide with
 *   each other or with a broker on this machine;
 * - curl gets --fail-with-body (an HTTP error must fail the block); standard input is empty (a
 *   command that would prompt fails), and each command has COMMAND_MS to finish.
 * Commands that cannot run here (systemd, docker, ssh, the npm registry, a full `npm test`) are
 * left unmarked.
 */

jest.setTimeout(120000);

const COMMAND_MS = 30000;
const CLI = path.join(REPO, 'core', 'dist', 'cli', 'main.js');

function docFiles(): string[] {
  const docs = readdirSync(path.join(REPO, 'docs')).filter((f) => f.endsWith('.md'));
  const spi = readdirSync(path.join(REPO, 'docs', 'spi')).filter((f) => f.endsWith('.md'));
  return ['README.md', ...docs.map((f) => `docs/${f}`), ...spi.map((f) => `docs/spi/${f}`)];
}

const blocks: DocBlock[] = docFiles().flatMap((f) => runnableBlocks(path.join(REPO, f), f));
const dirs: string[] = [];

afterAll(async () => {
  for (const dir of dirs) {
    await stopLeftBrokers(dir);
    rmSync(dir, { recursive: true, force: true });
  }
});

/** A folder laid out like a clone, as far as the docs' commands see it. */
function makeWorkDir(): string {
  const dir = mkdtempSync(path.join(os.tmpdir(), 'bifro-doc-commands-'));
  dirs.push(dir);
  cpSync(path.join(REPO, 'conf'), path.join(dir, 'conf'), { recursive: true });
  symlinkSync(path.join(REPO, 'plugins'), path.join(dir, 'plugins'));
  mkdirSync(path.join(dir, 'node_modules', '.bin'), { recursive: true });
  symlinkSync(path.join(REPO, 'core', 'bin', 'bifro.js'), path.join(dir, 'node_modules', '.bin', 'bifro'));
  return dir;
}

/** The environment a reader's shell would have: no BIFRO_* of ours, npm kept off the network. */
function blockEnv(ports: ReadonlyMap<number, number>, token: string): NodeJS.ProcessEnv {
  const env: NodeJS.ProcessEnv = {};
  for (const [k, v] of Object.entries(process.env)) if (!k.startsWith('BIFRO_') && !k.startsWith('npm_')) env[k] = v;
  return { ...env, BIFRO_PORT: String(ports.get(1883)), BIFRO_LOG_PRETTY: 'false', TOKEN: token, npm_config_offline: 'true' };
}

/** Whether pid is still one of the brokers this test started (a stale pid file may name a process since reused). */
function isOurBroker(pid: number, dir: string): boolean {
  try {
    const cmdline = readFileSync(`/proc/${pid}/cmdline`, 'utf8');
    const cwd = readlinkSync(`/proc/${pid}/cwd`);
    return cmdline.includes('start') && cwd.startsWith(dir);
  } catch {
    return false;
  }
}

/** Brokers a block left running in its folder (a pid file under it): SIGTERM to each, by its pid, and wait until they are gone. */
async function stopLeftBrokers(dir: string): Promise<void> {
  const pids: number[] = [];
  for (const entry of readdirSync(dir, { recursive: true, encoding: 'utf8' })) {
    if (path.basename(entry) !== 'bifro.pid') continue;
    const pid = Number(readFileSync(path.join(dir, entry), 'utf8').trim());
    if (Number.isInteger(pid) && pid > 0 && isOurBroker(pid, dir)) pids.push(pid);
  }
  for (const pid of pids) process.kill(pid, 'SIGTERM');
  const deadline = Date.now() + 15000;
  while (pids.some((pid) => isRunning(pid)) && Date.now() < deadline) await new Promise((r) => setTimeout(r, 50));
}

/** The api section the `broker` blocks assume, with the hash of `token`. */
function apiSection(apiPort: number, token: string): string {
  const hash = createHash('sha256').update(token, 'utf8').digest('hex');
  return `\napi:\n  host: 127.0.0.1\n  port: ${apiPort}\n  tokens:\n    - { name: docs, hash: "sha256:${hash}" }\n`;
}

async function portsForBlock(): Promise<Map<number, number>> {
  const ports = new Map<number, number>();
  for (const p of DOC_PORTS) ports.set(p, await freePort());
  return ports;
}

function describeFailure(
  block: DocBlock,
  script: string,
  failedLine: number | undefined,
  reason: string | undefined,
  output: string,
): string {
  const command = failedLine === undefined ? '' : (script.split('\n')[failedLine - block.line] ?? '').trim();
  return `${block.file}:${failedLine ?? block.line}: ${reason ?? 'failed'}: ${command}\n${output.slice(-4000)}`;
}

describe('the runner itself', () => {
  const sample = (script: string): DocBlock => ({ file: 'sample.md', line: 10, script, needsBroker: false });

  it('names the file and line of the first command that fails', async () => {
    const block = sample('true\necho one \\\n  two\nfalse\necho never');
    const result = await runBlock(block, block.script, os.tmpdir(), process.env, COMMAND_MS);
    expect(result).toMatchObject({ ok: false, failedLine: 13, reason: 'exit code 1' });
    expect(result.output).toContain('one two');
    expect(result.output).not.toContain('never');
  });

  it('names the line of a command that does not end in time, and ends it', async () => {
    const block = sample('true\nsleep 30\ntrue');
    const started = Date.now();
    const result = await runBlock(block, block.script, os.tmpdir(), process.env, 1000);
    expect(result).toMatchObject({ ok: false, failedLine: 11 });
    expect(Date.now() - started).toBeLessThan(10000);
  });

  it('fails on an HTTP error from curl', async () => {
    const port = await freePort();
    const block = sample(`curl http://127.0.0.1:${port}/nothing-listens`);
    const result = await runBlock(block, block.script, os.tmpdir(), process.env, COMMAND_MS);
    expect(result).toMatchObject({ ok: false, failedLine: 10 });
  });

  it('rewrites the ports the docs write, and only those', () => {
    const ports = new Map([
      [1883, 40001],
      [8091, 40002],
    ]);
    expect(withPorts('mosquitto_sub -p 1883 -t a/18830 http://127.0.0.1:8091/x', ports)).toBe(
      'mosquitto_sub -p 40001 -t a/18830 http://127.0.0.1:40002/x',
    );
  });
});

describe('runnable shell blocks of README.md and docs/', () => {
  it('the commands a newcomer runs are marked: the quick start, the CLI, the admin API, passwords', () => {
    expect(existsSync(CLI)).toBe(true);
    const marked = new Set(blocks.map((b) => b.file));
    for (const file of ['README.md', 'docs/auth.md', 'docs/configuration.md', 'docs/api.md']) expect(marked).toContain(file);
    expect(blocks.some((b) => b.needsBroker)).toBe(true);
  });

  it.each(blocks.map((b) => [`${b.file}:${b.line}`, b] as const))('%s', async (_name, block) => {
    const dir = makeWorkDir();
    const ports = await portsForBlock();
    const token = randomBytes(32).toString('base64url');
    const env = blockEnv(ports, token);
    if (block.needsBroker) {
      appendFileSync(path.join(dir, 'conf', 'bifro.yml'), apiSection(ports.get(8091)!, token));
      const start = await runBlock({ ...block, script: 'npx bifro start --daemon' }, 'npx bifro start --daemon', dir, env, COMMAND_MS);
      if (!start.ok) throw new Error(`${block.file}:${block.line}: the broker for this block did not start\n${start.output}`);
    }
    const script = withPorts(block.script, ports);
    try {
      const result = await runBlock(block, script, dir, env, COMMAND_MS);
      if (!result.ok) throw new Error(describeFailure(block, script, result.failedLine, result.reason, result.output));
    } finally {
      await stopLeftBrokers(dir);
    }
  });
});
