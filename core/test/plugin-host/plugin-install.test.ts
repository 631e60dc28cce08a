import { existsSync, mkdirSync, mkdtempSync, readdirSync, readFileSync, renameSync, rmSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { SPI_VERSION } from '@bifro/spi';
import { BifroError } from '../../src/base/errors';
import { discoverPlugins } from '../../src/plugin-host/plugin-discovery';
import {
  classifySpec,
  configUses,
  folderNameOf,
  INSTALL_RECORD,
  installPlugin,
  readInstallRecord,
  removePlugin,
  type InstallOptions,
} from '../../src/plugin-host/plugin-install';
import { verifyPlugin } from '../../src/plugin-host/verify-plugin';
import { searchPlugins } from '../../src/plugin-host/plugin-registry';
import { run, freePort, startNpmRegistry, type NpmRegistry } from '../../../test/support/npm-registry';
import { configWith } from './plugin-host-fixtures';
import {
  BROKEN,
  DEP,
  FUTURE,
  HIDDEN,
  MARKERS,
  NOT_PLUGIN,
  PLUGIN,
  PLUGIN_FOLDER,
  publishFixtures,
  SCRIPTED,
  SCRIPTED_DEP,
  writeFixtures,
  type Fixtures,
} from './plugin-install-fixtures';

/**
 * installPlugin / removePlugin / searchPlugins against a real registry (verdaccio, started once
 * for this file) and the real npm client: nothing is mocked.
 */

let registry: NpmRegistry;
let fx: Fixtures;
let work: string;
let pluginsDir: string;

const options = (extra: Partial<InstallOptions> = {}): InstallOptions => ({
  pluginsDir,
  cwd: work,
  env: { ...process.env, ...registry.env() },
  ...extra,
});

/** What a rejected promise was rejected with. */
async function failure(promise: Promise<unknown>): Promise<BifroError> {
  const err = await promise.then(
    () => undefined,
    (e: unknown) => e,
  );
  if (!(err instanceof BifroError)) throw new Error(`expected a BifroError, got ${String(err)}`);
  return err;
}

function installedVersion(folder: string): string {
  return (JSON.parse(readFileSync(path.join(pluginsDir, folder, 'package.json'), 'utf8')) as { version: string }).version;
}

beforeAll(async () => {
  registry = await startNpmRegistry();
  work = mkdtempSync(path.join(os.tmpdir(), 'bifro-install-'));
  fx = writeFixtures(path.join(work, 'fixtures'));
  await publishFixtures(registry, fx);
}, 90_000);

afterAll(async () => {
  await registry?.stop();
  if (work !== undefined) rmSync(work, { recursive: true, force: true });
});

beforeEach(() => {
  pluginsDir = mkdtempSync(path.join(work, 'plugins-'));
});

describe('plugin install: names and specs', () => {
  it('derives a readable folder name no other package can have', () => {
    expect(folderNameOf('@acme/bifro-auth-x')).toBe('acme+bifro-auth-x');
    expect(folderNameOf('bifro-auth-x')).toBe('bifro-auth-x');
    expect(folderNameOf(PLUGIN)).toBe(PLUGIN_FOLDER);
    expect(folderNameOf('.hidden/x y')).toBe('_hidden+x_y');
  });

  it('tells paths from npm specs', async () => {
    await expect(classifySpec('@acme/x@^1.2.0', work)).resolves.toEqual({ source: 'registry', arg: '@acme/x@^1.2.0' });
    await expect(classifySpec('bifro-x@1.0.0', work)).resolves.toEqual({ source: 'registry', arg: 'bifro-x@1.0.0' });
    await expect(classifySpec('./fixtures/dep', work)).resolves.toEqual({ source: 'folder', arg: fx.dep });
    const missing = await failure(classifySpec('./nope.tgz', work));
    expect(missing.code).toBe('BIFRO_PLUGIN_FETCH_FAILED');
    expect(missing.message).toContain(`no such tarball or folder: ${path.join(work, 'nope.tgz')}`);
  });

  it('plugin discovery skips dot-folders such as the staging folder', async () => {
    const staged = path.join(pluginsDir, '.staging-abc', 'plugin');
    mkdirSync(staged, { recursive: true });
    writeFileSync(
      path.join(staged, 'package.json'),
      JSON.stringify({ name: 'staged', version: '1.0.0', bifro: { kinds: ['events'], spi: '^1.0.0' } }),
    );
    const discovery = await discoverPlugins({ pluginsDir, packages: [], resolvePaths: [] });
    expect([...discovery.plugins.keys(), ...discovery.withoutManifest.keys(), ...discovery.unusable.keys()]).toEqual([]);
  });
});

describe('plugin install', () => {
  it('installs a folder with its own dependency in its node_modules, without @bifro/spi', async () => {
    const progress: string[] = [];
    const result = await installPlugin(fx.plugin['1.0.0'], options({ onProgress: (line) => progress.push(line) }));
    const dir = path.join(pluginsDir, PLUGIN_FOLDER);
    expect(result).toMatchObject({
      name: PLUGIN,
      version: '1.0.0',
      source: 'folder',
      kinds: ['events'],
      spiRange: '^1.0.0',
      spiVersion: SPI_VERSION,
      dir,
      action: 'installed',
      dependencies: 1,
      integrity: expect.stringMatching(/^sha512-[A-Za-z0-9+/]{86}==$/),
      entry: 'index.js',
      installScripts: [],
      scriptsRun: false,
      warnings: [],
    });
    expect(progress.join('\n')).toMatch(/fetching [\s\S]*installing dependencies of \S+ \(npm install --omit=dev --ignore-scripts\)/);
    expect(progress.join('\n')).not.toContain('verifying');
    expect(readdirSync(pluginsDir)).toEqual([PLUGIN_FOLDER]);
    expect(readdirSync(path.join(dir, 'node_modules')).filter((n) => !n.startsWith('.'))).toEqual([DEP]);
    expect(existsSync(path.join(dir, 'node_modules', '@bifro'))).toBe(false);
    // eslint-disable-next-line @typescript-eslint/no-require-imports
    const loaded = require(path.join(dir, 'index.js')) as { greeting: string; spi: string };
    expect(loaded).toMatchObject({ greeting: 'hello bifro', spi: SPI_VERSION });
    const discovery = await discoverPlugins({ pluginsDir, packages: [], resolvePaths: [] });
    expect(discovery.plugins.get(PLUGIN)).toMatchObject({ dir, version: '1.0.0', source: 'plugins-dir' });
  }, 60_000);

  it('installs a tarball made by npm pack', async () => {
    const tarballs = path.join(work, `tarballs-${path.basename(pluginsDir)}`);
    mkdirSync(tarballs);
    const packed = await run('npm', ['pack', fx.plugin['1.1.0'], '--pack-destination', tarballs, '--ignore-scripts'], work, process.env);
    expect(packed.code).toBe(0);
    const tgz = readdirSync(tarballs).find((f) => f.endsWith('.tgz'))!;
    const result = await installPlugin(path.join(tarballs, tgz), options());
    expect(result).toMatchObject({ name: PLUGIN, version: '1.1.0', source: 'tarball', action: 'installed', dependencies: 1 });
    expect(readdirSync(path.join(pluginsDir, PLUGIN_FOLDER, 'node_modules')).filter((n) => !n.startsWith('.'))).toEqual([DEP]);
  }, 60_000);

  it('installs from the registry by name@version, upgrades by name, refuses the same version without --force', async () => {
    const first = await installPlugin(`${PLUGIN}@1.0.0`, options());
    expect(first).toMatchObject({ version: '1.0.0', source: 'registry', action: 'installed' });

    const upgrade = await installPlugin(PLUGIN, options());
    expect(upgrade).toMatchObject({
      version: '1.1.0',
      action: 'upgraded',
      previousVersion: '1.0.0',
      dir: path.join(pluginsDir, PLUGIN_FOLDER),
    });
    expect(installedVersion(PLUGIN_FOLDER)).toBe('1.1.0');
    expect(readdirSync(pluginsDir)).toEqual([PLUGIN_FOLDER]); // the old folder and the staging folder are gone

    const same = await failure(installPlugin(`${PLUGIN}@^1.1.0`, options()));
    expect(same.code).toBe('BIFRO_PLUGIN_ALREADY_INSTALLED');
    expect(same.message).toContain(`${PLUGIN}@1.1.0 is already installed in ${path.join(pluginsDir, PLUGIN_FOLDER)}`);
    expect(readdirSync(pluginsDir)).toEqual([PLUGIN_FOLDER]);

    await expect(installPlugin(`${PLUGIN}@1.1.0`, options({ force: true }))).resolves.toMatchObject({
      action: 'reinstalled',
      previousVersion: '1.1.0',
    });
    await expect(installPlugin(`${PLUGIN}@1.0.0`, options())).resolves.toMatchObject({ action: 'downgraded', previousVersion: '1.1.0' });
    expect(installedVersion(PLUGIN_FOLDER)).toBe('1.0.0');
    expect(readdirSync(pluginsDir)).toEqual([PLUGIN_FOLDER]);
  }, 90_000);

  it('upgrades a plugin copied by hand in its own folder, keeping that folder', async () => {
    await installPlugin(fx.plugin['1.0.0'], options());
    const byHand = path.join(pluginsDir, 'my-events');
    renameSync(path.join(pluginsDir, PLUGIN_FOLDER), byHand);
    const result = await installPlugin(fx.plugin['1.1.0'], options());
    expect(result).toMatchObject({ action: 'upgraded', dir: byHand });
    expect(readdirSync(pluginsDir)).toEqual(['my-events']);
  }, 60_000);

  it('does not load the plugin: neither its top-level code nor its factories run at install', async () => {
    const dir = path.join(work, `needs-options-${path.basename(pluginsDir)}`);
    mkdirSync(dir);
    const loaded = path.join(work, `loaded-${path.basename(pluginsDir)}`);
    writeFileSync(
      path.join(dir, 'package.json'),
      JSON.stringify({ name: 'bifro-itest-needs-options', version: '1.0.0', bifro: { kinds: ['events'], spi: '^1.0.0' } }),
    );
    writeFileSync(
      path.join(dir, 'index.js'),
      `require('fs').writeFileSync(${JSON.stringify(loaded)}, 'top-level code ran');\n` +
        "module.exports = { events: (ctx) => { if (!ctx.options.url) throw new Error('options.url is required'); return { wants: () => true, report() {} }; } };\n",
    );
    const result = await installPlugin(dir, options());
    expect(result).toMatchObject({
      name: 'bifro-itest-needs-options',
      action: 'installed',
      dependencies: 0,
      entry: 'index.js',
      warnings: [],
    });
    expect(existsSync(loaded)).toBe(false);
    expect(readdirSync(pluginsDir)).toEqual(['bifro-itest-needs-options']);
    // Verifying is what loads it (and the factory then needs its options).
    const report = await verifyPlugin(path.join(pluginsDir, 'bifro-itest-needs-options'), { pluginsDir, cwd: work, initTimeoutMs: 2000 });
    expect(existsSync(loaded)).toBe(true);
    expect(report.steps.find((s) => s.phase === 'instantiate')).toMatchObject({
      status: 'failed',
      message: expect.stringContaining('options.url is required'),
    });
  }, 60_000);

  it('runs no install script by default, and says which the package and its dependencies declare', async () => {
    const marker = path.join(work, `script-${path.basename(pluginsDir)}`);
    const loaded = path.join(work, `load-${path.basename(pluginsDir)}`);
    const env = { ...process.env, ...registry.env(), [MARKERS.script]: marker, [MARKERS.load]: loaded };
    const result = await installPlugin(SCRIPTED, options({ env }));
    expect(result).toMatchObject({ name: SCRIPTED, version: '1.0.0', dependencies: 1, entry: 'index.js', scriptsRun: false });
    expect(result.installScripts).toEqual([
      { package: `${SCRIPTED}@1.0.0`, script: 'postinstall', command: expect.stringContaining(`process.env.${MARKERS.script}`) },
      { package: `${SCRIPTED_DEP}@1.0.0`, script: 'install', command: expect.stringContaining(`process.env.${MARKERS.script} + '.dep'`) },
    ]);
    expect(existsSync(marker)).toBe(false);
    expect(existsSync(`${marker}.dep`)).toBe(false);
    expect(existsSync(loaded)).toBe(false);
    // The integrity is the registry's own for that version (npm checked the download against it).
    const meta = (await (await fetch(new URL(SCRIPTED, registry.url))).json()) as {
      versions: Record<string, { dist: { integrity: string } }>;
    };
    expect(result.integrity).toBe(meta.versions['1.0.0']!.dist.integrity);
    // ... and kept with the plugin, for `bifro plugin verify` to show.
    const record = await readInstallRecord(result.dir);
    expect(record).toMatchObject({ spec: SCRIPTED, source: 'registry', integrity: result.integrity, entry: 'index.js', scriptsRun: false });
    expect(record?.installScripts).toHaveLength(2);
    expect(existsSync(path.join(result.dir, INSTALL_RECORD))).toBe(true);
  }, 60_000);

  it('runs the install scripts of the package and its dependencies with allowScripts, and still does not load it', async () => {
    const marker = path.join(work, `script-${path.basename(pluginsDir)}`);
    const loaded = path.join(work, `load-${path.basename(pluginsDir)}`);
    const env = { ...process.env, ...registry.env(), [MARKERS.script]: marker, [MARKERS.load]: loaded };
    const progress: string[] = [];
    const result = await installPlugin(SCRIPTED, options({ env, allowScripts: true, onProgress: (line) => progress.push(line) }));
    expect(result).toMatchObject({ name: SCRIPTED, scriptsRun: true });
    expect(result.installScripts).toHaveLength(2);
    expect(progress.join('\n')).toContain('(npm install --omit=dev, install scripts allowed)');
    expect(readFileSync(marker, 'utf8')).toBe('ran');
    expect(readFileSync(`${marker}.dep`, 'utf8')).toBe('ran');
    expect(existsSync(loaded)).toBe(false);
  }, 60_000);

  it('refuses a folder name held by another package', async () => {
    mkdirSync(path.join(pluginsDir, PLUGIN_FOLDER));
    writeFileSync(path.join(pluginsDir, PLUGIN_FOLDER, 'package.json'), JSON.stringify({ name: 'other', version: '1.0.0' }));
    const err = await failure(installPlugin(fx.plugin['1.0.0'], options()));
    expect(err.code).toBe('BIFRO_PLUGIN_INSTALL_FAILED');
    expect(err.message).toContain(`${path.join(pluginsDir, PLUGIN_FOLDER)} exists and holds other@1.0.0`);
    expect(readdirSync(pluginsDir)).toEqual([PLUGIN_FOLDER]);
  }, 60_000);

  it.each([
    [
      'an SPI range this broker does not implement',
      'future',
      'BIFRO_PLUGIN_SPI_MISMATCH',
      [`${FUTURE}@3.0.0`, '^9.0.0', `SPI ${SPI_VERSION}`],
    ],
    ['a package without a "bifro" field', 'notPlugin', 'BIFRO_PLUGIN_MANIFEST_MISSING', [`${NOT_PLUGIN}@1.0.0`, 'not a Bifro plugin']],
    [
      'an entry module missing from the package',
      'unbuilt',
      'BIFRO_PLUGIN_IMPORT_FAILED',
      [`${BROKEN}@1.0.0`, 'its entry module dist/index.js is not in the package; is the plugin built?'],
    ],
  ] as const)(
    'refuses %s and leaves nothing in the plugins directory',
    async (_what, fixture, code, parts) => {
      const err = await failure(installPlugin(fixture === 'unbuilt' ? unbuilt() : fx[fixture], options()));
      expect(err.code).toBe(code);
      for (const part of parts) expect(err.message).toContain(part);
      expect(err.message).not.toContain('.staging-');
      expect(readdirSync(pluginsDir)).toEqual([]);
    },
    60_000,
  );

  it('reports what npm says about a package the registry does not have', async () => {
    const err = await failure(installPlugin('bifro-itest-no-such-package@1.0.0', options()));
    expect(err.code).toBe('BIFRO_PLUGIN_FETCH_FAILED');
    expect(err.message).toMatch(/npm could not get bifro-itest-no-such-package@1\.0\.0: E404: Not Found - GET /);
    expect(err.message).not.toContain('complete log');
    expect(readdirSync(pluginsDir)).toEqual([]);
  }, 60_000);

  it('fails fast and clearly when the registry does not answer', async () => {
    const dead = `http://127.0.0.1:${await freePort()}/`;
    const started = Date.now();
    const err = await failure(installPlugin(PLUGIN, options({ registry: dead })));
    expect(err.code).toBe('BIFRO_PLUGIN_REGISTRY_UNREACHABLE');
    expect(err.message).toContain(`cannot reach the npm registry ${dead}: connect ECONNREFUSED`);
    expect(Date.now() - started).toBeLessThan(10_000);
    expect(readdirSync(pluginsDir)).toEqual([]);
    const search = await failure(searchPlugins([], { registry: dead, cwd: work, env: process.env }));
    expect(search.code).toBe('BIFRO_PLUGIN_REGISTRY_UNREACHABLE');
  }, 30_000);
});

/** The BROKEN fixture with `main` naming a file the package lacks (as a plugin published before its build). */
function unbuilt(): string {
  const dir = path.join(work, `unbuilt-${path.basename(pluginsDir)}`);
  mkdirSync(dir);
  const pkg = JSON.parse(readFileSync(path.join(fx.broken, 'package.json'), 'utf8')) as Record<string, unknown>;
  writeFileSync(path.join(dir, 'package.json'), JSON.stringify({ ...pkg, main: 'dist/index.js' }));
  return dir;
}

describe('plugin remove', () => {
  it('refuses to remove a plugin the config uses unless forced, then removes its folder', async () => {
    await installPlugin(fx.plugin['1.0.0'], options());
    const config = configWith({ events: [{ use: PLUGIN, required: true, options: {} }] }, { pluginsDir, file: '/etc/bifro.yml' });
    expect(configUses(config, PLUGIN)).toEqual(['plugins.events[0]']);

    const refused = await failure(removePlugin(PLUGIN, { pluginsDir, config }));
    expect(refused.code).toBe('BIFRO_PLUGIN_IN_USE');
    expect(refused.message).toContain(`plugin ${PLUGIN} is used by the configuration /etc/bifro.yml: plugins.events[0]`);
    expect(readdirSync(pluginsDir)).toEqual([PLUGIN_FOLDER]);

    const removed = await removePlugin(PLUGIN, { pluginsDir, config, force: true });
    expect(removed).toEqual({ name: PLUGIN, version: '1.0.0', dir: path.join(pluginsDir, PLUGIN_FOLDER), usedBy: ['plugins.events[0]'] });
    expect(readdirSync(pluginsDir)).toEqual([]);

    const missing = await failure(removePlugin(PLUGIN, { pluginsDir }));
    expect(missing.code).toBe('BIFRO_PLUGIN_NOT_INSTALLED');
    expect(missing.message).toContain(`plugin ${PLUGIN} is not installed in the plugins directory ${pluginsDir}`);
  }, 60_000);

  it('names the default storage as a use when plugins.storage is not set', () => {
    const config = configWith({ storage: undefined });
    expect(configUses(config, '@bifro/plugin-storage-level')).toEqual(['plugins.storage (not set: the default storage)']);
    expect(configUses(config, PLUGIN)).toEqual([]);
  });
});

describe('plugin search', () => {
  it('lists the packages with the keyword, their SPI range and whether it fits', async () => {
    const result = await searchPlugins([], { registry: registry.url, cwd: work, env: process.env });
    expect(result.registry).toBe(registry.url);
    expect(result.hits).toEqual([
      {
        name: PLUGIN,
        version: '1.1.0',
        description: 'Events plugin with a dependency of its own',
        spiRange: '^1.0.0',
        kinds: ['events'],
        compatible: true,
      },
      { name: FUTURE, version: '3.0.0', description: 'A plugin for a later SPI', spiRange: '^9.0.0', kinds: ['events'], compatible: false },
    ]);
    expect(result.hits.map((h) => h.name)).not.toContain(HIDDEN);
  });

  it('narrows by words, and finds nothing for words no plugin has', async () => {
    const env = { ...process.env, ...registry.env() }; // the registry from npm's configuration
    expect((await searchPlugins(['later'], { cwd: work, env })).hits.map((h) => h.name)).toEqual([FUTURE]);
    expect((await searchPlugins(['zzz-nothing'], { cwd: work, env })).hits).toEqual([]);
  });
});
