import type { PluginKind } from '@bifro/spi';
import { BifroError, defineErrors } from '../base/errors';

/** The error catalogue of the plugin host. Every load failure carries one of these codes. */
export const PLUGIN_ERRORS = defineErrors({
  BIFRO_PLUGIN_DIR_UNREADABLE: {
    summary: 'The plugins directory exists but cannot be listed.',
    remedy: 'Check that `pluginsDir` names a directory the broker user may read.',
  },
  BIFRO_PLUGIN_NOT_FOUND: {
    summary: 'A plugin named in the config is neither in the plugins directory nor an installed npm package.',
    remedy:
      'Copy the plugin folder into the plugins directory, or install the package (and list it in `plugins.packages`); check the spelling of `use`.',
  },
  BIFRO_PLUGIN_PACKAGE_INVALID: {
    summary: "A plugin folder's package.json cannot be read, is not JSON, or lacks a string `name` / `version`.",
    remedy: 'Fix the package.json of the folder named in the message.',
  },
  BIFRO_PLUGIN_DUPLICATE: {
    summary: 'Two plugin folders declare the same package name.',
    remedy: 'Remove one of the two folders named in the message (plugins are identified by their package name).',
  },
  BIFRO_PLUGIN_MANIFEST_MISSING: {
    summary: 'The config names a folder or package that has no `bifro` field in its package.json.',
    remedy: 'Add `"bifro": { "kinds": [...], "spi": "^1.0.0" }` to the package.json, or name the right package in the config.',
  },
  BIFRO_PLUGIN_MANIFEST_INVALID: {
    summary: 'The `bifro` field of a plugin package.json is malformed (unknown kind, no kinds, invalid `spi` range, non-string `main`).',
    remedy:
      'Follow the manifest format in docs/plugin-authoring.md: kinds among auth, acl, balancer, events, settings, throttler, storage and a semver range in `spi`.',
  },
  BIFRO_PLUGIN_SPI_MISMATCH: {
    summary: "The plugin's `bifro.spi` range does not include the broker's SPI version.",
    remedy: 'Install a release of the plugin built for this SPI version, or a broker whose SPI version the plugin supports.',
  },
  BIFRO_PLUGIN_KIND_NOT_PROVIDED: {
    summary: 'The config uses a plugin for a kind its manifest does not declare.',
    remedy: 'Use the plugin only for the kinds listed in its `bifro.kinds`, or pick another plugin for that kind.',
  },
  BIFRO_PLUGIN_IMPORT_FAILED: {
    summary: "The plugin's entry module could not be found or threw while loading.",
    remedy:
      'Build the plugin (is `bifro.main` or `main` pointing at an existing file?) and install its dependencies; the cause is in the message.',
  },
  BIFRO_PLUGIN_SHAPE_INVALID: {
    summary:
      'The plugin module does not export an object with a factory function for every declared kind, or its `errors` is not a map of codes to { summary, remedy }.',
    remedy:
      'Export `definePlugin({ <kind>: (ctx) => instance })` as the default export (or as `module.exports`); give `errors` as `{ CODE: { summary, remedy } }` with upper-case codes.',
  },
  BIFRO_PLUGIN_INSTANTIATE_FAILED: {
    summary: "The plugin's factory threw or rejected when the broker created the instance.",
    remedy: "Check the plugin's options in the config; the factory's error is in the message.",
  },
  BIFRO_PLUGIN_INSTANCE_INVALID: {
    summary: 'The object a factory returned lacks a method its kind requires (e.g. `authenticate`, `checkPermission`).',
    remedy: 'Make the factory return an object implementing the kind interface of @bifro/spi; run `bifro plugin verify` on it.',
  },
  BIFRO_PLUGIN_CONFORMANCE_FAILED: {
    summary: "`bifro plugin verify`: the plugin loads, but cases of its kind's conformance kit (@bifro/spi/testing) fail.",
    remedy:
      "Run the same kit in the plugin's own tests (`registerConformance(<kind>Conformance(...), { it })`) and fix the cases named in the message.",
  },
  BIFRO_PLUGIN_INIT_FAILED: {
    summary: "The plugin's `init()` threw or rejected.",
    remedy: "Fix what the plugin reports (unreachable backend, missing file, bad options); the plugin's error is in the message.",
  },
  BIFRO_PLUGIN_INIT_TIMEOUT: {
    summary: "The plugin's factory or `init()` did not finish within `plugins.initTimeoutMs`.",
    remedy: 'Check what the plugin waits for (a backend that does not answer?) or raise `plugins.initTimeoutMs`.',
  },
  BIFRO_PLUGIN_STORAGE_MISSING: {
    summary: 'No storage plugin is configured and the default `@bifro/plugin-storage-level` is not installed.',
    remedy: 'Set `plugins.storage` to a storage plugin, or install `@bifro/plugin-storage-level`.',
  },
  BIFRO_PLUGIN_NPM_MISSING: {
    summary: '`bifro plugin install` (or `search`) needs the npm client, and `npm` is not on the PATH.',
    remedy: 'Install Node.js with npm, or put the folder holding `npm` on the PATH of the user running bifro.',
  },
  BIFRO_PLUGIN_FETCH_FAILED: {
    summary:
      '`bifro plugin install` could not get the package: npm found no such package or version, no such tarball or folder, or could not download it.',
    remedy:
      "Check the name and version (`npm view <name> versions`), the path, and the registry (`--registry`, or npm's `registry` setting in .npmrc); npm's message is quoted.",
  },
  BIFRO_PLUGIN_REGISTRY_UNREACHABLE: {
    summary: 'The npm registry did not answer: connection refused, unknown host or timeout.',
    remedy:
      "Check the URL given with `--registry` (or npm's `registry` setting: `npm config get registry`) and the network; behind a proxy, set npm's `proxy` / `https-proxy`.",
  },
  BIFRO_PLUGIN_DEPENDENCIES_FAILED: {
    summary: "`bifro plugin install` could not install the plugin's runtime dependencies with npm.",
    remedy:
      'Read the quoted npm error: a dependency missing from the registry, a network problem, or a failing install script of a dependency (its output is in the npm log named there).',
  },
  BIFRO_PLUGIN_ALREADY_INSTALLED: {
    summary: 'The version of the plugin being installed is the one already in the plugins directory.',
    remedy: 'Nothing to do; `bifro plugin install --force` installs it again (fresh dependencies).',
  },
  BIFRO_PLUGIN_INSTALL_FAILED: {
    summary:
      'The plugin package could not be unpacked or moved into the plugins directory (tar missing, folder name taken, permission denied).',
    remedy:
      'Check that the plugins directory is writable by this user and that `tar` is installed; a folder named in the message that holds another package has to be moved first.',
  },
  BIFRO_PLUGIN_NOT_INSTALLED: {
    summary: '`bifro plugin remove` found no folder of the plugins directory holding that package.',
    remedy:
      'Check the package name (`bifro plugin list` shows them) and the plugins directory (`--plugins-dir`, `pluginsDir` in the config).',
  },
  BIFRO_PLUGIN_IN_USE: {
    summary: '`bifro plugin remove` refuses to remove a plugin the configuration uses: the broker would not start without it.',
    remedy: 'Remove the config entries named in the message first, or pass `--force` to remove the plugin anyway.',
  },
  BIFRO_PLUGIN_SEARCH_FAILED: {
    summary: "The registry's search API answered with an error or not with npm's search JSON.",
    remedy: 'Check that the registry URL names an npm registry (`--registry`, or `npm config get registry`); its answer is quoted.',
  },
});

export type PluginErrorCode = keyof typeof PLUGIN_ERRORS;

/** The phases a plugin goes through, in order; a load error names the phase that failed. */
export const PLUGIN_PHASES = ['resolve', 'manifest', 'version', 'import', 'shape', 'instantiate', 'instanceShape', 'init'] as const;

export type PluginPhase = (typeof PLUGIN_PHASES)[number];

/** What a plugin load error says about where it happened. */
export interface PluginErrorDetails {
  readonly phase: PluginPhase;
  /** The plugin's package name, or what the config called it when the package could not be read. */
  readonly plugin: string;
  /** The plugin folder, when known. */
  readonly dir?: string;
  /** The kind being loaded, when the failure concerns one kind. */
  readonly kind?: PluginKind;
  readonly [extra: string]: unknown;
}

/** A coded plugin load error; `details.phase` names the phase that failed. */
export function pluginError(code: PluginErrorCode, message: string, details: PluginErrorDetails, cause?: unknown): BifroError {
  return new BifroError(code, message, details, cause === undefined ? undefined : { cause });
}

/** The phase a plugin load error happened in, if it is one. */
export function phaseOf(err: unknown): PluginPhase | undefined {
  if (!(err instanceof BifroError)) return undefined;
  const phase = err.details.phase;
  return typeof phase === 'string' && (PLUGIN_PHASES as readonly string[]).includes(phase) ? (phase as PluginPhase) : undefined;
}
