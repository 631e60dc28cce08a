import path from 'node:path';
import { pathToFileURL } from 'node:url';
import { ERROR_CODE_PATTERN, type PluginDefinition, type PluginKind, type PluginManifest } from '@bifro/spi';
import { describeError } from '../base/errors';
import { pluginError } from './plugin-errors';
import type { PluginPackage } from './plugin-discovery';
import { shareBrokerSpi } from './shared-spi';

/** A real dynamic import, kept out of reach of the TypeScript CommonJS transform (which would turn it into require). */
const dynamicImport = new Function('specifier', 'return import(specifier)') as (specifier: string) => Promise<unknown>;

/** The entry module of a plugin: `bifro.main`, else the package's `main`, else `index.js`. */
export function entryOf(pkg: PluginPackage, manifest: PluginManifest): string {
  const main = manifest.main ?? (typeof pkg.main === 'string' && pkg.main !== '' ? pkg.main : 'index.js');
  return path.resolve(pkg.dir, main);
}

/**
 * Loads a plugin's entry module (phase `import`): `require()` first; an ES module that require
 * cannot load is imported dynamically. Its `@bifro/spi` is the broker's own ({@link shareBrokerSpi}).
 */
export async function importPlugin(pkg: PluginPackage, manifest: PluginManifest): Promise<unknown> {
  shareBrokerSpi();
  const entry = entryOf(pkg, manifest);
  const where = { phase: 'import', plugin: pkg.name, dir: pkg.dir, entry } as const;
  let file: string;
  try {
    file = require.resolve(entry);
  } catch (err) {
    throw pluginError(
      'BIFRO_PLUGIN_IMPORT_FAILED',
      `plugin ${pkg.name} (${pkg.dir}): entry module ${entry} not found; is the plugin built?`,
      where,
      err,
    );
  }
  // An ES module is imported (the SPI resolve hook applies to import, not to require of an ES module).
  if (!isEsModule(pkg, file)) {
    try {
      // A plugin is loaded by path at run time: a dynamic require is the point here.
      // eslint-disable-next-line @typescript-eslint/no-require-imports
      return require(file) as unknown;
    } catch (err) {
      const code = (err as NodeJS.ErrnoException | undefined)?.code;
      if (code !== 'ERR_REQUIRE_ESM' && code !== 'ERR_REQUIRE_ASYNC_MODULE') {
        throw pluginError(
          'BIFRO_PLUGIN_IMPORT_FAILED',
          `plugin ${pkg.name} (${pkg.dir}): loading ${file} failed: ${describeError(err)}`,
          where,
          err,
        );
      }
    }
  }
  try {
    return await dynamicImport(pathToFileURL(file).href);
  } catch (err) {
    throw pluginError(
      'BIFRO_PLUGIN_IMPORT_FAILED',
      `plugin ${pkg.name} (${pkg.dir}): importing ${file} failed: ${describeError(err)}`,
      where,
      err,
    );
  }
}

/** Whether Node loads the entry file as an ES module: `.mjs`, or `.js` in a package of `"type": "module"`. */
function isEsModule(pkg: PluginPackage, file: string): boolean {
  return file.endsWith('.mjs') || (file.endsWith('.js') && pkg.type === 'module');
}

/**
 * The plugin definition a module exports (phase `shape`): `default` or the module itself, an
 * object with a factory function for every declared kind, and optionally `errors`, the codes it
 * reports (see {@link errorsProblem}).
 */
export function definitionOf(pkg: PluginPackage, manifest: PluginManifest, loaded: unknown): PluginDefinition {
  const where = { phase: 'shape', plugin: pkg.name, dir: pkg.dir } as const;
  const exported = isObject(loaded) && loaded.default !== undefined ? loaded.default : loaded;
  if (!isObject(exported)) {
    throw pluginError(
      'BIFRO_PLUGIN_SHAPE_INVALID',
      `plugin ${pkg.name} (${pkg.dir}) exports ${describeExport(exported)}; expected an object with a factory per kind, e.g. definePlugin({ ${manifest.kinds[0]}: (ctx) => ... })`,
      where,
    );
  }
  const missing = manifest.kinds.filter((kind: PluginKind) => typeof exported[kind] !== 'function');
  if (missing.length > 0) {
    throw pluginError(
      'BIFRO_PLUGIN_SHAPE_INVALID',
      `plugin ${pkg.name} (${pkg.dir}) declares ${manifest.kinds.join(', ')} but exports no factory function for ${missing.join(', ')}`,
      { ...where, missing },
    );
  }
  const problem = errorsProblem(exported.errors);
  if (problem !== undefined) {
    throw pluginError(
      'BIFRO_PLUGIN_SHAPE_INVALID',
      `plugin ${pkg.name} (${pkg.dir}) exports \`errors\` that ${problem}; expected { CODE: { summary: '...', remedy: '...' } }`,
      { ...where, member: 'errors' },
    );
  }
  return exported as PluginDefinition;
}

/**
 * What is wrong with a definition's `errors` member, or undefined when it is absent or fits: an
 * object whose keys are codes (`ERROR_CODE_PATTERN`) and whose values have a non-empty string
 * `summary` and `remedy`.
 */
export function errorsProblem(errors: unknown): string | undefined {
  if (errors === undefined) return undefined;
  if (typeof errors !== 'object' || errors === null || Array.isArray(errors)) return `is ${describeExport(errors)}, not an object`;
  for (const [code, spec] of Object.entries(errors)) {
    if (!ERROR_CODE_PATTERN.test(code))
      return `has the code ${JSON.stringify(code)} (codes are upper-case letters, digits and _, e.g. ACME_LDAP_BIND_FAILED)`;
    if (!isObject(spec)) return `gives ${code} ${describeExport(spec)}, not { summary, remedy }`;
    for (const field of ['summary', 'remedy'] as const) {
      if (typeof spec[field] !== 'string' || spec[field] === '') return `gives ${code} no ${field} (a non-empty string)`;
    }
  }
  return undefined;
}

function isObject(value: unknown): value is Record<string, unknown> {
  return (typeof value === 'object' && value !== null) || typeof value === 'function';
}

function describeExport(value: unknown): string {
  if (value === null) return 'null';
  if (typeof value === 'string') return `a string (${JSON.stringify(value.length > 40 ? `${value.slice(0, 40)}...` : value)})`;
  if (Array.isArray(value)) return 'a list';
  return typeof value === 'undefined' ? 'nothing' : `a ${typeof value}`;
}
