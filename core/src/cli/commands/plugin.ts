import { SPI_VERSION } from '@bifro/spi';
import { listPlugins, verifyPlugin, type PluginListEntry, type VerifyReport } from '../../plugin-host';
import { UsageError } from '../cli-errors';
import { loadCliConfig } from '../cli-config';
import { EXIT, type CliIo } from '../cli-io';
import { errorSpec as specOf } from '../error-catalogue';
import { formatTable } from '../table';
import type { CommandArgs } from '../usage';

/**
 * `bifro plugin list`: exit 0, or 1 when a plugin the configuration uses cannot be loaded.
 * `bifro plugin verify <dir|name>`: exit 0 when every phase passed, 1 naming the failed phase.
 */
export async function pluginCommand(args: CommandArgs, io: CliIo): Promise<number> {
  const [sub, ...rest] = args.positionals;
  if (sub === 'list') {
    if (rest.length > 0) throw new UsageError(`bifro plugin list: unexpected argument "${rest[0]}"`);
    return list(args, io);
  }
  if (sub === 'verify') {
    if (rest.length === 0) throw new UsageError('bifro plugin verify: name the plugin folder or package to verify');
    if (rest.length > 1) throw new UsageError(`bifro plugin verify: unexpected argument "${rest[1]}"`);
    return verify(rest[0]!, args, io);
  }
  if (sub === undefined) throw new UsageError('bifro plugin: name a subcommand: list or verify');
  throw new UsageError(`bifro plugin: unknown subcommand "${sub}" (list or verify)`);
}

async function list(args: CommandArgs, io: CliIo): Promise<number> {
  const config = await loadCliConfig(args, io);
  const entries = await listPlugins(config);
  io.out(`Plugins for broker SPI ${SPI_VERSION} (plugins directory ${config.pluginsDir}):`);
  io.out(
    formatTable(
      ['NAME', 'VERSION', 'KINDS', 'SPI', 'COMPATIBLE', 'SOURCE', 'USED FOR'],
      entries.map((e) => [
        e.name,
        e.version ?? '-',
        e.kinds.join(',') || '-',
        e.spiRange ?? '-',
        e.compatible ? 'yes' : 'no',
        e.source,
        e.usedFor.join(',') || '-',
      ]),
    ),
  );
  const problems = entries.filter((e) => e.problem !== undefined);
  if (problems.length > 0) {
    io.out('');
    io.out('Problems:');
    for (const e of problems) io.out(`  ${e.name}: ${problemLine(e)}`);
  }
  const blocking = problems.filter((e) => e.usedFor.length > 0);
  return blocking.length > 0 ? EXIT.FAILURE : EXIT.OK;
}

function problemLine(e: PluginListEntry): string {
  if (!e.problem) return '';
  return `${e.problem.code}: ${withoutCode(e.problem.message, e.problem.code)}`;
}

async function verify(target: string, args: CommandArgs, io: CliIo): Promise<number> {
  const config = await loadCliConfig(args, io);
  const report = await verifyPlugin(target, { pluginsDir: config.pluginsDir, cwd: io.cwd, initTimeoutMs: config.plugins.initTimeoutMs });
  io.out(headline(report));
  io.out(
    formatTable(
      ['PHASE', 'KIND', 'RESULT', 'DETAIL'],
      report.steps.map((s) => [s.phase, s.kind ?? '', s.status, s.status === 'failed' ? (s.code ?? 'see below') : '']),
    ),
  );
  const failures = report.steps.filter((s) => s.status === 'failed');
  if (report.ok && failures.length === 0) {
    io.out(`ok: ${report.name ?? target} passed every phase`);
    return EXIT.OK;
  }
  for (const failed of failures) {
    const code = failed.code ?? 'BIFRO_PLUGIN_VERIFY_FAILED';
    io.err(
      `error ${code}: phase ${failed.phase}${failed.kind ? ` (${failed.kind})` : ''} failed: ${withoutCode(failed.message ?? 'failed', code)}`,
    );
  }
  const first = failures[0];
  const spec = first?.code ? specOf(first.code) : undefined;
  if (spec) io.err(`  hint: ${spec.remedy}`);
  if (failures.length === 0) io.err(`error: ${target} did not pass every phase`);
  return EXIT.FAILURE;
}

function headline(report: VerifyReport): string {
  const who = report.name ? `${report.name}@${report.version ?? '?'}` : report.target;
  const parts = [
    report.dir ? `folder ${report.dir}` : undefined,
    report.kinds.length > 0 ? `kinds ${report.kinds.join(', ')}` : undefined,
    `SPI range ${report.spiRange ?? '-'} (broker SPI ${report.spiVersion})`,
  ].filter((p): p is string => p !== undefined);
  return `Verifying ${who}: ${parts.join('; ')}`;
}

/** BifroError messages start with their code; avoid printing it twice. */
function withoutCode(message: string, code: string): string {
  return message.startsWith(`${code}: `) ? message.slice(code.length + 2) : message;
}
