import { parseArgs, type ParseArgsConfig } from 'node:util';
import { MAX_WORKERS } from '../runtime/config-schema';
import { parsePort } from '../runtime/env-overrides';
import { UsageError } from './cli-errors';

export const USAGE = `Usage: bifro <command> [options]

Commands:
  start                     start the broker in the foreground (--daemon: in the background)
  stop                      stop the broker named by the pid file (SIGTERM, waits up to 10 s)
  status                    say whether the broker is running (exit 0) or not (exit 3)
  plugin list               list the plugins found, their versions, kinds and compatibility
  plugin verify <dir|name>  run every load phase of one plugin and report each
  plugin install <spec>     install a plugin (npm name[@version], .tgz or folder) with its
                            dependencies into the plugins directory
  plugin remove <name>      remove an installed plugin from the plugins directory
  plugin search [words...]  list the plugins on the npm registry (keyword bifro-plugin)
  storage check             report what the storage's data holds, what is damaged and what a
                            repair would lose (the broker stopped; bifro help storage)
  storage repair            repair the storage's data, keeping what can be read (after a copy)
  passwd [-c|-D] FILE USER  create or edit a password file of @bifro/plugin-auth-file, like
                            mosquitto_passwd (bifro help passwd)
  token create --name N     a new admin API token (--tenant T: scoped to one tenant) and the
                            api.tokens line to paste (bifro help token)
  bench <scenario>          load-test any MQTT broker (bifro bench --help; --list: the scenarios)
  help [command]            show this help, or a command's

Options:
  -c, --config <file>       configuration file (default: conf/bifro.yml when present, else built-in defaults)
  -p, --port <n>            port of the first tcp listener, 0 = any free port        (start)
      --data-dir <dir>      data directory: pid file, log, storage (start, stop, status, storage)
      --path <dir>          the storage's own directory (its \`path\` option)          (storage)
      --yes                 repair without asking                          (storage repair)
      --no-backup           repair without copying the data directory first (storage repair)
      --plugins-dir <dir>   plugins directory                                   (start, plugin)
      --registry <url>      npm registry instead of npm's setting    (plugin install, search)
      --force               install the same version again; remove a plugin in use
                                                                 (plugin install, remove)
      --json                print the result as JSON                         (plugin search)
      --allow-scripts       let npm run the package's install scripts (off: they run
                            as you, before any check)                  (plugin install)
      --daemon              run in the background, logging to <dataDir>/bifro.log   (start)
      --workers <n>         worker processes sharing the tcp listeners, tenants split
                            between them (docs/multicore.md); default 1      (start)
  -h, --help                show help
  -v, --version             print the version

Environment:
  BIFRO_CONFIG, BIFRO_NODE_ID, BIFRO_DATA_DIR, BIFRO_PLUGINS_DIR, BIFRO_LOG_LEVEL,
  BIFRO_LOG_PRETTY (true/false), BIFRO_PORT. Precedence: options > environment > file > defaults.

Exit codes:
  0 ok, 1 runtime failure, 2 usage or configuration error, 3 not running (status)`;

export const COMMAND_USAGE: Readonly<Record<string, string>> = {
  start: `Usage: bifro start [--config F] [--port N] [--data-dir D] [--plugins-dir P] [--workers N] [--daemon]

Loads the configuration, loads the plugins and opens the listeners. In the foreground it writes
the pid file and stops gracefully on SIGINT/SIGTERM. With --daemon it starts itself in the
background, waits until the broker listens, prints its pid and exits; the background broker
logs to <dataDir>/bifro.log.

With --workers N (or \`workers: N\` in the config) above 1, this process forks N worker processes
that share the tcp listeners; each tenant is served by one of them, and the data directory keeps
that count (docs/multicore.md).`,
  stop: `Usage: bifro stop [--config F] [--data-dir D]

Sends SIGTERM to the broker named by the pid file and waits up to 10 s for it to exit.
Exit 1 when no broker is running.`,
  status: `Usage: bifro status [--config F] [--data-dir D]

Prints whether the broker named by the pid file is running. Exit 0 when running, 3 when not.`,
  storage: `Usage: bifro storage check [--config F] [--data-dir D] [--path P]
       bifro storage repair [--config F] [--data-dir D] [--path P] [--yes] [--no-backup]

Runs the offline tools of the storage plugin the configuration uses (plugins.storage, else the
default @bifro/plugin-storage-level) on its data. The broker must be stopped: both refuse while
the pid file names a running broker. --path sets the storage's \`path\` option (the directory a
refusal at start names).

check:  reads the data without changing it and reports what it holds, what is damaged (a
        write-ahead log that lost acknowledged writes, unreadable table blocks, records that do
        not fit together) and what a repair would lose. Exit 0 when nothing is damaged, 1 when a
        repair is needed.
repair: reports as check does, then (with --yes, or after a y at the prompt) copies the data
        directory aside (unless --no-backup), repairs it keeping everything that can be read,
        and prints what it did. The broker starts on the repaired data.`,
  plugin: `Usage: bifro plugin list [--config F] [--plugins-dir P]
       bifro plugin verify <dir|name> [--config F] [--plugins-dir P]
       bifro plugin install <name[@range|@version] | file.tgz | folder> [--config F] [--plugins-dir P]
                            [--registry URL] [--force] [--allow-scripts]
       bifro plugin remove <name> [--config F] [--plugins-dir P] [--force]
       bifro plugin search [words...] [--registry URL] [--json]

list:   the plugins in the plugins directory and plugins.packages, with version, kinds, SPI
        range, whether they are compatible with this broker and which config entries use them.
verify: runs resolve → manifest → version → import → shape → instantiate → instanceShape → init → close
        on one plugin
        (a folder path, or a package name looked up like the broker does) and reports each phase.
        Verifying loads the plugin: its code runs, as it does when the broker starts.

install: fetches the package with npm (a name from the registry, a tarball, or a folder packed as
         npm would publish it; paths start with ./ or / or end in .tgz) and installs its runtime
         dependencies into its own node_modules (not @bifro/spi: the broker shares its own), all
         in a staging folder of the plugins directory; then moves it into place as
         <pluginsDir>/<name> (@scope/name → scope+name). Nothing of the package runs: npm runs
         no install script (--allow-scripts lets it, for a package you trust that needs them),
         and the plugin is not loaded. It prints the package's integrity (sha512), the entry
         module the broker will load and the install scripts declared (run or not). Refused,
         leaving the plugins directory as it was: a package without a "bifro" field, an SPI
         range this broker does not implement, an entry module missing from the package.
         \`bifro plugin verify <name>\` then loads it and checks every phase.
         An installed other version is replaced (upgraded or downgraded); the same version only
         with --force. npm's configuration applies (.npmrc, npm_config_* variables); --registry
         overrides the registry. The broker loads plugins when it starts: restart it to use the
         plugin (with --workers: \`kill -TERM <worker pid>\`, one worker at a time; the primary
         restarts it with the new version).

remove:  deletes the folder of that package from the plugins directory; refused while the loaded
         config uses the plugin (the keys are named) unless --force.

search:  packages with the keyword bifro-plugin on the registry (--registry, else npm's), with
         their latest version, description, SPI range and whether this broker's SPI fits.`,
};

/** `bifro token` parses its own options. */
export const TOKEN_USAGE = `Usage: bifro token create --name NAME [--tenant TENANT]

Prints a new random admin API token on standard output, and on standard error the line to paste
under api.tokens in the broker configuration: { name, hash: "sha256:<hex>", tenant }. The broker
keeps only the hash; the token is shown once. A token with --tenant sees and changes only that
tenant; without it is an admin token (docs/api.md § Security).`;

/** `bifro passwd` parses its own options (-c is "create" there, not --config). */
export const PASSWD_USAGE = `Usage: bifro passwd [-c [--force]] [--tenant T] [--password-stdin] [--scram [--scram-iterations N]]
                   [--attr NAME=VALUE]... FILE USER
       bifro passwd -D [--tenant T] FILE USER

Adds a user to the password file of @bifro/plugin-auth-file, or changes its password (scrypt,
N=2^15 r=8 p=1), like mosquitto_passwd. The password is asked twice on the terminal without echo,
or read as one line of standard input with --password-stdin; never given on the command line.
Other lines (comments, other users, mosquitto $7$ lines) are kept. The file is replaced
atomically (temporary file + rename) with mode 0600; a running broker reloads it.

  -c                   create FILE (refused when it exists, unless --force replaces it)
  -D                   delete USER
      --tenant T       the user's tenant, written on the line (tenant:user:...); without it the
                       line names none and the plugin option \`tenant\` applies (default "default")
      --password-stdin read the password from the first line of standard input
      --scram          also store SCRAM-SHA-256 and SCRAM-SHA-512 credentials (salted keys) for
                       MQTT 5 enhanced authentication; kept up to date once a line has them
      --scram-iterations N  PBKDF2 iterations of new SCRAM credentials (default 4096, at least 4096)
      --attr NAME=VALUE     set an attribute (repeatable; --attr NAME removes it); others are kept
  -h, --help           show this help

Exit codes: 0 ok, 1 failure (file missing without -c, exists with -c, unknown user for -D,
passwords differ, cannot write), 2 usage error.`;

const COMMON = {
  config: { type: 'string', short: 'c' },
  help: { type: 'boolean', short: 'h' },
} as const;

export const COMMAND_OPTIONS = {
  start: {
    ...COMMON,
    port: { type: 'string', short: 'p' },
    'data-dir': { type: 'string' },
    'plugins-dir': { type: 'string' },
    daemon: { type: 'boolean' },
    workers: { type: 'string' },
  },
  stop: { ...COMMON, 'data-dir': { type: 'string' } },
  status: { ...COMMON, 'data-dir': { type: 'string' } },
  storage: {
    ...COMMON,
    'data-dir': { type: 'string' },
    path: { type: 'string' },
    yes: { type: 'boolean' },
    'no-backup': { type: 'boolean' },
  },
  plugin: {
    ...COMMON,
    'plugins-dir': { type: 'string' },
    registry: { type: 'string' },
    force: { type: 'boolean' },
    json: { type: 'boolean' },
    'allow-scripts': { type: 'boolean' },
  },
} as const;

export type CommandName = keyof typeof COMMAND_OPTIONS;

/** Parsed options of one command. */
export interface CommandArgs {
  readonly config?: string;
  readonly port?: number;
  readonly dataDir?: string;
  readonly pluginsDir?: string;
  /** `start --workers N`. */
  readonly workers?: number;
  /** `plugin install|search --registry URL`. */
  readonly registry?: string;
  /** `plugin install|remove --force`. */
  readonly force?: boolean;
  /** `plugin search --json`. */
  readonly json?: boolean;
  /** `plugin install --allow-scripts`: npm runs install scripts. */
  readonly allowScripts?: boolean;
  /** `storage --path DIR`. */
  readonly path?: string;
  /** `storage repair --yes`. */
  readonly yes?: boolean;
  /** `storage repair --no-backup`. */
  readonly noBackup?: boolean;
  readonly daemon: boolean;
  readonly help: boolean;
  readonly positionals: readonly string[];
}

/** Parses a command's arguments strictly: unknown options and missing values are usage errors. */
export function parseCommandArgs(command: CommandName, args: readonly string[]): CommandArgs {
  const options: NonNullable<ParseArgsConfig['options']> = COMMAND_OPTIONS[command];
  let parsed: { values: Record<string, string | boolean | (string | boolean)[] | undefined>; positionals: string[] };
  try {
    parsed = parseArgs({ args: [...args], options, allowPositionals: true, strict: true });
  } catch (err) {
    throw new UsageError(`bifro ${command}: ${describeParseError(err)}`);
  }
  const { values, positionals } = parsed;
  const text = (name: string): string | undefined => {
    const value = values[name];
    if (typeof value !== 'string') return undefined;
    if (value.trim() === '') throw new UsageError(`bifro ${command}: --${name} needs a value`);
    return value;
  };
  let port: number | undefined;
  const portText = text('port');
  if (portText !== undefined) {
    port = parsePort(portText);
    if (port === undefined) throw new UsageError(`bifro ${command}: --port: expected integer 0..65535, got ${JSON.stringify(portText)}`);
  }
  let workers: number | undefined;
  const workersText = text('workers');
  if (workersText !== undefined) {
    workers = /^\d{1,3}$/.test(workersText.trim()) ? Number(workersText.trim()) : undefined;
    if (workers === undefined || workers < 1 || workers > MAX_WORKERS)
      throw new UsageError(`bifro ${command}: --workers: expected integer 1..${MAX_WORKERS}, got ${JSON.stringify(workersText)}`);
  }
  const result: CommandArgs = {
    daemon: values.daemon === true,
    help: values.help === true,
    positionals,
    ...optional('config', text('config')),
    ...optional('port', port),
    ...optional('dataDir', text('data-dir')),
    ...optional('pluginsDir', text('plugins-dir')),
    ...optional('workers', workers),
    ...optional('registry', text('registry')),
    ...(values.force === true ? { force: true } : {}),
    ...(values.json === true ? { json: true } : {}),
    ...(values['allow-scripts'] === true ? { allowScripts: true } : {}),
    ...optional('path', text('path')),
    ...(values.yes === true ? { yes: true } : {}),
    ...(values['no-backup'] === true ? { noBackup: true } : {}),
  };
  return result;
}

function optional<K extends string, V>(key: K, value: V | undefined): Partial<Record<K, V>> {
  return value === undefined ? {} : ({ [key]: value } as Partial<Record<K, V>>);
}

/** node:util parseArgs messages, shortened to what the user needs. */
function describeParseError(err: unknown): string {
  if (!(err instanceof Error)) return String(err);
  const code = (err as NodeJS.ErrnoException).code;
  const quoted = /'([^']+)'/.exec(err.message)?.[1];
  if (code === 'ERR_PARSE_ARGS_UNKNOWN_OPTION' && quoted) return `unknown option "${quoted}"`;
  if (code === 'ERR_PARSE_ARGS_INVALID_OPTION_VALUE' && quoted) return `option ${quoted} needs a value`;
  return err.message.split(/\.\s|\n/)[0] ?? err.message;
}
