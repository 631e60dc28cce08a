#!/usr/bin/env node
/**
 * `bifro`: the broker's command line.
 *
 *   bifro start [--config F] [--port N] [--data-dir D] [--plugins-dir P] [--workers N] [--daemon]
 *   bifro stop [--config F] [--data-dir D]
 *   bifro status [--config F] [--data-dir D]
 *   bifro plugin list [--config F] [--plugins-dir P]
 *   bifro plugin verify <dir|name> [--config F] [--plugins-dir P]
 *   bifro storage check|repair [--config F] [--data-dir D] [--path P] [--yes] [--no-backup]
 *   bifro passwd [-c|-D] [--tenant T] [--password-stdin] [--scram] [--attr K=V]... FILE USER   (@bifro/plugin-auth-file)
 *   bifro token create --name N [--tenant T]   (a new admin API token and its api.tokens line)
 *   bifro bench <scenario> [--host H] [--port N] [params...] | --list   (core/bench: the load generator)
 *   bifro help [command] | --help | --version
 *
 * Exit codes:
 *   0  ok
 *   1  runtime failure (a required plugin failed, a port is in use, not running for `stop`, ...)
 *   2  usage or configuration error (unknown command or option, invalid config file or BIFRO_* variable)
 *   3  not running (`status`)
 *
 * Expected errors are printed as `error CODE: message` plus a hint from the error catalogue; only
 * unexpected errors (bugs) print a stack trace.
 */
import { readFileSync } from 'node:fs';
import path from 'node:path';
import { SPI_VERSION } from '@bifro/spi';
import { UsageError } from './cli-errors';
import { EXIT, type CliIo } from './cli-io';
import { reportError } from './error-report';
import { COMMAND_OPTIONS, COMMAND_USAGE, PASSWD_USAGE, TOKEN_USAGE, USAGE, parseCommandArgs, type CommandName } from './usage';

/** The version of @bifro/core (this CLI). */
export function cliVersion(): string {
  try {
    const pkg = JSON.parse(readFileSync(path.join(__dirname, '..', '..', 'package.json'), 'utf8')) as { version?: unknown };
    return typeof pkg.version === 'string' ? pkg.version : 'unknown';
  } catch {
    return 'unknown';
  }
}

/**
 * Each command's module is loaded when it runs: `start` pulls in the broker (fastify, the plugin
 * host, ...) and `stop`/`status` the config loader, about 0.5 s that `--version`, `token` or
 * `passwd` should not pay on every call.
 */
/* eslint-disable @typescript-eslint/no-require-imports */
const commands = {
  bench: () => require('./commands/bench') as typeof import('./commands/bench'),
  passwd: () => require('./commands/passwd') as typeof import('./commands/passwd'),
  plugin: () => require('./commands/plugin') as typeof import('./commands/plugin'),
  start: () => require('./commands/start') as typeof import('./commands/start'),
  status: () => require('./commands/status') as typeof import('./commands/status'),
  storage: () => require('./commands/storage') as typeof import('./commands/storage'),
  stop: () => require('./commands/stop') as typeof import('./commands/stop'),
  token: () => require('./commands/token') as typeof import('./commands/token'),
};
/* eslint-enable @typescript-eslint/no-require-imports */

function isCommand(name: string): name is CommandName {
  return Object.prototype.hasOwnProperty.call(COMMAND_OPTIONS, name);
}

/**
 * Runs one command line (without `node` and the script) and resolves with the exit code.
 * `script` is the path of this CLI, used by `start --daemon` to start itself in the background.
 */
export async function main(argv: readonly string[], io: CliIo, script: string = __filename): Promise<number> {
  try {
    const [first, ...rest] = argv;
    if (first === undefined) {
      io.err(USAGE);
      return EXIT.USAGE;
    }
    if (first === '--help' || first === '-h') {
      io.out(USAGE);
      return EXIT.OK;
    }
    if (first === '--version' || first === '-v') {
      io.out(`bifro ${cliVersion()} (SPI ${SPI_VERSION}, node ${process.version})`);
      return EXIT.OK;
    }
    if (first === 'help') {
      const topic = rest[0];
      if (topic === undefined) io.out(USAGE);
      else if (topic === 'bench') io.out(commands.bench().benchUsage(io));
      else if (topic === 'passwd') io.out(PASSWD_USAGE);
      else if (topic === 'token') io.out(TOKEN_USAGE);
      else if (isCommand(topic)) io.out(COMMAND_USAGE[topic] ?? USAGE);
      else throw new UsageError(`unknown command "${topic}"`);
      return EXIT.OK;
    }
    if (first.startsWith('-')) throw new UsageError(`unknown option "${first}" (options go after the command)`);
    if (first === 'bench') return await commands.bench().benchCommand(rest, io);
    if (first === 'passwd') return await commands.passwd().passwdCommand(rest, io, undefined, PASSWD_USAGE);
    if (first === 'token') return await commands.token().tokenCommand(rest, io, TOKEN_USAGE);
    if (!isCommand(first)) throw new UsageError(`unknown command "${first}"`);

    const args = parseCommandArgs(first, rest);
    if (args.help) {
      io.out(COMMAND_USAGE[first] ?? USAGE);
      return EXIT.OK;
    }
    switch (first) {
      case 'start':
        if (args.positionals.length > 0) throw new UsageError(`bifro start: unexpected argument "${args.positionals[0]}"`);
        return await commands.start().startCommand(args, rest, io, script);
      case 'stop':
        if (args.positionals.length > 0) throw new UsageError(`bifro stop: unexpected argument "${args.positionals[0]}"`);
        return await commands.stop().stopCommand(args, io);
      case 'status':
        if (args.positionals.length > 0) throw new UsageError(`bifro status: unexpected argument "${args.positionals[0]}"`);
        return await commands.status().statusCommand(args, io);
      case 'plugin':
        return await commands.plugin().pluginCommand(args, io);
      case 'storage':
        return await commands.storage().storageCommand(args, io);
    }
  } catch (err) {
    return reportError(err, io);
  }
}

/** The real process: stdout/stderr, cwd and environment. */
export const processIo: CliIo = {
  out: (text) => process.stdout.write(`${text}\n`),
  err: (text) => process.stderr.write(`${text}\n`),
  cwd: process.cwd(),
  env: process.env,
};

if (require.main === module) {
  main(process.argv.slice(2), processIo).then(
    (code) => process.exit(code),
    (err: unknown) => {
      process.stderr.write(`error: unexpected failure: ${String(err)}\n`);
      process.exit(EXIT.FAILURE);
    },
  );
}
