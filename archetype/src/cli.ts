import path from 'node:path';
import type { PluginKind } from '@bifro/spi';
import { USAGE, parseArgs, type CliArgs } from './args';
import { CliError, EXIT, usageError } from './cli-error';
import { bypassValues, createPluginGenerator, plannedFiles, templateData, type TemplateData } from './generator';
import { DEFAULT_KIND, isKind, parseKinds } from './kinds';
import { defaultPackageName, packageNameProblem } from './names';
import { checkTarget, defaultDescription, displayPath, type PluginAnswers } from './project';
import { checkVendorable, vendorSpi } from './spi-source';
import { ownVersion } from './versions';

/** Where the command reads and writes; `process` by default, replaced in tests. */
export interface CliIo {
  readonly env: NodeJS.ProcessEnv;
  readonly cwd: string;
  /** Whether prompts can be shown (stdin and stdout are terminals). */
  readonly interactive: boolean;
  readonly out: (text: string) => void;
  readonly err: (text: string) => void;
}

function processIo(): CliIo {
  return {
    env: process.env,
    cwd: process.cwd(),
    interactive: process.stdin.isTTY === true && process.stdout.isTTY === true,
    out: (text) => process.stdout.write(text),
    err: (text) => process.stderr.write(text),
  };
}

/** The flags and checked values given before any prompt. */
interface Known {
  readonly dir?: string;
  readonly name?: string;
  readonly kinds?: readonly PluginKind[];
  readonly description?: string;
}

/** A description on one line (`bifro.description` is shown as one line by `bifro plugin list`). */
function oneLine(text: string): string {
  return text.replace(/\s+/g, ' ').trim();
}

function checkName(name: string): string {
  const problem = packageNameProblem(name);
  if (problem !== undefined) throw usageError(`invalid package name ${JSON.stringify(name)} (--name): ${problem}`);
  return name;
}

function known(args: CliArgs): Known {
  const kinds = args.kinds === undefined ? undefined : parseKinds(args.kinds);
  if (kinds !== undefined && kinds.length === 0) throw usageError('--kind names no kind');
  return {
    dir: args.dir,
    name: args.name === undefined ? undefined : checkName(args.name.trim()),
    kinds,
    description: args.description === undefined ? undefined : oneLine(args.description),
  };
}

/** The answers without prompting: every flag given, or `--yes` for the defaults. */
function answersFromFlags(k: Known, args: CliArgs, cwd: string): PluginAnswers {
  const missing: string[] = [];
  if (k.dir === undefined) missing.push('<dir>');
  if (!args.yes) {
    if (k.name === undefined) missing.push('--name');
    if (k.kinds === undefined) missing.push('--kind');
    if (k.description === undefined) missing.push('--description');
  }
  if (missing.length > 0) {
    const hint = args.yes ? '' : ' or --yes to take the defaults';
    throw usageError(
      `no terminal to ask on: missing ${missing.join(', ')} (give ${missing.length === 1 ? 'it' : 'them'}${hint}; see --help)`,
    );
  }
  const directory = path.resolve(cwd, k.dir!);
  const kinds = k.kinds ?? [DEFAULT_KIND];
  return {
    directory,
    name: k.name ?? defaultPackageName(directory),
    kinds,
    description: k.description || defaultDescription(kinds),
  };
}

/** Checks what the prompts returned (they validate, but a bypassed value skips the prompt's own UI). */
function checkedAnswers(raw: Record<string, unknown>, cwd: string): PluginAnswers {
  const kinds = Array.isArray(raw.kinds) ? raw.kinds.filter((k): k is PluginKind => typeof k === 'string' && isKind(k)) : [];
  if (kinds.length === 0) throw usageError('no kind chosen');
  const directory = path.resolve(cwd, String(raw.directory ?? ''));
  const name = checkName(String(raw.name ?? '').trim());
  const description = oneLine(String(raw.description ?? ''));
  return { directory, name, kinds: parseKinds(kinds), description: description || defaultDescription(kinds) };
}

function isPromptExit(err: unknown): boolean {
  return err instanceof Error && (err.name === 'ExitPromptError' || /force closed|User force closed/i.test(err.message));
}

/**
 * Runs `create-bifro-plugin` with the arguments after the command name and resolves to the exit
 * code: 0 created, 1 not written (target not empty, an action failed), 2 usage error, 130
 * interrupted.
 */
export async function main(argv: readonly string[], io: CliIo = processIo()): Promise<number> {
  try {
    return await run(argv, io);
  } catch (err) {
    if (err instanceof CliError) {
      io.err(`error: ${err.message}\n`);
      if (err.exitCode === EXIT.USAGE) io.err('Run create-bifro-plugin --help for the usage.\n');
      return err.exitCode;
    }
    if (isPromptExit(err)) {
      io.err('cancelled\n');
      return EXIT.INTERRUPTED;
    }
    io.err(`error: ${err instanceof Error ? (err.stack ?? err.message) : String(err)}\n`);
    return EXIT.FAILED;
  }
}

async function run(argv: readonly string[], io: CliIo): Promise<number> {
  const args = parseArgs(argv, io.env);
  if (args.help) {
    io.out(USAGE);
    return EXIT.OK;
  }
  if (args.version) {
    io.out(`${ownVersion()}\n`);
    return EXIT.OK;
  }
  const k = known(args);
  if (k.dir !== undefined) checkTarget(path.resolve(io.cwd, k.dir), args.force);

  const generator = await createPluginGenerator(args.force);
  let answers: PluginAnswers;
  if (io.interactive && !args.yes) {
    const dir = k.dir === undefined ? undefined : path.resolve(io.cwd, k.dir);
    const raw = (await generator.runPrompts(bypassValues({ ...k, dir }))) as Record<string, unknown>;
    answers = checkedAnswers(raw, io.cwd);
    checkTarget(answers.directory, args.force);
  } else {
    answers = answersFromFlags(k, args, io.cwd);
  }

  const data = templateData(answers);
  checkVendorable(data.spi);
  const result = await generator.runActions(data);
  if (result.failures.length > 0) {
    const lines = result.failures.map((f) => `  ${f.type}${f.path ? ` ${f.path}` : ''}: ${f.error}`);
    throw new CliError(`could not write the project in ${answers.directory}:\n${lines.join('\n')}`, EXIT.FAILED);
  }
  if (data.spi.from === 'vendored') await vendorSpi(data.spi, answers.directory, io.env);

  io.out(nextSteps(data, io.cwd));
  return EXIT.OK;
}

/** What was created, and the commands that take it to a running broker, exactly as they work from here. */
function nextSteps(data: TemplateData, cwd: string): string {
  const where = displayPath(data.directory, cwd);
  const files = [...plannedFiles(data.kinds), ...(data.spiTarball === undefined ? [] : [data.spiTarball])].sort();
  const quote = (p: string): string => (/[\s"'$]/.test(p) ? JSON.stringify(p) : p);
  const lines = [`Created ${data.name} (${data.kinds.join(', ')}) in ${where}:`, ...files.map((f) => `  ${f}`), ''];
  if (data.spi.from === 'vendored') {
    lines.push(
      `@bifro/spi ${data.spiVersion} comes from ${data.spi.sourceDir} (not from a registry): packed into ${data.spiTarball},`,
      `the project's devDependency. Once @bifro/spi is on your registry: npm install -D @bifro/spi@${data.spiRange}`,
      '',
    );
  }
  lines.push(
    'Next steps:',
    `  cd ${quote(where)} && npm install && npm test && npm run build && npm run pack`,
    '',
    `Then, from the broker's folder, install the tarball npm run pack writes, and restart the broker:`,
    `  npx bifro plugin install ${quote(path.join(data.directory, data.tarball))}`,
    'and select it in the broker config (conf/bifro.yml), for example:',
    '  plugins:',
    `    ${data.kinds[0]}:`,
    ['auth', 'acl', 'events'].includes(data.kinds[0]!) ? `      - use: '${data.name}'` : `      use: '${data.name}'`,
  );
  if (data.kinds.includes('auth')) {
    lines.push(
      '',
      `Without options its auth example accepts one user: user name "demo" (the login, as is), password`,
      `"demo-secret", in tenant "demo". Configure options.users before production.`,
    );
  }
  lines.push('README.md shows every option, and how to check it with bifro plugin verify.', '');
  return lines.join('\n');
}
