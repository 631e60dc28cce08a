import { BifroError } from '../../base/errors';
import { pidHolder, readPidFile } from '../../runtime/pid-file';
import { loadCliConfig } from '../cli-config';
import { EXIT, type CliIo } from '../cli-io';
import type { CommandArgs } from '../usage';

/** `bifro status`: exit 0 when the broker named by the pid file runs, 3 when not. */
export async function statusCommand(args: CommandArgs, io: CliIo): Promise<number> {
  const config = await loadCliConfig(args, io);
  let pid: number | undefined;
  try {
    pid = await readPidFile(config.pidFile);
  } catch (err) {
    if (!(err instanceof BifroError)) throw err;
    io.out(`bifro is not running (${err.message.replace(/^BIFRO_PID_INVALID: /, '')})`);
    return EXIT.NOT_RUNNING;
  }
  if (pid === undefined) {
    io.out(`bifro is not running (no pid file at ${config.pidFile})`);
    return EXIT.NOT_RUNNING;
  }
  const holder = pidHolder(pid, config.pidFile);
  if (holder.state !== 'broker') {
    const why = holder.state === 'exited' ? 'which has exited' : `but ${holder.reason}`;
    io.out(`bifro is not running (stale pid file ${config.pidFile} names pid ${pid}, ${why})`);
    return EXIT.NOT_RUNNING;
  }
  io.out(`bifro is running (pid ${pid}, node ${config.nodeId}, pid file ${config.pidFile})`);
  return EXIT.OK;
}
