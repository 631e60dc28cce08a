import { loadConfig } from '../runtime/config';
import type { BrokerConfig } from '../base/config-types';
import type { CliIo } from './cli-io';
import type { CommandArgs } from './usage';

/** Loads the configuration with the command's --config / --port / --data-dir / --plugins-dir. */
export function loadCliConfig(args: CommandArgs, io: CliIo): Promise<BrokerConfig> {
  return loadConfig({
    ...(args.config !== undefined ? { file: args.config } : {}),
    cwd: io.cwd,
    env: io.env,
    overrides: {
      ...(args.port !== undefined ? { port: args.port } : {}),
      ...(args.dataDir !== undefined ? { dataDir: args.dataDir } : {}),
      ...(args.pluginsDir !== undefined ? { pluginsDir: args.pluginsDir } : {}),
      ...(args.workers !== undefined ? { workers: args.workers } : {}),
    },
  });
}
