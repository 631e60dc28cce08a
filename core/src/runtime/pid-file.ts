import { execFileSync } from 'node:child_process';
import { promises as fs, readFileSync, statSync } from 'node:fs';
import path from 'node:path';
import { BifroError, defineErrors } from '../base/errors';

/**
 * The pid file of a running broker: one line holding the process id, so `kill $(cat bifro.pid)`
 * works. Created exclusively (O_EXCL), so two brokers started at once cannot both claim it.
 *
 * A live pid is not enough to call the file's writer running: after a crash and a container or
 * host restart, the pid is often reused by another process (PID 1 of the new container, a shell).
 * {@link pidHolder} tells a broker from another process by its command line and start time.
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

/** Who holds a pid file: a live broker, nobody (the pid has exited), or another process reusing the pid. */
export type PidHolder =
  | { readonly state: 'broker' }
  | { readonly state: 'exited' }
  /** `reason`: what tells it is not the broker that wrote the file (its command line, its start time). */
  | { readonly state: 'other'; readonly reason: string };

/**
 * Whether the live process `pid` is the broker that wrote `file`. It is another process when its
 * command line runs no bifro entry script (Linux: /proc/<pid>/cmdline; elsewhere `ps`), or when it
 * started after the file was written (Linux: /proc/<pid>/stat), as PID 1 of a restarted container
 * does. When neither can be read (Windows, /proc hidden), it is taken for the broker: refusing to
 * start is recoverable, two brokers on one data directory are not.
 */
export function pidHolder(pid: number, file: string): PidHolder {
  if (!isRunning(pid)) return { state: 'exited' };
  const argv = commandLineOf(pid);
  if (argv !== undefined && !argv.some(isBifroEntry)) {
    return { state: 'other', reason: `pid ${pid} is not a bifro process (${shortCommand(argv)})` };
  }
  const started = startTimeOf(pid);
  const written = mtimeOf(file);
  if (started !== undefined && written !== undefined && started > written + START_SLACK_MS) {
    const after = Math.round((started - written) / 1000);
    return {
      state: 'other',
      reason: `pid ${pid} started ${after} s after the pid file was written: it is another process reusing the pid`,
    };
  }
  return { state: 'broker' };
}

/** /proc/stat's boot time has a one-second resolution; the pid file is written after the process starts. */
const START_SLACK_MS = 2000;

/**
 * The scripts a broker runs as: `bifro` (the npm bin, `npx bifro`), `bifro.js` (core/bin), or
 * `.../dist/cli/main.js` (`npm start`, the daemon's child, test helpers). Only the file name is
 * compared (and the last folders of main.js): a checkout folder called bifro says nothing.
 */
function isBifroEntry(arg: string): boolean {
  const base = arg.split(/[\\/]/).pop() ?? '';
  return /^bifro(\.js|\.cmd)?$/i.test(base) || /[\\/]dist[\\/]cli[\\/]main\.js$/.test(arg);
}

function shortCommand(argv: readonly string[]): string {
  const text = argv.join(' ');
  return text.length <= 80 ? text : `${text.slice(0, 77)}...`;
}

/** The arguments of a process (argv[0] first); undefined when they cannot be read. */
function commandLineOf(pid: number): string[] | undefined {
  try {
    const raw = readFileSync(`/proc/${pid}/cmdline`, 'utf8');
    // A kernel thread or a zombie has an empty command line: nothing to tell by.
    const argv = raw.split('\0').filter((a) => a !== '');
    return argv.length === 0 ? undefined : argv;
  } catch {
    // No /proc (macOS, the BSDs): ps prints the command line, split on white space.
  }
  if (process.platform === 'win32') return undefined;
  try {
    const out = execFileSync('ps', ['-o', 'args=', '-p', String(pid)], {
      encoding: 'utf8',
      stdio: ['ignore', 'pipe', 'ignore'],
      timeout: 2000,
    });
    const argv = out
      .trim()
      .split(/\s+/)
      .filter((a) => a !== '');
    return argv.length === 0 ? undefined : argv;
  } catch {
    return undefined;
  }
}

/** Linux: when the process started (ms since the epoch), from its start tick in /proc/<pid>/stat and the boot time. */
function startTimeOf(pid: number): number | undefined {
  try {
    const stat = readFileSync(`/proc/${pid}/stat`, 'utf8');
    // Fields after the command name (which may hold spaces and parentheses): state is field 3, starttime field 22.
    const fields = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
    const ticks = Number(fields[19]);
    const btime = /^btime (\d+)$/m.exec(readFileSync('/proc/stat', 'utf8'))?.[1];
    if (!Number.isFinite(ticks) || btime === undefined) return undefined;
    // USER_HZ is 100 on every Linux architecture Node runs on.
    return Number(btime) * 1000 + (ticks / 100) * 1000;
  } catch {
    return undefined;
  }
}

function mtimeOf(file: string): number | undefined {
  try {
    return statSync(file).mtimeMs;
  } catch {
    return undefined;
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
 * process that is gone (or by this very process) is replaced; so is one naming a live process
 * that is not the broker which wrote it ({@link pidHolder}): the returned warning says which.
 * @throws BifroError BIFRO_PID_ALREADY_RUNNING naming the pid and the file when a live broker holds it.
 */
export async function writePidFile(file: string, pid: number = process.pid): Promise<string | undefined> {
  let warning: string | undefined;
  try {
    await fs.mkdir(path.dirname(file), { recursive: true, mode: 0o700 });
  } catch (err) {
    throw writeFailed(file, err);
  }
  for (let attempt = 0; attempt < 3; attempt++) {
    try {
      await fs.writeFile(file, `${pid}\n`, { flag: 'wx', mode: 0o600 });
      return warning;
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
    if (holder !== undefined && holder !== pid) {
      const who = pidHolder(holder, file);
      if (who.state === 'broker') {
        throw new BifroError('BIFRO_PID_ALREADY_RUNNING', `a broker is already running with pid ${holder} (pid file ${file})`, {
          file,
          pid: holder,
        });
      }
      if (who.state === 'other') warning = `took over the stale pid file ${file}: ${who.reason}`;
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
