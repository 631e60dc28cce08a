import { spawn } from 'node:child_process';
import { existsSync, mkdirSync, mkdtempSync, readdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { SPI_VERSION } from '@bifro/spi';
import { run as runCommand, freePort, startNpmRegistry, type NpmRegistry } from '../../../test/support/npm-registry';
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
} from '../plugin-host/plugin-install-fixtures';

/**
 * `bifro plugin install | remove | search` as a user runs them: the built CLI as its own process,
 * the real npm client, a real registry (verdaccio, started once for this file). Build first:
 * `npx tsc -b` (npm test does).
 */

const REPO = path.resolve(__dirname, '..', '..', '..');
const CLI = path.join(REPO, 'core', 'bin', 'bifro.js');

interface Result {
  readonly code: number | null;
  readonly stdout: string;
  readonly stderr: string;
}

let registry: NpmRegistry;
let fx: Fixtures;
let work: string;
/** This test's folder (the CLI's cwd); its plugins directory is `plugins` in it. */
let tmp: string;
let plugins: string;

/** The environment without BIFRO_* variables, npm set to the test registry (by default through npm's environment variables). */
function env(npm: Record<string, string> = registry.env()): NodeJS.ProcessEnv {
  const clean: NodeJS.ProcessEnv = {};
  for (const [k, v] of Object.entries(process.env)) if (!k.startsWith('BIFRO_') && !k.toLowerCase().startsWith('npm_config_')) clean[k] = v;
  return { ...clean, BIFRO_LOG_PRETTY: 'false', ...npm };
}

function bifro(...args: string[]): Promise<Result> {
  return bifroWith(env(), ...args);
}

function bifroWith(environment: NodeJS.ProcessEnv, ...args: string[]): Promise<Result> {
  return new Promise((resolve, reject) => {
    const child = spawn(process.execPath, [CLI, ...args], { cwd: tmp, env: environment, stdio: ['ignore', 'pipe', 'pipe'] });
    let stdout = '';
    let stderr = '';
    child.stdout.on('data', (d: Buffer) => (stdout += d.toString()));
    child.stderr.on('data', (d: Buffer) => (stderr += d.toString()));
    child.on('error', reject);
    child.on('close', (code) => resolve({ code, stdout, stderr }));
  });
}

/** `bifro plugin <sub> ... --plugins-dir plugins`. */
function plugin(sub: string, ...args: string[]): Promise<Result> {
  return bifro('plugin', sub, ...args, '--plugins-dir', 'plugins');
}

function versionIn(folder: string): string {
  return (JSON.parse(readFileSync(path.join(plugins, folder, 'package.json'), 'utf8')) as { version: string }).version;
}

beforeAll(async () => {
  if (!existsSync(path.join(REPO, 'core', 'dist', 'cli', 'main.js'))) throw new Error('core/dist is missing: build first (npx tsc -b)');
  registry = await startNpmRegistry();
  work = mkdtempSync(path.join(os.tmpdir(), 'bifro-install-cli-'));
  fx = writeFixtures(path.join(work, 'fixtures'));
  await publishFixtures(registry, fx);
}, 90_000);

afterAll(async () => {
  await registry?.stop();
  if (work !== undefined) rmSync(work, { recursive: true, force: true });
});

beforeEach(() => {
  tmp = mkdtempSync(path.join(work, 'cwd-'));
  plugins = path.join(tmp, 'plugins');
});

describe('bifro plugin install', () => {
  it('installs a folder with its dependency; the plugin then verifies and is listed', async () => {
    const r = await plugin('install', fx.plugin['1.0.0']);
    expect(r.stderr).toBe('');
    expect(r.code).toBe(0);
    const dir = path.join(plugins, PLUGIN_FOLDER);
    expect(r.stdout).toContain(`fetching ${fx.plugin['1.0.0']} (packing the folder as npm publishes it) ...`);
    expect(r.stdout).toContain(`installing dependencies of ${PLUGIN}@1.0.0 (npm install --omit=dev --ignore-scripts)`);
    expect(r.stdout).not.toContain('verifying');
    expect(r.stdout).toMatch(
      new RegExp(
        [
          `installed ${PLUGIN}@1.0.0`,
          '  kinds:        events',
          `  SPI range:    \\^1\\.0\\.0 \\(broker SPI ${SPI_VERSION.replace(/\./g, '\\.')}\\)`,
          `  folder:       ${dir.replace(/[.+]/g, '\\$&')}`,
          '  dependencies: 1 package in its node_modules',
          '  integrity:    sha512-[A-Za-z0-9+/]{86}==',
          '  entry:        index\\.js \\(the module the broker loads\\)',
          '  scripts:      none declared',
          `Nothing of ${PLUGIN.replace('/', '\\/')} has run yet: the broker loads index\\.js when it starts`,
        ].join('\n'),
      ),
    );
    expect(r.stdout).toContain(`\`bifro plugin verify ${PLUGIN}\` loads it now and checks every phase (this runs its code)`);
    expect(r.stdout).toContain('The broker loads plugins when it starts: restart it');
    expect(r.stdout).toContain('with --workers, roll the workers');
    expect(readdirSync(plugins)).toEqual([PLUGIN_FOLDER]);
    expect(readdirSync(path.join(dir, 'node_modules')).filter((n) => !n.startsWith('.'))).toEqual([DEP]);
    expect(existsSync(path.join(dir, 'node_modules', '@bifro', 'spi'))).toBe(false);

    const verify = await plugin('verify', PLUGIN);
    expect(verify.stderr).toBe('');
    expect(verify.code).toBe(0);
    expect(verify.stdout).toContain(`Verifying ${PLUGIN}@1.0.0: folder ${dir}`);
    expect(verify.stdout).toMatch(
      /Installed by bifro plugin install from \S+ at \S+: integrity sha512-\S+; 0 install script\(s\) declared, not run/,
    );
    expect(verify.stdout).toContain(`Loaded ${PLUGIN} (its code ran in this process, as it will in the broker's):`);
    expect(verify.stdout).toContain('passed every phase');
    const list = await plugin('list');
    expect(list.stdout).toMatch(
      new RegExp(`${PLUGIN.replace('/', '\\/')}\\s+1\\.0\\.0\\s+events\\s+\\^1\\.0\\.0\\s+yes\\s+yes\\s+plugins-dir`),
    );
  }, 60_000);

  it('installs a tarball made by npm pack', async () => {
    const packed = await runCommand('npm', ['pack', fx.plugin['1.1.0'], '--pack-destination', tmp, '--ignore-scripts'], tmp, process.env);
    expect(packed.code).toBe(0);
    const tgz = readdirSync(tmp).find((f) => f.endsWith('.tgz'))!;
    const r = await plugin('install', `./${tgz}`);
    expect(r.stderr).toBe('');
    expect(r.code).toBe(0);
    expect(r.stdout).toContain(`fetching ./${tgz} (tarball) ...`);
    expect(r.stdout).toContain(`installed ${PLUGIN}@1.1.0`);
    expect((await plugin('verify', PLUGIN)).code).toBe(0);
  }, 60_000);

  it('installs name@version from the registry, upgrades by name, reinstalls the same version only with --force', async () => {
    const first = await plugin('install', `${PLUGIN}@1.0.0`);
    expect(first.stderr).toBe('');
    expect(first.stdout).toContain(`fetching ${PLUGIN}@1.0.0 from ${registry.url} ...`);
    expect(first.stdout).toContain(`installed ${PLUGIN}@1.0.0`);
    expect(versionIn(PLUGIN_FOLDER)).toBe('1.0.0');

    const upgrade = await plugin('install', PLUGIN);
    expect(upgrade.stderr).toBe('');
    expect(upgrade.code).toBe(0);
    expect(upgrade.stdout).toContain(`upgraded ${PLUGIN} from 1.0.0 to 1.1.0`);
    expect(versionIn(PLUGIN_FOLDER)).toBe('1.1.0');
    expect(readdirSync(plugins)).toEqual([PLUGIN_FOLDER]); // no old folder, no staging folder
    const verify = await plugin('verify', PLUGIN);
    expect(verify.code).toBe(0);
    expect(verify.stdout).toContain(`Verifying ${PLUGIN}@1.1.0`);

    const same = await plugin('install', PLUGIN);
    expect(same.code).toBe(1);
    expect(same.stderr).toContain(
      `error BIFRO_PLUGIN_ALREADY_INSTALLED: ${PLUGIN}@1.1.0 is already installed in ${path.join(plugins, PLUGIN_FOLDER)}`,
    );
    expect(same.stderr).toContain('hint:');
    const forced = await plugin('install', PLUGIN, '--force');
    expect(forced.code).toBe(0);
    expect(forced.stdout).toContain(`reinstalled ${PLUGIN}@1.1.0 (--force)`);
  }, 90_000);

  it.each([
    [
      'an SPI range this broker does not implement',
      'registry',
      'BIFRO_PLUGIN_SPI_MISMATCH',
      [`${FUTURE}@3.0.0: it supports SPI ^9.0.0`, `this broker implements SPI ${SPI_VERSION}`],
    ],
    ['a package without a "bifro" field', 'notPlugin', 'BIFRO_PLUGIN_MANIFEST_MISSING', [`${NOT_PLUGIN}@1.0.0: not a Bifro plugin`]],
  ] as const)(
    'refuses %s: exit 1, the code and a hint, nothing left in the plugins directory',
    async (_what, source, code, parts) => {
      const r = await plugin('install', source === 'registry' ? FUTURE : fx[source]);
      expect(r.code).toBe(1);
      expect(r.stderr).toContain(`error ${code}: cannot install `);
      for (const part of parts) expect(r.stderr).toContain(part);
      expect(r.stderr).toContain('  hint: ');
      expect(r.stderr).not.toMatch(/\n\s+at /);
      expect(r.stderr).not.toContain('.staging-');
      expect(readdirSync(plugins)).toEqual([]);
    },
    60_000,
  );

  it('installs without running anything: no install script, no top-level code; verify then loads it', async () => {
    const marker = path.join(tmp, 'script-ran');
    const loaded = path.join(tmp, 'module-loaded');
    const environment = { ...env(), [MARKERS.script]: marker, [MARKERS.load]: loaded };
    const r = await bifroWith(environment, 'plugin', 'install', SCRIPTED, '--plugins-dir', 'plugins');
    expect(r.stderr).toBe('');
    expect(r.code).toBe(0);
    expect(r.stdout).not.toContain('--allow-scripts: npm runs');
    expect(r.stdout).toContain('  scripts:      2 install scripts declared, NOT run (--allow-scripts runs them):');
    expect(r.stdout).toMatch(
      new RegExp(`\\n {16}${SCRIPTED}@1\\.0\\.0 postinstall: node -e .*\\n {16}${SCRIPTED_DEP}@1\\.0\\.0 install: node -e `),
    );
    expect(r.stdout).toContain('These install scripts were not run.');
    expect(r.stdout).toContain(`Nothing of ${SCRIPTED} has run yet:`);
    expect(existsSync(marker)).toBe(false);
    expect(existsSync(`${marker}.dep`)).toBe(false);
    expect(existsSync(loaded)).toBe(false);

    const verify = await bifroWith(environment, 'plugin', 'verify', SCRIPTED, '--plugins-dir', 'plugins');
    expect(verify.code).toBe(0);
    expect(verify.stdout).toContain(`Installed by bifro plugin install from ${SCRIPTED} at `);
    expect(verify.stdout).toContain('2 install script(s) declared, not run');
    expect(readFileSync(loaded, 'utf8')).toBe('loaded');
  }, 60_000);

  it('--allow-scripts runs the install scripts, saying why that is dangerous first', async () => {
    const marker = path.join(tmp, 'script-ran');
    const loaded = path.join(tmp, 'module-loaded');
    const environment = { ...env(), [MARKERS.script]: marker, [MARKERS.load]: loaded };
    const r = await bifroWith(environment, 'plugin', 'install', SCRIPTED, '--plugins-dir', 'plugins', '--allow-scripts');
    expect(r.stderr).toBe('');
    expect(r.code).toBe(0);
    expect(r.stdout.split('\n')[0]).toBe(
      "warning: --allow-scripts: npm runs the install scripts of the package and of every dependency now, as this user, with this shell's environment (tokens, credentials) and files, before Bifro has checked anything: they can do whatever you can. Allow them only for a package you trust that needs them (a native module built on install).",
    );
    expect(r.stdout).toContain('  scripts:      2 install scripts declared, run (--allow-scripts):');
    expect(readFileSync(marker, 'utf8')).toBe('ran');
    expect(readFileSync(`${marker}.dep`, 'utf8')).toBe('ran');
    // Install scripts are one thing, the plugin's own code another: it is still not loaded.
    expect(existsSync(loaded)).toBe(false);
  }, 60_000);

  it('installs a plugin whose entry module throws (it is not loaded); verify then refuses it', async () => {
    const r = await plugin('install', fx.broken);
    expect(r.stderr).toBe('');
    expect(r.code).toBe(0);
    const verify = await plugin('verify', BROKEN);
    expect(verify.code).toBe(1);
    expect(verify.stderr).toContain('error BIFRO_PLUGIN_IMPORT_FAILED: phase import failed');
    expect(verify.stderr).toContain('broken on purpose');
  }, 60_000);

  it('honours the project .npmrc of the cwd for the package and its dependencies', async () => {
    // No npm_config_registry, and a user config without a registry: only ./.npmrc names the test registry.
    const userconfig = path.join(tmp, 'empty-user-npmrc');
    writeFileSync(userconfig, '');
    writeFileSync(path.join(tmp, '.npmrc'), readFileSync(registry.npmrc, 'utf8'));
    const r = await bifroWith(env({ npm_config_userconfig: userconfig }), 'plugin', 'install', PLUGIN, '--plugins-dir', 'plugins');
    expect(r.stderr).toBe('');
    expect(r.code).toBe(0);
    expect(r.stdout).toContain(`fetching ${PLUGIN} from ${registry.url} ...`);
    expect(readdirSync(path.join(plugins, PLUGIN_FOLDER, 'node_modules')).filter((n) => !n.startsWith('.'))).toEqual([DEP]);
    expect(existsSync(path.join(plugins, PLUGIN_FOLDER, '.npmrc'))).toBe(false);
  }, 60_000);

  it("reports npm's own message, trimmed, for a package the registry does not have", async () => {
    const r = await plugin('install', 'bifro-itest-no-such-package');
    expect(r.code).toBe(1);
    expect(r.stderr).toMatch(
      /^error BIFRO_PLUGIN_FETCH_FAILED: npm could not get bifro-itest-no-such-package: E404: Not Found - GET http:\/\/127\.0\.0\.1:\d+\/bifro-itest-no-such-package/,
    );
    expect(r.stderr).not.toContain('complete log');
    expect(readdirSync(plugins)).toEqual([]);
  }, 60_000);

  it('says clearly when --registry names a port nothing listens on', async () => {
    const dead = `http://127.0.0.1:${await freePort()}/`;
    const install = await plugin('install', PLUGIN, '--registry', dead);
    expect(install.code).toBe(1);
    expect(install.stderr).toContain(
      `error BIFRO_PLUGIN_REGISTRY_UNREACHABLE: cannot reach the npm registry ${dead}: connect ECONNREFUSED`,
    );
    expect(readdirSync(plugins)).toEqual([]);
    const search = await bifro('plugin', 'search', '--registry', dead);
    expect(search.code).toBe(1);
    expect(search.stderr).toContain(`error BIFRO_PLUGIN_REGISTRY_UNREACHABLE: cannot reach the npm registry ${dead}: connect ECONNREFUSED`);
  }, 30_000);
});

describe('bifro plugin remove', () => {
  it('refuses while the config uses the plugin, naming the keys; removes with --force; then says it is not installed', async () => {
    expect((await plugin('install', fx.plugin['1.0.0'])).code).toBe(0);
    const config = path.join(tmp, 'bifro.yml');
    writeFileSync(config, `pluginsDir: plugins\nplugins:\n  events:\n    - use: '${PLUGIN}'\n`);

    const refused = await bifro('plugin', 'remove', PLUGIN, '--config', config);
    expect(refused.code).toBe(1);
    expect(refused.stderr).toContain(
      `error BIFRO_PLUGIN_IN_USE: plugin ${PLUGIN} is used by the configuration ${config}: plugins.events[0]`,
    );
    expect(refused.stderr).toContain('--force');
    expect(readdirSync(plugins)).toEqual([PLUGIN_FOLDER]);

    const forced = await bifro('plugin', 'remove', PLUGIN, '--config', config, '--force');
    expect(forced.stderr).toBe('');
    expect(forced.code).toBe(0);
    expect(forced.stdout).toContain(`removed ${PLUGIN}@1.0.0 (folder ${path.join(plugins, PLUGIN_FOLDER)})`);
    expect(readdirSync(plugins)).toEqual([]);

    const again = await plugin('remove', PLUGIN);
    expect(again.code).toBe(1);
    expect(again.stderr).toContain(
      `error BIFRO_PLUGIN_NOT_INSTALLED: plugin ${PLUGIN} is not installed in the plugins directory ${plugins}`,
    );
  }, 60_000);
});

describe('bifro plugin search', () => {
  it("lists the plugins on npm's configured registry with their SPI range and compatibility, not the untagged one", async () => {
    const r = await bifro('plugin', 'search');
    expect(r.stderr).toBe('');
    expect(r.code).toBe(0);
    expect(r.stdout).toContain(`Bifro plugins on ${registry.url} (keyword bifro-plugin; broker SPI ${SPI_VERSION}):`);
    expect(r.stdout).toMatch(/NAME\s+VERSION\s+SPI\s+COMPATIBLE\s+KINDS\s+DESCRIPTION/);
    expect(r.stdout).toMatch(/@bifro-itest\/events-x\s+1\.1\.0\s+\^1\.0\.0\s+yes\s+events\s+Events plugin with a dependency of its own/);
    expect(r.stdout).toMatch(/bifro-itest-future\s+3\.0\.0\s+\^9\.0\.0\s+no\s+events\s+A plugin for a later SPI/);
    expect(r.stdout).not.toContain(HIDDEN);
    expect(r.stdout).not.toContain(DEP);
  });

  it('narrows by words, prints JSON with --json, and says so when nothing matches', async () => {
    const json = await bifro('plugin', 'search', 'later', '--json', '--registry', registry.url);
    expect(json.code).toBe(0);
    expect(JSON.parse(json.stdout)).toEqual([
      { name: FUTURE, version: '3.0.0', description: 'A plugin for a later SPI', spiRange: '^9.0.0', kinds: ['events'], compatible: false },
    ]);
    const none = await bifro('plugin', 'search', 'zzz-nothing');
    expect(none.code).toBe(0);
    expect(none.stdout.trim()).toBe(`No Bifro plugins matching "zzz-nothing" on ${registry.url} (packages with the keyword bifro-plugin).`);
  });
});

describe('bifro plugin install/remove/search: usage', () => {
  it('exits 2 on a missing argument, an option of another subcommand, a registry that is not a URL', async () => {
    const noSpec = await bifro('plugin', 'install');
    expect(noSpec.code).toBe(2);
    expect(noSpec.stderr).toContain('bifro plugin install: name the package, tarball (.tgz) or folder to install');
    expect((await bifro('plugin', 'remove')).code).toBe(2);
    const force = await bifro('plugin', 'search', '--force');
    expect(force.code).toBe(2);
    expect(force.stderr).toContain('bifro plugin search: unknown option "--force"');
    const scripts = await bifro('plugin', 'verify', PLUGIN, '--allow-scripts');
    expect(scripts.code).toBe(2);
    expect(scripts.stderr).toContain('bifro plugin verify: unknown option "--allow-scripts"');
    const url = await bifro('plugin', 'install', PLUGIN, '--registry', 'localhost:4873');
    expect(url.code).toBe(2);
    expect(url.stderr).toContain('--registry: expected an http:// or https:// URL');
    const help = await bifro('help', 'plugin');
    expect(help.stdout).toContain('bifro plugin install <name[@range|@version] | file.tgz | folder>');
    expect(help.stdout).toContain('[--registry URL] [--force] [--allow-scripts]');
    expect(help.stdout).toContain('bifro plugin search [words...] [--registry URL] [--json]');
  });
});

describe('the default plugins directory: <dataDir>/plugins, outside the installation', () => {
  it('without --plugins-dir nor pluginsDir, installs into <dataDir>/plugins of the config, where list and verify find it', async () => {
    const conf = path.join(tmp, 'conf');
    mkdirSync(conf);
    writeFileSync(path.join(conf, 'bifro.yml'), `dataDir: ../var\nplugins:\n  events:\n    - use: '${PLUGIN}'\n`);
    // Run from the broker's folder: conf/bifro.yml is the config it reads.
    const r = await bifro('plugin', 'install', fx.plugin['1.0.0']);
    expect(r.stderr).toBe('');
    expect(r.code).toBe(0);
    const dir = path.join(tmp, 'var', 'plugins', PLUGIN_FOLDER);
    expect(r.stdout).toContain(`  folder:       ${dir}\n`);
    expect(readdirSync(path.join(tmp, 'var', 'plugins'))).toEqual([PLUGIN_FOLDER]);
    // Not next to the config, not in the folder it ran from.
    expect(readdirSync(conf)).toEqual(['bifro.yml']);
    expect(existsSync(plugins)).toBe(false);

    const list = await bifro('plugin', 'list');
    expect(list.code).toBe(0);
    expect(list.stdout).toContain(`(plugins directory ${path.join(tmp, 'var', 'plugins')})`);
    expect(list.stdout).toMatch(new RegExp(`${PLUGIN.replace('/', '\\/')}\\s+1\\.0\\.0\\s+events\\s+.*plugins-dir\\s+events`));
    expect((await bifro('plugin', 'verify', PLUGIN)).code).toBe(0);
  }, 60_000);

  it('follows the data directory of the environment (BIFRO_DATA_DIR) when no config names one', async () => {
    const r = await bifroWith({ ...env(), BIFRO_DATA_DIR: 'state' }, 'plugin', 'install', fx.plugin['1.0.0']);
    expect(r.code).toBe(0);
    expect(readdirSync(path.join(tmp, 'state', 'plugins'))).toEqual([PLUGIN_FOLDER]);
  }, 60_000);

  it("from a clone, with the shipped conf/bifro.yml: installs go to data/plugins, not to the repository's workspaces, and the first-party plugins it uses still load", async () => {
    const shipped = path.join(REPO, 'conf', 'bifro.yml');
    const list = await bifro('plugin', 'list', '--config', shipped);
    expect(list.stderr).toBe('');
    expect(list.code).toBe(0);
    expect(list.stdout).toContain(`(plugins directory ${path.join(REPO, 'data', 'plugins')})`);
    // Resolved by package name from the broker's node_modules (npm links the workspaces there).
    for (const used of ['@bifro/plugin-settings-file', '@bifro/plugin-storage-level'])
      expect(list.stdout).toMatch(new RegExp(`${used.replace('/', '\\/')}\\s+1\\.0\\.0\\s+\\S+\\s+\\S+\\s+yes\\s+yes\\s+package`));
  }, 60_000);
});
