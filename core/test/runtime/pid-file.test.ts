import { spawn, type ChildProcess } from 'node:child_process';
import { mkdirSync, mkdtempSync, readFileSync, rmSync, utimesSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { BifroError } from '../../src/base/errors';
import { isRunning, pidHolder, readPidFile, removePidFile, writePidFile } from '../../src/runtime/pid-file';

/** A pid above Linux's pid_max: never a live process. */
const DEAD_PID = 99_999_999;

let tmp: string;
let file: string;
beforeEach(() => {
  tmp = mkdtempSync(path.join(os.tmpdir(), 'bifro-pid-'));
  file = path.join(tmp, 'run', 'bifro.pid');
});
const children: ChildProcess[] = [];
afterEach(async () => {
  // Only the processes this file started, by pid.
  for (const child of children.splice(0)) {
    if (child.exitCode === null && child.signalCode === null) {
      child.kill('SIGKILL');
      await new Promise((resolve) => child.once('exit', resolve));
    }
  }
  rmSync(tmp, { recursive: true, force: true });
});

/** A live process whose command line runs a script named bifro.js, as a broker's does (`node .../bifro.js start`). */
async function bifroLookalike(): Promise<number> {
  const script = path.join(tmp, 'bin', 'bifro.js');
  mkdirSync(path.dirname(script), { recursive: true });
  writeFileSync(script, "process.stdout.write('up\\n'); setInterval(() => {}, 1000);\n");
  const child = spawn(process.execPath, [script, 'start'], { stdio: ['ignore', 'pipe', 'ignore'] });
  children.push(child);
  await new Promise((resolve) => child.stdout!.once('data', resolve));
  return child.pid!;
}

async function rejection(promise: Promise<unknown>): Promise<BifroError> {
  const err = await promise.then(
    () => undefined,
    (e: unknown) => e,
  );
  expect(err).toBeInstanceOf(BifroError);
  return err as BifroError;
}

describe('pid file', () => {
  it('writes this process id (creating the directory), reads and removes it', async () => {
    await writePidFile(file);
    expect(readFileSync(file, 'utf8')).toBe(`${process.pid}\n`);
    expect(await readPidFile(file)).toBe(process.pid);
    expect(await removePidFile(file, process.pid)).toBe(true);
    expect(await readPidFile(file)).toBeUndefined();
    expect(await removePidFile(file)).toBe(false);
  });

  it('refuses when a live broker holds it, naming the pid and the file', async () => {
    const broker = await bifroLookalike();
    await writePidFile(file, broker);
    expect(pidHolder(broker, file)).toEqual({ state: 'broker' });
    const err = await rejection(writePidFile(file));
    expect(err.code).toBe('BIFRO_PID_ALREADY_RUNNING');
    expect(err.message).toContain(`pid ${broker}`);
    expect(err.message).toContain(file);
    expect(await readPidFile(file)).toBe(broker);
  });

  it('takes over, with a warning, a pid file naming a live process that is not a bifro (this test process)', async () => {
    mkdirSync(path.dirname(file), { recursive: true });
    writeFileSync(file, `${process.pid}\n`);
    const holder = pidHolder(process.pid, file);
    expect(holder.state).toBe('other');
    const warning = await writePidFile(file, DEAD_PID);
    expect(warning).toContain(`took over the stale pid file ${file}: pid ${process.pid} is not a bifro process (`);
    expect(warning).toContain(path.basename(process.argv[1]!));
    expect(await readPidFile(file)).toBe(DEAD_PID);
  });

  it('takes over a pid file written before its live holder started: another process reusing the pid', async () => {
    // As after a container restart: the file is from the previous run, the process with its pid from this one
    // (even one whose command line looks like a broker's, as a restarted broker's own does).
    const reused = await bifroLookalike();
    mkdirSync(path.dirname(file), { recursive: true });
    writeFileSync(file, `${reused}\n`);
    const anHourAgo = new Date(Date.now() - 3_600_000);
    utimesSync(file, anHourAgo, anHourAgo);
    const holder = pidHolder(reused, file);
    expect(holder).toEqual({
      state: 'other',
      reason: expect.stringMatching(new RegExp(`^pid ${reused} started \\d+ s after the pid file was written`)),
    });
    expect(await writePidFile(file)).toContain('another process reusing the pid');
    expect(await readPidFile(file)).toBe(process.pid);
  });

  it('replaces a stale or damaged pid file', async () => {
    await writePidFile(file, DEAD_PID);
    expect(await writePidFile(file)).toBeUndefined();
    expect(await readPidFile(file)).toBe(process.pid);
    writeFileSync(file, 'garbage\n');
    await writePidFile(file);
    expect(await readPidFile(file)).toBe(process.pid);
  });

  it('reports a damaged pid file when reading', async () => {
    await writePidFile(file);
    writeFileSync(file, 'not a pid\n');
    await expect(readPidFile(file)).rejects.toMatchObject({ code: 'BIFRO_PID_INVALID' });
  });

  it('leaves a pid file that names another process when removing by pid', async () => {
    await writePidFile(file, DEAD_PID);
    expect(await removePidFile(file, process.pid)).toBe(false);
    expect(await readPidFile(file)).toBe(DEAD_PID);
  });

  it('tells whether a process runs', () => {
    expect(isRunning(process.pid)).toBe(true);
    expect(isRunning(DEAD_PID)).toBe(false);
    expect(isRunning(0)).toBe(false);
    expect(isRunning(-1)).toBe(false);
    expect(pidHolder(DEAD_PID, file)).toEqual({ state: 'exited' });
  });
});
