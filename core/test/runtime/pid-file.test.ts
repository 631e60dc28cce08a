import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { BifroError } from '../../src/base/errors';
import { isRunning, readPidFile, removePidFile, writePidFile } from '../../src/runtime/pid-file';

/** A pid above Linux's pid_max: never a live process. */
const DEAD_PID = 99_999_999;

let tmp: string;
let file: string;
beforeEach(() => {
  tmp = mkdtempSync(path.join(os.tmpdir(), 'bifro-pid-'));
  file = path.join(tmp, 'run', 'bifro.pid');
});
afterEach(() => rmSync(tmp, { recursive: true, force: true }));

describe('pid file', () => {
  it('writes this process id (creating the directory), reads and removes it', async () => {
    await writePidFile(file);
    expect(readFileSync(file, 'utf8')).toBe(`${process.pid}\n`);
    expect(await readPidFile(file)).toBe(process.pid);
    expect(await removePidFile(file, process.pid)).toBe(true);
    expect(await readPidFile(file)).toBeUndefined();
    expect(await removePidFile(file)).toBe(false);
  });

  it('refuses when a live process holds it, naming the pid and the file', async () => {
    await writePidFile(file, process.pid);
    const err = await writePidFile(file, DEAD_PID).then(
      () => undefined,
      (e: unknown) => e,
    );
    expect(err).toBeInstanceOf(BifroError);
    expect((err as BifroError).code).toBe('BIFRO_PID_ALREADY_RUNNING');
    expect((err as BifroError).message).toContain(`pid ${process.pid}`);
    expect((err as BifroError).message).toContain(file);
  });

  it('replaces a stale or damaged pid file', async () => {
    await writePidFile(file, DEAD_PID);
    await writePidFile(file);
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
  });
});
