import { mkdirSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import type { NpmRegistry } from '../../../test/support/npm-registry';

/**
 * The packages `bifro plugin install` tests install, written into a temp folder by the tests:
 * plain CommonJS, no build. Names are under a scope (and a prefix) no public package uses, so the
 * test registry never has to ask npmjs about them.
 */

/** A tiny runtime dependency of the plugin, published to the test registry before the plugin. */
export const DEP = 'bifro-itest-dep';
/** The plugin with a dependency of its own (scoped: the folder name and URL encoding matter). */
export const PLUGIN = '@bifro-itest/events-x';
/** The folder PLUGIN is installed in. */
export const PLUGIN_FOLDER = 'bifro-itest+events-x';
/** A plugin for SPI ^9.0.0 (with the search keyword: search lists it as incompatible). */
export const FUTURE = 'bifro-itest-future';
/** A package without a `bifro` field. */
export const NOT_PLUGIN = 'bifro-itest-not-a-plugin';
/** A plugin whose entry module throws when loaded. */
export const BROKEN = 'bifro-itest-broken';
/** A valid plugin without the `bifro-plugin` keyword: search must not list it. */
export const HIDDEN = 'bifro-itest-hidden';
/** A plugin with a postinstall script, a dependency with an install script, and top-level code: see {@link MARKERS}. */
export const SCRIPTED = 'bifro-itest-scripted';
/** SCRIPTED's dependency, with an `install` script. */
export const SCRIPTED_DEP = 'bifro-itest-scripted-dep';

/**
 * The environment variables naming the marker files SCRIPTED writes: its postinstall script
 * writes `script`, its dependency's install script `script` + `.dep`, and loading its entry
 * module (top-level code) writes `load`. Unset, nothing is written.
 */
export const MARKERS = { script: 'ITEST_SCRIPT_MARKER', load: 'ITEST_LOAD_MARKER' } as const;

export interface Fixtures {
  readonly dep: string;
  /** PLUGIN at 1.0.0 and 1.1.0. */
  readonly plugin: { readonly '1.0.0': string; readonly '1.1.0': string };
  readonly future: string;
  readonly notPlugin: string;
  readonly broken: string;
  readonly hidden: string;
  readonly scriptedDep: string;
  readonly scripted: string;
}

const EVENTS_FACTORY = 'events: () => ({ wants: () => true, report() {} })';

/** Writes every fixture package under `root`; returns their folders. */
export function writeFixtures(root: string): Fixtures {
  const write = (folder: string, pkg: Record<string, unknown>, index: string): string => {
    const dir = path.join(root, folder);
    mkdirSync(dir, { recursive: true });
    writeFileSync(path.join(dir, 'package.json'), JSON.stringify(pkg, null, 2));
    writeFileSync(path.join(dir, 'index.js'), index);
    return dir;
  };
  const plugin = (version: string): string =>
    write(
      `events-x-${version}`,
      {
        name: PLUGIN,
        version,
        description: 'Events plugin with a dependency of its own',
        main: 'index.js',
        keywords: ['bifro-plugin', 'mqtt'],
        bifro: { kinds: ['events'], spi: '^1.0.0' },
        dependencies: { [DEP]: '^1.0.0' },
        // As docs/plugin-authoring.md says: the SPI is a peer (and a dev dependency, unpublished:
        // resolving it would fail); the build script must not run on install.
        peerDependencies: { '@bifro/spi': '^1.0.0' },
        devDependencies: { '@bifro/spi': '^1.0.0' },
        scripts: { prepare: 'echo the prepare script must not run on install && exit 1' },
      },
      [
        "'use strict';",
        `const { greet } = require('${DEP}');`,
        "const { SPI_VERSION } = require('@bifro/spi');",
        `module.exports = { version: '${version}', greeting: greet('bifro'), spi: SPI_VERSION, ${EVENTS_FACTORY} };`,
        '',
      ].join('\n'),
    );
  return {
    dep: write('dep', { name: DEP, version: '1.0.0', main: 'index.js' }, "exports.greet = (name) => 'hello ' + name;\n"),
    plugin: { '1.0.0': plugin('1.0.0'), '1.1.0': plugin('1.1.0') },
    future: write(
      'future',
      {
        name: FUTURE,
        version: '3.0.0',
        description: 'A plugin for a later SPI',
        keywords: ['bifro-plugin'],
        bifro: { kinds: ['events'], spi: '^9.0.0' },
      },
      `module.exports = { ${EVENTS_FACTORY} };\n`,
    ),
    notPlugin: write('not-a-plugin', { name: NOT_PLUGIN, version: '1.0.0', description: 'Just a library' }, 'module.exports = {};\n'),
    broken: write(
      'broken',
      { name: BROKEN, version: '1.0.0', bifro: { kinds: ['events'], spi: '^1.0.0' } },
      "throw new Error('broken on purpose');\n",
    ),
    scriptedDep: write(
      'scripted-dep',
      {
        name: SCRIPTED_DEP,
        version: '1.0.0',
        main: 'index.js',
        scripts: { install: writeMarker(`process.env.${MARKERS.script} + '.dep'`) },
      },
      'exports.ok = true;\n',
    ),
    scripted: write(
      'scripted',
      {
        name: SCRIPTED,
        version: '1.0.0',
        main: 'index.js',
        bifro: { kinds: ['events'], spi: '^1.0.0' },
        dependencies: { [SCRIPTED_DEP]: '^1.0.0' },
        scripts: { postinstall: writeMarker(`process.env.${MARKERS.script}`) },
      },
      [
        "'use strict';",
        '// Top-level code: runs when the module is loaded, before any factory is called.',
        `if (process.env.${MARKERS.load}) require('fs').writeFileSync(process.env.${MARKERS.load}, 'loaded');`,
        `module.exports = { ${EVENTS_FACTORY} };`,
        '',
      ].join('\n'),
    ),
    hidden: write(
      'hidden',
      { name: HIDDEN, version: '1.0.0', description: 'A bifro plugin nobody tagged', bifro: { kinds: ['events'], spi: '^1.0.0' } },
      `module.exports = { ${EVENTS_FACTORY} };\n`,
    ),
  };
}

/** A `node -e` command writing the file named by the JS expression `file`, when that expression is set. */
function writeMarker(file: string): string {
  return `node -e "if (process.env.${MARKERS.script}) require('fs').writeFileSync(${file}, 'ran')"`;
}

/** Publishes the fixtures a test registry serves: the dependency first (the plugin needs it), then the packages, the upgrade last. */
export async function publishFixtures(registry: NpmRegistry, fx: Fixtures): Promise<void> {
  await registry.publish(fx.dep);
  await registry.publish(fx.scriptedDep);
  await Promise.all([
    registry.publish(fx.scripted),
    registry.publish(fx.plugin['1.0.0']),
    registry.publish(fx.future),
    registry.publish(fx.notPlugin),
    registry.publish(fx.hidden),
  ]);
  await registry.publish(fx.plugin['1.1.0']);
}
