import { promises as fs, readFileSync } from 'node:fs';
import path from 'node:path';
import { BifroError, defineErrors } from '../base/errors';

/**
 * The pid file of a running broker: one line holding the process id, so `kill $(cat bifro.pid)`
 * works. Created exclusively (O_EXCL), so two brokers started at once cannot both claim it.
 */

export const PID_FILE_ERRORS = defineErrors({
  BIFRO_PID_ALREADY_RUNNING: {
    summary: 'Another broker process holds the pid file and is still running.',
    remedy: 'Stop it first (`bifro stop`), or give this broker another data directory / pidFile.',
  },
  BIFRO_PID_WRITE_FAILED: {
    summary: 'The pid file could not be written (directory missing or not writable).',
    remedy: 'Check the permissions of the data directory or of the configured pidFile.',
  },
  BIFRO_PID_INVALID: {
    summary: 'The pid file does not contain a process id.',
    remedy: 'Remove the damaged pid file after making sure no broker is running.',
  },
});

/** Whether a process with this id exists (signal 0 checks without sending anything). */
export function isRunning(pid: number): boolean {
  if (!Number.isInteger(pid) || pid <= 0) return false;
  try {
    process.kill(pid, 0);
  } catch (err) {
    // EPERM: it exists but belongs to another user.
    return (err as NodeJS.ErrnoException).code === 'EPERM';
  }
  return !isZombie(pid);
}

/**
 * Linux: a process that has exited but was not yet reaped by its parent (in containers whose init
 * does not reap, a stopped daemon can stay so) still answers signal 0. /proc tells; elsewhere false.
 */
function isZombie(pid: number): boolean {
  try {
    const stat = readFileSync(`/proc/${pid}/stat`, 'utf8');
    const state = stat.slice(stat.lastIndexOf(')') + 2, stat.lastIndexOf(')') + 3);
    return state === 'Z' || state === 'X';
  } catch {
    return false;
  }
}

/**
 * Reads the pid; undefined when the file does not exist.
 * @throws BifroError BIFRO_PID_INVALID when the file holds something else.
 */
export async function readPidFile(file: string): Promise<number | undefined> {
  let text: string;
  try {
    text = await fs.readFile(file, 'utf8');
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code === 'ENOENT') return undefined;
    throw err;
  }
  const first = text.split('\n')[0]!.trim();
  const pid = /^\d+$/.test(first) ? Number(first) : NaN;
  if (!Number.isSafeInteger(pid) || pid <= 0) {
    throw new BifroError('BIFRO_PID_INVALID', `pid file ${file} does not hold a process id (found ${JSON.stringify(first.slice(0, 40))})`, {
      file,
    });
  }
  return pid;
}

/**
 * Writes `pid` (default: this process) to the file, creating its directory. A pid file left by a
 * process that is gone (or by this very process) is replaced.
 * @throws BifroError BIFRO_PID_ALREADY_RUNNING naming the pid and the file when a live process holds it.
 */
export async function writePidFile(file: string, pid: number = process.pid): Promise<void> {
  try {
    await fs.mkdir(path.dirname(file), { recursive: true, mode: 0o700 });
  } catch (err) {
    throw writeFailed(file, err);
  }
  for (let attempt = 0; attempt < 3; attempt++) {
    try {
      await fs.writeFile(file, `${pid}\n`, { flag: 'wx', mode: 0o600 });
      return;
    } catch (err) {
      if ((err as NodeJS.ErrnoException).code !== 'EEXIST') throw writeFailed(file, err);
    }
    let holder: number | undefined;
    try {
      holder = await readPidFile(file);
    } catch (err) {
      if (!(err instanceof BifroError)) throw writeFailed(file, err);
      holder = undefined; // damaged: nobody can be holding it
    }
    if (holder !== undefined && holder !== pid && isRunning(holder)) {
      throw new BifroError('BIFRO_PID_ALREADY_RUNNING', `a broker is already running with pid ${holder} (pid file ${file})`, {
        file,
        pid: holder,
      });
    }
    await fs.rm(file, { force: true });
  }
  throw writeFailed(file, new Error('the pid file keeps reappearing (another broker starting at the same time?)'));
}

/**
 * Removes the pid file. With `pid`, only when the file still holds that pid (a newer broker's
 * file is left alone). Returns whether a file was removed.
 */
export async function removePidFile(file: string, pid?: number): Promise<boolean> {
  if (pid !== undefined) {
    let holder: number | undefined;
    try {
      holder = await readPidFile(file);
    } catch {
      return false;
    }
    if (holder !== pid) return false;
  }
  try {
    await fs.unlink(file);
    return true;
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code === 'ENOENT') return false;
    throw err;
  }
}

function writeFailed(file: string, err: unknown): BifroError {
  const reason = (err as NodeJS.ErrnoException).code ?? (err instanceof Error ? err.message : String(err));
  return new BifroError('BIFRO_PID_WRITE_FAILED', `cannot write pid file ${file}: ${reason}`, { file }, { cause: err });
}
