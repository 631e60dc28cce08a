import { BifroError } from '../../base/errors';
import { isRunning, pidHolder, readPidFile, removePidFile } from '../../runtime/pid-file';
import { loadCliConfig } from '../cli-config';
import { EXIT, type CliIo } from '../cli-io';
import type { CommandArgs } from '../usage';

/** How long `bifro stop` waits for the broker to exit after SIGTERM. */
export const STOP_TIMEOUT_MS = 10_000;

/** `bifro stop`: SIGTERM to the pid in the pid file, then wait for the process to exit. */
export async function stopCommand(args: CommandArgs, io: CliIo): Promise<number> {
  const config = await loadCliConfig(args, io);
  const pidFile = config.pidFile;
  const pid = await readPidFile(pidFile);
  if (pid === undefined) {
    throw new BifroError('BIFRO_CLI_NOT_RUNNING', `bifro is not running (no pid file at ${pidFile})`, { pidFile });
  }
  const holder = pidHolder(pid, pidFile);
  if (holder.state !== 'broker') {
    // Never signal a process that reuses the pid (PID 1 after a container restart would be told to stop).
    await removePidFile(pidFile, pid);
    const why = holder.state === 'other' ? `: ${holder.reason}, it was not signalled` : '';
    throw new BifroError('BIFRO_CLI_NOT_RUNNING', `bifro is not running (removed stale pid file ${pidFile} naming pid ${pid}${why})`, {
      pidFile,
      pid,
    });
  }
  try {
    process.kill(pid, 'SIGTERM');
  } catch (err) {
    const code = (err as NodeJS.ErrnoException).code;
    if (code === 'ESRCH') {
      await removePidFile(pidFile, pid);
      throw new BifroError('BIFRO_CLI_NOT_RUNNING', `bifro is not running (pid ${pid} exited before it was signalled)`, { pidFile, pid });
    }
    throw new BifroError('BIFRO_CLI_SIGNAL_FAILED', `cannot signal pid ${pid} (from ${pidFile}): ${code ?? String(err)}`, { pidFile, pid });
  }
  io.out(`stopping bifro (pid ${pid})...`);
  const deadline = Date.now() + STOP_TIMEOUT_MS;
  while (isRunning(pid)) {
    if (Date.now() >= deadline) {
      throw new BifroError(
        'BIFRO_CLI_STOP_TIMEOUT',
        `bifro (pid ${pid}) did not exit within ${STOP_TIMEOUT_MS / 1000} s of SIGTERM; it is still running`,
        { pidFile, pid },
      );
    }
    await new Promise((resolve) => setTimeout(resolve, 100));
  }
  // A broker that exits cleanly removes its own pid file; one that crashed on the way out may not.
  await removePidFile(pidFile, pid);
  io.out(`bifro stopped (pid ${pid})`);
  return EXIT.OK;
}
