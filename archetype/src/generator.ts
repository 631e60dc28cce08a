import { readdirSync } from 'node:fs';
import path from 'node:path';
import type { PluginKind } from '@bifro/spi';
import type { ActionType, NodePlopAPI, PlopGenerator, PromptQuestion } from 'node-plop' with { 'resolution-mode': 'import' };
import { DEFAULT_KIND, KIND_INFO, KINDS, describeKinds, isKind } from './kinds';
import { defaultPackageName, errorCodePrefix, packageNameProblem } from './names';
import { defaultDescription, targetProblem, type PluginAnswers } from './project';
import { spiDependency, type SpiDependency } from './spi-source';
import { TOOLCHAIN, spiVersion } from './versions';

/** Where the templates are: `templates/common/` for every project, `templates/<kind>/` per kind. */
export const TEMPLATES_DIR = path.resolve(__dirname, '..', 'templates');

/** The name of the node-plop generator. */
export const GENERATOR_NAME = 'plugin';

/** The version of a new project. */
export const PROJECT_VERSION = '0.1.0';

/** Template files whose output name starts with a dot (npm drops `.gitignore` from published packages). */
const DOTFILES = new Set(['gitignore']);

/** What the templates render from: the answers plus what follows from them. */
export interface TemplateData extends PluginAnswers {
  /** The version of the new package: {@link PROJECT_VERSION}. */
  readonly version: string;
  /** The `@bifro/spi` version this generator depends on, e.g. `1.1.0`. */
  readonly spiVersion: string;
  /** The range the plugin declares (`bifro.spi`, peer dependency): `^<spiVersion>`. */
  readonly spiRange: string;
  /** Where the project's devDependency on `@bifro/spi` comes from: the range, or a tarball packed into the project. */
  readonly spi: SpiDependency;
  /** The tarball of a vendored SPI (`vendor/bifro-spi-<version>.tgz`), else undefined. */
  readonly spiTarball: string | undefined;
  /** Prefix of the plugin's error codes, e.g. `ACME_AUTH_LDAP`. */
  readonly errorPrefix: string;
  readonly keywords: readonly string[];
  /** The file `npm pack` writes, e.g. `acme-bifro-auth-ldap-0.1.0.tgz`. */
  readonly tarball: string;
  readonly devDependencies: Readonly<Record<string, string>>;
}

/**
 * The template data for a set of answers; `spi` says where the SPI of the project's devDependency
 * comes from (by default: a registry, or the clone this generator runs from, see spi-source.ts).
 */
export function templateData(answers: PluginAnswers, spi?: SpiDependency): TemplateData {
  const version = spiVersion();
  const spiRange = `^${version}`;
  const dependency = spi ?? spiDependency(version);
  return {
    ...answers,
    version: PROJECT_VERSION,
    spiVersion: version,
    spiRange,
    spi: dependency,
    spiTarball: dependency.from === 'vendored' ? dependency.tarball : undefined,
    errorPrefix: errorCodePrefix(answers.name),
    keywords: ['bifro-plugin', ...answers.kinds.map((k) => `bifro-${k}`)],
    tarball: `${answers.name.replace(/^@/, '').replace('/', '-')}-${PROJECT_VERSION}.tgz`,
    devDependencies: { '@bifro/spi': dependency.spec, ...TOOLCHAIN },
  };
}

/** The files a project gets, relative to its directory, from `common/` and each kind's folder. */
export function plannedFiles(kinds: readonly PluginKind[]): string[] {
  const out: string[] = [];
  for (const folder of ['common', ...kinds]) {
    for (const file of templateFiles(path.join(TEMPLATES_DIR, folder))) out.push(outputPath(file));
  }
  return out.sort();
}

/** Template files under `dir` (relative to it, `/`-separated). */
function templateFiles(dir: string): string[] {
  return readdirSync(dir, { recursive: true, withFileTypes: true })
    .filter((e) => e.isFile() && e.name.endsWith('.hbs'))
    .map((e) => path.relative(dir, path.join(e.parentPath, e.name)).split(path.sep).join('/'));
}

/** `src/index.ts.hbs` → `src/index.ts`; `gitignore.hbs` → `.gitignore`. */
function outputPath(templateFile: string): string {
  const stripped = templateFile.replace(/\.hbs$/, '');
  const base = path.posix.basename(stripped);
  return DOTFILES.has(base) ? path.posix.join(path.posix.dirname(stripped), `.${base}`) : stripped;
}

/** A literal text for a node-plop path, which node-plop renders as a handlebars template. */
function literal(text: string): string {
  return text.replace(/\{\{/g, '\\{{');
}

/**
 * The actions for a set of answers: `addMany` of `templates/common/**` and of each chosen kind's
 * `templates/<kind>/**` into the target directory, and an `add` for each dotfile (stored without
 * its dot).
 */
export function pluginActions(data: TemplateData): ActionType[] {
  const destination = literal(data.directory);
  const actions: ActionType[] = [];
  for (const folder of ['common', ...data.kinds]) {
    actions.push({
      type: 'addMany',
      destination,
      // Absolute: node-plop strips `base` from the relative template path with String.replace.
      base: literal(path.join(TEMPLATES_DIR, folder)),
      templateFiles: `${folder}/**/*.hbs`,
      globOptions: { ignore: [...DOTFILES].map((f) => `${folder}/**/${f}.hbs`) },
      stripExtensions: ['hbs'],
      abortOnFail: true,
      verbose: false,
    });
    for (const file of templateFiles(path.join(TEMPLATES_DIR, folder)).filter((f) => DOTFILES.has(path.posix.basename(f, '.hbs')))) {
      actions.push({
        type: 'add',
        path: literal(path.join(data.directory, outputPath(file))),
        templateFile: path.join(TEMPLATES_DIR, folder, file),
        abortOnFail: true,
      });
    }
  }
  return actions;
}

/** Handlebars options as helpers receive them (last argument). */
interface HelperOptions {
  readonly data?: { readonly root?: Partial<TemplateData> };
}

const isHelperOptions = (value: unknown): value is HelperOptions => typeof value === 'object' && value !== null && 'data' in value;

const rootKinds = (options: unknown): readonly string[] => (isHelperOptions(options) ? (options.data?.root?.kinds ?? []) : []);

const kindInfo = (kind: unknown) => {
  if (typeof kind !== 'string' || !isKind(kind)) throw new Error(`template error: ${String(kind)} is not a kind`);
  return KIND_INFO[kind];
};

/** The handlebars helpers of the templates. */
export const HELPERS: Readonly<Record<string, (...args: unknown[]) => unknown>> = {
  /**
   * `{{{json value}}}`: the value as JSON on one line (lists as `["a", "b"]`); `{{{json value 4}}}`:
   * as `JSON.stringify(value, null, 2)` (npm's layout) continued at an indent of 4. Use triple
   * braces: no HTML escaping.
   */
  json: (value: unknown, indent?: unknown) => {
    if (typeof indent === 'number')
      return JSON.stringify(value, null, 2)
        .split('\n')
        .join(`\n${' '.repeat(indent)}`);
    return Array.isArray(value) ? `[${value.map((v) => JSON.stringify(v)).join(', ')}]` : JSON.stringify(value);
  },
  /** `{{{tsString value}}}`: a single-quoted TypeScript string literal. */
  tsString: (value: unknown) => `'${JSON.stringify(String(value)).slice(1, -1).replace(/\\"/g, '"').replace(/'/g, "\\'")}'`,
  /** `{{{docText value}}}`: text safe inside a `/** ... *\/` comment. */
  docText: (value: unknown) => String(value).replace(/\*\//g, '*\\/'),
  /** `{{#if (hasKind "auth")}}`: whether the project provides the kind. */
  hasKind: (kind: unknown, options: unknown) => rootKinds(options).includes(String(kind)),
  /** `{{kindList}}`: `auth and acl`. */
  kindList: (options: unknown) => describeKinds(rootKinds(options)),
  /** `{{factory kind}}`: the factory a kind's module exports, e.g. `createAuth`. */
  factory: (kind: unknown) => kindInfo(kind).factory,
  /** `{{spiInterface kind}}`: e.g. `AuthProvider`. */
  spiInterface: (kind: unknown) => kindInfo(kind).spiInterface,
  /** `{{kindExample kind}}`: one line on what the kind's example does. */
  kindExample: (kind: unknown) => kindInfo(kind).example,
};

/** The prompts, in the order of the bypass values of {@link bypassValues}. */
export function pluginPrompts(force: boolean): PromptQuestion[] {
  return [
    {
      type: 'input',
      name: 'directory',
      message: 'Directory of the new project',
      default: 'bifro-plugin',
      filter: (value: string) => value.trim(),
      validate: (value: string) =>
        value.trim() === '' ? 'a directory is needed' : (targetProblem(path.resolve(value.trim()), force) ?? true),
    },
    {
      type: 'input',
      name: 'name',
      message: 'Package name',
      default: (answers: { directory?: string }) => defaultPackageName(answers.directory ?? 'plugin'),
      filter: (value: string) => value.trim(),
      validate: (value: string) => packageNameProblem(value.trim()) ?? true,
    },
    {
      type: 'checkbox',
      name: 'kinds',
      message: 'Kinds it provides (space to select, enter to confirm)',
      choices: KINDS.map((k) => ({
        name: `${k.padEnd(9)} ${KIND_INFO[k].spiInterface}: ${KIND_INFO[k].example}`,
        short: k,
        value: k,
        checked: k === DEFAULT_KIND,
      })),
      validate: (value: readonly unknown[]) => value.length > 0 || 'choose at least one kind',
    },
    {
      type: 'input',
      name: 'description',
      message: 'Description (one line)',
      default: (answers: { kinds?: readonly string[] }) => defaultDescription(answers.kinds ?? []),
      filter: (value: string) => value.trim(),
    },
  ];
}

/** What is already known, as node-plop bypass values in prompt order (`_` = ask). */
export function bypassValues(known: { dir?: string; name?: string; kinds?: readonly PluginKind[]; description?: string }): string[] {
  return [known.dir ?? '_', known.name ?? '_', known.kinds?.join(',') ?? '_', known.description ?? '_'];
}

/** The default export of node-plop (an ES module: imported, not required). */
type NodePlop = (plopfilePath?: string, plopCfg?: { force: boolean; destBasePath: string | undefined }) => Promise<NodePlopAPI>;

/** A real dynamic import, kept out of reach of the TypeScript CommonJS transform (which would turn it into require). */
const dynamicImport = new Function('specifier', 'return import(specifier)') as (specifier: string) => Promise<{ default: NodePlop }>;

/**
 * The node-plop generator of a plugin project: no plopfile, the templates folder as the plop
 * base (template paths resolve against it), the helpers, the prompts and the actions.
 * `force` lets the actions replace files that exist.
 */
export async function createPluginGenerator(force: boolean): Promise<PlopGenerator> {
  const { default: nodePlop } = await dynamicImport('node-plop');
  const plop = await nodePlop(undefined, { force, destBasePath: undefined });
  plop.setPlopfilePath(TEMPLATES_DIR);
  for (const [name, helper] of Object.entries(HELPERS)) plop.setHelper(name, helper);
  plop.setGenerator(GENERATOR_NAME, {
    description: 'a Bifro plugin project',
    prompts: pluginPrompts(force),
    actions: (data) => pluginActions(data as TemplateData),
  });
  return plop.getGenerator(GENERATOR_NAME);
}
