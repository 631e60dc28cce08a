import path from 'node:path';
import { createInterface } from 'node:readline/promises';
import pino from 'pino';
import type { StorageReport, StorageTools } from '@bifro/spi';
import { BifroError } from '../../base/errors';
import { configuredStorage, type ConfiguredStorage } from '../../plugin-host/storage-tools';
import { pidHolder, readPidFile } from '../../runtime/pid-file';
import { UsageError } from '../cli-errors';
import { loadCliConfig } from '../cli-config';
import { EXIT, type CliIo } from '../cli-io';
import type { CommandArgs } from '../usage';

/** Where a repair asks for its confirmation: the process's terminal; tests answer with --yes. */
export interface RepairPrompt {
  readonly interactive: boolean;
  ask(question: string): Promise<string>;
}

const terminal: RepairPrompt = {
  interactive: process.stdin.isTTY === true,
  async ask(question) {
    const rl = createInterface({ input: process.stdin, output: process.stderr });
    try {
      return await rl.question(question);
    } finally {
      rl.close();
    }
  },
};

/**
 * `bifro storage check`: exit 0 when the data is whole, 1 when a repair is needed.
 * `bifro storage repair`: exit 0 once repaired (or when nothing needed it).
 * Both run the configured storage plugin's `storageTools` with the broker stopped.
 */
export async function storageCommand(args: CommandArgs, io: CliIo, prompt: RepairPrompt = terminal): Promise<number> {
  const [sub, ...rest] = args.positionals;
  if (sub !== 'check' && sub !== 'repair')
    throw new UsageError(
      sub === undefined
        ? 'bifro storage: name a subcommand: check or repair'
        : `bifro storage: unknown subcommand "${sub}" (check or repair)`,
    );
  if (rest.length > 0) throw new UsageError(`bifro storage ${sub}: unexpected argument "${rest[0]}"`);
  if (sub === 'check' && (args.yes === true || args.noBackup === true))
    throw new UsageError(`bifro storage check: unknown option "${args.yes === true ? '--yes' : '--no-backup'}" (repair takes it)`);

  const config = await loadCliConfig(args, io);
  const pid = await readPidFile(config.pidFile).catch(() => undefined);
  // A live process that is not the broker of this pid file (PID reuse after a restart) does not count.
  if (pid !== undefined && pidHolder(pid, config.pidFile).state === 'broker')
    throw new BifroError(
      'BIFRO_CLI_BROKER_RUNNING',
      `the broker of this configuration runs (pid ${pid}, pid file ${config.pidFile}): stop it before \`bifro storage ${sub}\``,
      { pid },
    );
  // The plugin's own log lines (warnings and errors) go to standard error.
  const logger = pino({ level: 'warn', base: null }, { write: (line: string) => io.err(line.trimEnd()) });
  const storage = await configuredStorage(config, logger, args.path === undefined ? {} : { path: path.resolve(io.cwd, args.path) });
  const tools = toolsOf(storage);

  const before = await tools.check(storage.context);
  printReport(io, storage, before, sub === 'check' ? 'check' : 'before repair');
  if (sub === 'check') return before.healthy ? EXIT.OK : EXIT.FAILURE;
  if (before.healthy) {
    io.out('nothing to repair');
    return EXIT.OK;
  }
  if (args.yes !== true) {
    if (!prompt.interactive)
      throw new BifroError(
        'BIFRO_STORAGE_REPAIR_UNCONFIRMED',
        'not repaired: run `bifro storage repair` again with --yes to drop what is listed above',
      );
    const answer = await prompt.ask(`Repair ${before.location}, dropping what it loses? [y/N] `);
    if (!/^y(es)?$/i.test(answer.trim())) throw new BifroError('BIFRO_STORAGE_REPAIR_UNCONFIRMED', 'not repaired (not confirmed)');
  }
  const after = await tools.repair(storage.context, { backup: args.noBackup !== true });
  printReport(io, storage, after, 'repaired');
  return EXIT.OK;
}

function toolsOf(storage: ConfiguredStorage): StorageTools {
  const tools = storage.tools;
  if (tools === undefined || typeof tools.check !== 'function' || typeof tools.repair !== 'function')
    throw new BifroError(
      'BIFRO_STORAGE_NO_TOOLS',
      `the storage plugin ${storage.name}@${storage.version} offers no check and repair (storageTools, SPI 1.6.0)`,
      { plugin: storage.name },
    );
  return tools;
}

function printReport(io: CliIo, storage: ConfiguredStorage, report: StorageReport, title: string): void {
  io.out(`${title}: ${report.location} (${storage.name}@${storage.version})`);
  for (const finding of report.findings) io.out(`  - ${finding}`);
  io.out(`  holds: ${counts(report.holds)}`);
  if (Object.keys(report.loses).length > 0) io.out(`  ${title === 'repaired' ? 'lost' : 'a repair loses'}: ${counts(report.loses)}`);
  io.out(report.healthy ? '  status: whole' : '  status: damaged (run `bifro storage repair`)');
}

function counts(c: Readonly<Record<string, number>>): string {
  const entries = Object.entries(c);
  return entries.length === 0 ? 'nothing' : entries.map(([what, n]) => `${n} ${what}`).join(', ');
}
