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

export interface Fixtures {
  readonly dep: string;
  /** PLUGIN at 1.0.0 and 1.1.0. */
  readonly plugin: { readonly '1.0.0': string; readonly '1.1.0': string };
  readonly future: string;
  readonly notPlugin: string;
  readonly broken: string;
  readonly hidden: string;
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
    hidden: write(
      'hidden',
      { name: HIDDEN, version: '1.0.0', description: 'A bifro plugin nobody tagged', bifro: { kinds: ['events'], spi: '^1.0.0' } },
      `module.exports = { ${EVENTS_FACTORY} };\n`,
    ),
  };
}

/** Publishes the fixtures a test registry serves: the dependency first (the plugin needs it), then the packages, the upgrade last. */
export async function publishFixtures(registry: NpmRegistry, fx: Fixtures): Promise<void> {
  await registry.publish(fx.dep);
  await Promise.all([
    registry.publish(fx.plugin['1.0.0']),
    registry.publish(fx.future),
    registry.publish(fx.notPlugin),
    registry.publish(fx.hidden),
  ]);
  await registry.publish(fx.plugin['1.1.0']);
}
