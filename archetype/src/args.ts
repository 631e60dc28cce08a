import { usageError } from './cli-error';
import { KINDS, isKind } from './kinds';

/** What the command line (and npm's forwarding through the environment) asked for. */
export interface CliArgs {
  /** The target directory, as given. */
  readonly dir?: string;
  /** Raw `--kind` values (each may hold `auth,acl`); checked by `parseKinds`. */
  readonly kinds?: readonly string[];
  readonly name?: string;
  readonly description?: string;
  /** Take the default of every answer not given; never prompt. */
  readonly yes: boolean;
  /** Write into a directory that is not empty (files of the same name are replaced). */
  readonly force: boolean;
  readonly help: boolean;
  readonly version: boolean;
}

export const USAGE = `Usage: create-bifro-plugin <dir> [options]
       npm create bifro-plugin@latest <dir> [-- options]

Creates a Bifro plugin project in <dir>: package.json with its "bifro" manifest,
TypeScript sources with a small working example per kind, and tests running the
@bifro/spi conformance kits.

Options:
  -k, --kind <kinds>         kinds to provide, repeatable or comma-separated:
                             ${KINDS.join(', ')}
  -n, --name <name>          npm package name (default: bifro-plugin-<dir name>)
  -d, --description <text>   one line saying what the plugin does
  -y, --yes                  take the defaults for everything not given (kind: auth)
  -f, --force                write into <dir> even when it is not empty
  -h, --help                 print this help
  -v, --version              print the version

Without a terminal, and without --yes, every answer must be given as a flag.
Through npm without "--" (npm create bifro-plugin my-x --kind auth --yes), npm keeps
the options as its own config (npm_config_kind, npm_config_name,
npm_config_description, npm_config_yes) and may leave their values as arguments:
both are read; options after "--" win. --force needs the "--".

Examples:
  npm create bifro-plugin@latest my-auth
  npx create-bifro-plugin my-auth --kind auth,acl --name @acme/bifro-auth --yes
  create-bifro-plugin my-storage --kind storage --description "Keeps sessions in Redis" --yes
`;

const VALUE_FLAGS = {
  '--kind': 'kind',
  '-k': 'kind',
  '--name': 'name',
  '-n': 'name',
  '--description': 'description',
  '-d': 'description',
} as const;
const BOOLEAN_FLAGS = {
  '--yes': 'yes',
  '-y': 'yes',
  '--force': 'force',
  '-f': 'force',
  '--help': 'help',
  '-h': 'help',
  '--version': 'version',
  '-v': 'version',
} as const;

type ValueFlag = keyof typeof VALUE_FLAGS;
type BooleanFlag = keyof typeof BOOLEAN_FLAGS;

const isValueFlag = (flag: string): flag is ValueFlag => Object.hasOwn(VALUE_FLAGS, flag);
const isBooleanFlag = (flag: string): flag is BooleanFlag => Object.hasOwn(BOOLEAN_FLAGS, flag);

/** Whether an argument is a list of kinds (`auth`, `auth,acl`). */
function isKindList(arg: string): boolean {
  const parts = arg.split(/[\s,]+/).filter((p) => p !== '');
  return parts.length > 0 && parts.every((p) => isKind(p.toLowerCase()));
}

/** An npm config value set in the environment (`npm_config_<key>`), empty counting as unset. */
function npmConfig(env: NodeJS.ProcessEnv, key: string): string | undefined {
  const value = env[`npm_config_${key}`];
  return value === undefined || value === '' ? undefined : value;
}

/** A forwarded text value; `true` is what npm forwards for the flag without a value. */
function npmText(env: NodeJS.ProcessEnv, key: string): string | undefined {
  const value = npmConfig(env, key);
  return value === 'true' ? undefined : value;
}

/**
 * Parses the arguments after the command name. Flags given on the command line win over npm's
 * forwarded `npm_config_*` values. Unknown flags, a flag without its value and a second
 * directory are usage errors.
 */
export function parseArgs(argv: readonly string[], env: NodeJS.ProcessEnv = {}): CliArgs {
  const positional: string[] = [];
  const kinds: string[] = [];
  const values: { name?: string; description?: string } = {};
  const booleans = { yes: false, force: false, help: false, version: false };
  let onlyPositional = false;
  for (let i = 0; i < argv.length; i++) {
    const arg = argv[i];
    if (onlyPositional || !arg.startsWith('-') || arg === '-') {
      positional.push(arg);
      continue;
    }
    if (arg === '--') {
      onlyPositional = true;
      continue;
    }
    const eq = arg.startsWith('--') ? arg.indexOf('=') : -1;
    const flag = eq < 0 ? arg : arg.slice(0, eq);
    if (isBooleanFlag(flag)) {
      if (eq >= 0) {
        const v = arg.slice(eq + 1).toLowerCase();
        if (v !== 'true' && v !== 'false') throw usageError(`${flag} takes no value (got ${JSON.stringify(arg.slice(eq + 1))})`);
        booleans[BOOLEAN_FLAGS[flag]] = v === 'true';
      } else {
        booleans[BOOLEAN_FLAGS[flag]] = true;
      }
      continue;
    }
    if (isValueFlag(flag)) {
      let value: string;
      if (eq >= 0) value = arg.slice(eq + 1);
      else if (i + 1 < argv.length && !(argv[i + 1].startsWith('-') && argv[i + 1] !== '-')) value = argv[++i];
      else throw usageError(`${flag} needs a value`);
      const key = VALUE_FLAGS[flag];
      if (key === 'kind') kinds.push(value);
      else values[key] = value;
      continue;
    }
    throw usageError(`unknown option ${flag} (see --help)`);
  }
  const envKind = npmConfig(env, 'kind');
  let forwardedKinds: string[] | undefined;
  if (kinds.length === 0 && envKind !== undefined) {
    const parts = envKind.split(/\n\n/);
    if (parts.every((p) => p === 'true')) {
      // `--kind auth` without `--`: npm took --kind for a boolean (npm_config_kind=true) and left
      // its value among the arguments. Take back one kind list per --kind, from the end.
      forwardedKinds = [];
      for (let n = 0; n < parts.length; n++) {
        const at = positional.findLastIndex(isKindList);
        if (at < 0) break;
        forwardedKinds.unshift(...positional.splice(at, 1));
      }
      if (forwardedKinds.length === 0) forwardedKinds = undefined;
    } else {
      forwardedKinds = [envKind];
    }
  }
  let description = values.description ?? npmText(env, 'description');
  // `--description "text"` without `--`: npm knows `description` as a boolean of its own and
  // leaves the text as an argument.
  if (description === undefined && env.npm_command !== undefined && positional.length === 2) description = positional.pop();
  if (positional.length > 1) {
    const hint =
      env.npm_command !== undefined ? '; through npm, put the options after --: npm create bifro-plugin <dir> -- --kind auth' : '';
    throw usageError(`one target directory expected, got ${positional.map((p) => JSON.stringify(p)).join(', ')}${hint}`);
  }

  const envYes = npmConfig(env, 'yes');
  return {
    dir: positional[0],
    kinds: kinds.length > 0 ? kinds : forwardedKinds,
    name: values.name ?? npmText(env, 'name'),
    description,
    yes: booleans.yes || envYes === 'true' || envYes === '1',
    force: booleans.force,
    help: booleans.help,
    version: booleans.version,
  };
}
