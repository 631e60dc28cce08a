import { SPI_VERSION } from '@bifro/spi';
import { listPlugins, refsOf, verifyPlugin, type PluginListEntry, type VerifyReport } from '../../plugin-host';
import { installPlugin, readInstallRecord, removePlugin, type InstallResult } from '../../plugin-host/plugin-install';
import { PLUGIN_KEYWORD, searchPlugins, type PluginSearchHit } from '../../plugin-host/plugin-registry';
import { UsageError } from '../cli-errors';
import { loadCliConfig } from '../cli-config';
import { EXIT, type CliIo } from '../cli-io';
import { errorSpec as specOf } from '../error-catalogue';
import { formatTable } from '../table';
import type { CommandArgs } from '../usage';

/**
 * `bifro plugin list`: exit 0, or 1 when a plugin the configuration uses cannot be loaded.
 * `bifro plugin verify <dir|name>`: exit 0 when every phase passed, 1 naming the failed phase.
 * `bifro plugin install <spec>`: exit 0 when installed, 1 with the coded reason (nothing installed).
 * `bifro plugin remove <name>`: exit 0 when removed, 1 when not installed or in use (without --force).
 * `bifro plugin search [words...]`: exit 0, also when nothing is found; 1 when the registry fails.
 */
export async function pluginCommand(args: CommandArgs, io: CliIo): Promise<number> {
  const [sub, ...rest] = args.positionals;
  if (sub !== undefined && Object.prototype.hasOwnProperty.call(SUB_OPTIONS, sub)) onlyOptions(sub, args);
  if (sub === 'list') {
    if (rest.length > 0) throw new UsageError(`bifro plugin list: unexpected argument "${rest[0]}"`);
    return list(args, io);
  }
  if (sub === 'verify') {
    if (rest.length === 0) throw new UsageError('bifro plugin verify: name the plugin folder or package to verify');
    if (rest.length > 1) throw new UsageError(`bifro plugin verify: unexpected argument "${rest[1]}"`);
    return verify(rest[0]!, args, io);
  }
  if (sub === 'install') {
    if (rest.length === 0) throw new UsageError('bifro plugin install: name the package, tarball (.tgz) or folder to install');
    if (rest.length > 1) throw new UsageError(`bifro plugin install: unexpected argument "${rest[1]}" (one plugin at a time)`);
    return install(rest[0]!, args, io);
  }
  if (sub === 'remove') {
    if (rest.length === 0) throw new UsageError('bifro plugin remove: name the plugin package to remove');
    if (rest.length > 1) throw new UsageError(`bifro plugin remove: unexpected argument "${rest[1]}" (one plugin at a time)`);
    return remove(rest[0]!, args, io);
  }
  if (sub === 'search') return search(rest, args, io);
  if (sub === undefined) throw new UsageError(`bifro plugin: name a subcommand: ${SUBCOMMANDS}`);
  throw new UsageError(`bifro plugin: unknown subcommand "${sub}" (${SUBCOMMANDS})`);
}

const SUBCOMMANDS = 'list, verify, install, remove or search';

/** The options beyond --config / --help each subcommand takes. */
const SUB_OPTIONS: Readonly<Record<string, readonly ('pluginsDir' | 'registry' | 'force' | 'json' | 'allowScripts')[]>> = {
  list: ['pluginsDir'],
  verify: ['pluginsDir'],
  install: ['pluginsDir', 'registry', 'force', 'allowScripts'],
  remove: ['pluginsDir', 'force'],
  search: ['registry', 'json'],
};

const OPTION_NAMES = {
  pluginsDir: '--plugins-dir',
  registry: '--registry',
  force: '--force',
  json: '--json',
  allowScripts: '--allow-scripts',
} as const;

function onlyOptions(sub: string, args: CommandArgs): void {
  const allowed = SUB_OPTIONS[sub] ?? [];
  for (const key of Object.keys(OPTION_NAMES) as (keyof typeof OPTION_NAMES)[]) {
    if (args[key] !== undefined && !allowed.includes(key))
      throw new UsageError(`bifro plugin ${sub}: unknown option "${OPTION_NAMES[key]}"`);
  }
  if (args.registry !== undefined && !/^https?:\/\/[^/]/i.test(args.registry)) {
    throw new UsageError(`bifro plugin ${sub}: --registry: expected an http:// or https:// URL, got ${JSON.stringify(args.registry)}`);
  }
}

async function install(spec: string, args: CommandArgs, io: CliIo): Promise<number> {
  const config = await loadCliConfig(args, io);
  const allowScripts = args.allowScripts === true;
  if (allowScripts) io.out(`warning: ${ALLOW_SCRIPTS_WARNING}`);
  const result = await installPlugin(spec, {
    pluginsDir: config.pluginsDir,
    cwd: io.cwd,
    env: io.env,
    ...(args.registry === undefined ? {} : { registry: args.registry }),
    ...(args.force === true ? { force: true } : {}),
    ...(allowScripts ? { allowScripts: true } : {}),
    onProgress: (line) => io.out(line),
  });
  for (const warning of result.warnings) io.out(`warning: ${warning}`);
  io.out(installHeadline(result));
  const details: [string, string][] = [
    ['kinds', result.kinds.join(', ')],
    ['SPI range', `${result.spiRange} (broker SPI ${result.spiVersion})`],
    ['folder', result.dir],
    ['dependencies', `${result.dependencies} package${result.dependencies === 1 ? '' : 's'} in its node_modules`],
    ['integrity', result.integrity],
    ['entry', `${result.entry} (the module the broker loads)`],
    ['scripts', scriptsLine(result)],
  ];
  for (const [label, value] of details) io.out(`  ${`${label}:`.padEnd(14)}${value}`);
  for (const s of result.installScripts) io.out(`${' '.repeat(16)}${s.package} ${s.script}: ${s.command}`);
  if (result.installScripts.length > 0 && !result.scriptsRun) io.out(SCRIPTS_SKIPPED_NOTE);
  io.out(
    `Nothing of ${result.name} has run yet${result.scriptsRun && result.installScripts.length > 0 ? ' but its install scripts' : ''}: ` +
      `the broker loads ${result.entry} when it starts, and a plugin's code runs inside the broker process with its rights ` +
      `(docs/plugin-authoring.md, "Plugins are trusted code"). \`bifro plugin verify ${result.name}\` loads it now and checks every phase (this runs its code).`,
  );
  io.out(RESTART_NOTE);
  return EXIT.OK;
}

/** Why --allow-scripts is opt-in, printed whenever it is used. */
const ALLOW_SCRIPTS_WARNING =
  '--allow-scripts: npm runs the install scripts of the package and of every dependency now, as this user, with this ' +
  "shell's environment (tokens, credentials) and files, before Bifro has checked anything: they can do whatever you can. " +
  'Allow them only for a package you trust that needs them (a native module built on install).';

const SCRIPTS_SKIPPED_NOTE =
  'These install scripts were not run. A dependency that builds native code on install does not load without its script: ' +
  'if `bifro plugin verify` fails for that reason, and you trust the package, install it again with --allow-scripts --force.';

function scriptsLine(r: InstallResult): string {
  const n = r.installScripts.length;
  if (n === 0) return 'none declared';
  const what = `${n} install script${n === 1 ? '' : 's'} declared`;
  return r.scriptsRun ? `${what}, run (--allow-scripts):` : `${what}, NOT run (--allow-scripts runs them):`;
}

const RESTART_NOTE =
  'The broker loads plugins when it starts: restart it to use this version (with --workers, roll the workers: ' +
  '`kill -TERM <worker pid>` one at a time, the primary restarts each).';

function installHeadline(r: InstallResult): string {
  const id = `${r.name}@${r.version}`;
  if (r.action === 'installed') return `installed ${id}`;
  if (r.action === 'reinstalled') return `reinstalled ${id} (--force)`;
  return `${r.action} ${r.name} from ${r.previousVersion ?? '?'} to ${r.version}`;
}

async function remove(name: string, args: CommandArgs, io: CliIo): Promise<number> {
  const config = await loadCliConfig(args, io);
  const result = await removePlugin(name, { pluginsDir: config.pluginsDir, config, ...(args.force === true ? { force: true } : {}) });
  if (result.usedBy.length > 0)
    io.out(`warning: the configuration still uses ${result.name} (${result.usedBy.join(', ')}): the broker will not start with it`);
  io.out(`removed ${result.name}@${result.version} (folder ${result.dir})`);
  io.out('A running broker keeps the plugin it loaded until it restarts.');
  return EXIT.OK;
}

async function search(words: readonly string[], args: CommandArgs, io: CliIo): Promise<number> {
  const result = await searchPlugins(words, {
    cwd: io.cwd,
    env: io.env,
    ...(args.registry === undefined ? {} : { registry: args.registry }),
  });
  if (args.json === true) {
    io.out(JSON.stringify(result.hits, null, 2));
    return EXIT.OK;
  }
  const matching = words.length === 0 ? '' : ` matching "${words.join(' ')}"`;
  if (result.hits.length === 0) {
    io.out(`No Bifro plugins${matching} on ${result.registry} (packages with the keyword ${PLUGIN_KEYWORD}).`);
    return EXIT.OK;
  }
  io.out(`Bifro plugins${matching} on ${result.registry} (keyword ${PLUGIN_KEYWORD}; broker SPI ${result.spiVersion}):`);
  io.out(
    formatTable(
      ['NAME', 'VERSION', 'SPI', 'COMPATIBLE', 'KINDS', 'DESCRIPTION'],
      result.hits.map((h) => [
        h.name,
        h.version,
        h.spiRange ?? '?',
        compatibleText(h),
        h.kinds.join(',') || '-',
        shorten(h.description ?? '', 60),
      ]),
    ),
  );
  io.out(`Install one with: bifro plugin install <name>`);
  return EXIT.OK;
}

function compatibleText(hit: PluginSearchHit): string {
  return hit.compatible === undefined ? '?' : hit.compatible ? 'yes' : 'no';
}

function shorten(text: string, max: number): string {
  return text.length <= max ? text : `${text.slice(0, max - 3)}...`;
}

async function list(args: CommandArgs, io: CliIo): Promise<number> {
  const config = await loadCliConfig(args, io);
  const entries = await listPlugins(config);
  io.out(`Plugins for broker SPI ${SPI_VERSION} (plugins directory ${config.pluginsDir}):`);
  io.out(
    formatTable(
      ['NAME', 'VERSION', 'KINDS', 'SPI', 'COMPATIBLE', 'LOADABLE', 'SOURCE', 'USED FOR'],
      entries.map((e) => [
        e.name,
        e.version ?? '-',
        e.kinds.join(',') || '-',
        e.spiRange ?? '-',
        e.compatible ? 'yes' : 'no',
        e.loadable ? 'yes' : 'no',
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
  // Any plugin that cannot be loaded fails the listing: one the config uses stops the broker's start.
  const blocking = problems.filter((e) => e.usedFor.length > 0);
  if (blocking.length > 0) io.err(`error: the config uses plugins that cannot be loaded: ${blocking.map((e) => e.name).join(', ')}`);
  else if (problems.length > 0)
    io.err(`error: ${problems.length} plugin(s) cannot be loaded (not used by the config): ${problems.map((e) => e.name).join(', ')}`);
  return problems.length > 0 ? EXIT.FAILURE : EXIT.OK;
}

function problemLine(e: PluginListEntry): string {
  if (!e.problem) return '';
  return `${e.problem.code}: ${withoutCode(e.problem.message, e.problem.code)}`;
}

async function verify(target: string, args: CommandArgs, io: CliIo): Promise<number> {
  const config = await loadCliConfig(args, io);
  const report = await verifyPlugin(target, {
    pluginsDir: config.pluginsDir,
    cwd: io.cwd,
    initTimeoutMs: config.plugins.initTimeoutMs,
    // The options of the config entry that uses the plugin for that kind, so it is checked as the broker would run it.
    optionsFor: (kind, name) => refsOf(config, kind).find((ref) => ref.use === name)?.options,
  });
  io.out(headline(report));
  if (report.dir !== undefined) {
    const record = await readInstallRecord(report.dir);
    if (record !== undefined)
      io.out(
        `Installed by bifro plugin install from ${record.spec} at ${record.installedAt}: integrity ${record.integrity}; ` +
          `${record.installScripts.length} install script(s) declared, ${record.scriptsRun ? 'run' : 'not run'}`,
      );
  }
  // Phase import loads the entry module: its top-level code runs here, as at the broker's start.
  if (report.steps.some((s) => s.phase === 'import' && s.status !== 'skipped'))
    io.out(`Loaded ${report.name ?? target} (its code ran in this process, as it will in the broker's):`);
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
    for (const c of failed.cases?.failed ?? []) io.err(`  ✕ ${c.name}: ${c.message}`);
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
