import { spawn, type ChildProcess } from 'node:child_process';
import { existsSync, mkdirSync, mkdtempSync, readdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { SPI_VERSION } from '@bifro/spi';
import { startBrokerProcess } from '../support/broker-process';
import { tryConnect, uniqueName, withClients, type ConnectResult } from '../support/mqtt-helpers';
import { run, startNpmRegistry, type NpmRegistry } from '../support/npm-registry';
import { REPO } from '../support/test-broker';

/**
 * First the plugin path from a clone, as the README gives it, while the registry holds nothing of
 * Bifro: the generator packs the clone's `@bifro/spi` into the project. Then the release path, as it
 * will be once Bifro is published: `npm run release:pack` checks and packs
 * every publishable package of this repository, the tarballs are published to a real registry on
 * 127.0.0.1 (verdaccio, proxying the public registry for everything else), and then, from empty
 * folders that know only that registry, a user generates a plugin with `npm create
 * bifro-plugin@latest`, installs the broker with `npm install @bifro/core`, installs the plugin
 * with `npx bifro plugin install` (into `<dataDir>/plugins`, the default) and connects to the
 * broker with the generated demo login. npm's cache is the user's own, shared with
 * 28-plugin-marketplace: the public packages are fetched once.
 */

jest.setTimeout(300_000);

const RELEASE_PACK = path.join(REPO, 'scripts', 'release-pack.mjs');
const PLUGIN = '@acme/bifro-auth-release';
const PLUGIN_TARBALL = 'acme-bifro-auth-release-0.1.0.tgz';

let registry: NpmRegistry;
let work: string;

/** The environment without BIFRO_* and npm_* variables of the runner (jest may run under `npm test`). */
function cleanEnv(): NodeJS.ProcessEnv {
  const env: NodeJS.ProcessEnv = {};
  for (const [k, v] of Object.entries(process.env)) if (!k.startsWith('BIFRO_') && !k.toLowerCase().startsWith('npm_')) env[k] = v;
  return env;
}

/** A command as a user runs it with only the test registry configured; rejects with its output when it fails. */
async function sh(command: string, args: readonly string[], cwd: string, env: NodeJS.ProcessEnv = userEnv()): Promise<string> {
  const { code, output } = await run(command, args, cwd, env);
  if (code !== 0) throw new Error(`${command} ${args.join(' ')} (in ${cwd}) exited ${code}:\n${output}`);
  return output;
}

const userEnv = (): NodeJS.ProcessEnv => ({ ...cleanEnv(), ...registry.env() });

const readJson = <T>(file: string): T => JSON.parse(readFileSync(file, 'utf8')) as T;

/** The packages a release must hold: every workspace of the root package.json that is not private. */
function publishableNames(): string[] {
  const dirs = ['spi', 'core', 'archetype', ...readdirSync(path.join(REPO, 'plugins')).map((d) => path.join('plugins', d))];
  return dirs
    .filter((d) => existsSync(path.join(REPO, d, 'package.json')))
    .map((d) => readJson<{ name: string; private?: boolean }>(path.join(REPO, d, 'package.json')))
    .filter((pkg) => pkg.private !== true)
    .map((pkg) => pkg.name)
    .sort();
}

interface Packed {
  readonly name: string;
  readonly version: string;
  readonly file: string;
}

beforeAll(async () => {
  work = mkdtempSync(path.join(os.tmpdir(), 'bifro-release-'));
  registry = await startNpmRegistry();
});

afterAll(async () => {
  await registry?.stop();
  if (work !== undefined) rmSync(work, { recursive: true, force: true });
});

describe('from a clone, with nothing of Bifro on the registry: the README commands as written', () => {
  const clients = withClients(() => port);
  let port = 0;

  it('npx create-bifro-plugin, then npm install, test, build and pack with no manual step; npx bifro plugin install puts it in data/plugins', async () => {
    // The registry holds nothing of Bifro yet (the release is published by the tests below): like the public one today.
    expect((await run('npm', ['view', '@bifro/spi', 'version'], work, userEnv())).code).not.toBe(0);
    const home = path.join(work, 'home');
    mkdirSync(home);
    // The README runs the generator from the clone's root (the target here: a folder outside it).
    const project = path.join(home, 'my-auth');
    const created = await sh('npx', ['create-bifro-plugin', project, '--kind', 'auth', '--name', '@acme/bifro-auth-demo', '--yes'], REPO);
    expect(created).toContain(`vendor/bifro-spi-${SPI_VERSION}.tgz`);
    for (const step of [['install', '--no-audit', '--no-fund'], ['test'], ['run', 'build'], ['run', 'pack']])
      await sh('npm', step, project);
    expect(readJson<{ version: string }>(path.join(project, 'node_modules', '@bifro', 'spi', 'package.json')).version).toBe(SPI_VERSION);
    const tarball = path.join(project, 'acme-bifro-auth-demo-0.1.0.tgz');
    // What an install reads of the packed manifest names no path of this machine: no dependencies, the SPI as a peer range.
    const packed = await sh('tar', ['-xOzf', tarball, 'package/package.json'], work, cleanEnv());
    const manifest = JSON.parse(packed) as { dependencies?: object; peerDependencies: Record<string, string> };
    expect(manifest.dependencies).toBeUndefined();
    expect(manifest.peerDependencies).toEqual({ '@bifro/spi': `^${SPI_VERSION}` });

    // `npx bifro plugin install <tarball>` from the clone's root; BIFRO_DATA_DIR keeps this test out of the clone's own data/.
    const data = path.join(home, 'data');
    const installed = await sh('npx', ['bifro', 'plugin', 'install', tarball], REPO, { ...userEnv(), BIFRO_DATA_DIR: data });
    expect(installed).toContain('installed @acme/bifro-auth-demo@0.1.0');
    expect(readdirSync(path.join(data, 'plugins'))).toEqual(['acme+bifro-auth-demo']);

    const config = path.join(home, 'bifro.yml');
    writeFileSync(
      config,
      [
        `dataDir: ${JSON.stringify(data)}`,
        'listeners:',
        '  - { name: tcp, type: tcp, host: 127.0.0.1, port: 0 }',
        'plugins:',
        '  auth:',
        "    - use: '@acme/bifro-auth-demo'",
        '  storage:',
        "    use: '@bifro/plugin-storage-memory'",
        '',
      ].join('\n'),
    );
    const broker = await startBrokerProcess(config);
    try {
      port = broker.port;
      const demo = await tryConnect(port, { protocolVersion: 5, clientId: uniqueName('demo'), username: 'demo', password: 'demo-secret' });
      clients.track(demo.client);
      expect(codeOf(demo)).toBe(0);
    } finally {
      await broker.stop();
    }
  });
});

describe('npm run release:pack', () => {
  it('refuses a release with a package that has no changelog entry, is not public or has a path dependency, and packs nothing', async () => {
    const root = path.join(work, 'bad-repo');
    const pkg = path.join(root, 'packages', 'a');
    mkdirSync(pkg, { recursive: true });
    writeFileSync(path.join(root, 'package.json'), JSON.stringify({ name: 'r', private: true, workspaces: ['packages/*'] }));
    writeFileSync(
      path.join(pkg, 'package.json'),
      JSON.stringify({
        name: '@acme/a',
        version: '1.1.0',
        license: 'MIT',
        main: 'index.js',
        files: ['index.js', 'CHANGELOG.md'],
        dependencies: { '@acme/b': 'file:../b' },
      }),
    );
    writeFileSync(path.join(pkg, 'index.js'), '');
    writeFileSync(path.join(pkg, 'CHANGELOG.md'), '# Changelog\n\n## 1.0.0\n\nFirst.\n');
    const out = path.join(root, 'release');
    const { code, output } = await run(process.execPath, [RELEASE_PACK, '--root', root, '--no-build', '--out', out], root, cleanEnv());
    expect(code).toBe(1);
    expect(output).toContain('release:pack: 3 problem(s), nothing packed:');
    expect(output).toContain('packages/a (@acme/a): CHANGELOG.md has no "## 1.1.0" section');
    expect(output).toContain('packages/a (@acme/a): scoped, needs "publishConfig": { "access": "public" }');
    expect(output).toContain('packages/a (@acme/a): dependencies.@acme/b is "file:../b", which a registry cannot resolve');
    expect(existsSync(out)).toBe(false);
  });

  it('checks and packs every publishable package, in publish order, and each publishes to a registry', async () => {
    const out = path.join(work, 'release');
    // The build ran before the tests (npm test builds; the other e2e tests need core/dist too).
    const packedOutput = await sh('npm', ['run', 'release:pack', '--', '--no-build', '--out', out], REPO, cleanEnv());
    expect(packedOutput).toContain(`checked ${publishableNames().length} packages: versions, changelogs, manifests, dependencies`);
    const packed = readJson<Packed[]>(path.join(out, 'packages.json'));
    expect(packed.map((p) => p.name).sort()).toEqual(publishableNames());
    for (const p of packed) expect(existsSync(path.join(out, p.file))).toBe(true);
    // A package comes after those of the release it depends on.
    const at = (name: string): number => packed.findIndex((p) => p.name === name);
    expect(at('@bifro/spi')).toBe(0);
    for (const dep of ['@bifro/plugin-auth-file', '@bifro/plugin-storage-level', '@bifro/plugin-storage-memory', '@bifro/spi'])
      expect(at(dep)).toBeLessThan(at('@bifro/core'));
    // @bifro/core ships the bifro bin and its built CLI; every package its changelog.
    const core = packed.find((p) => p.name === '@bifro/core')!;
    const files = (await sh('tar', ['-tzf', path.join(out, core.file)], work, cleanEnv())).split('\n');
    expect(files).toEqual(expect.arrayContaining(['package/bin/bifro.js', 'package/dist/cli/main.js', 'package/CHANGELOG.md']));
    expect(files.some((f) => f.startsWith('package/src/') || f.startsWith('package/test/'))).toBe(false);

    const publish = (file: string): Promise<string> =>
      sh('npm', ['publish', path.join(out, file), '--registry', registry.url, '--userconfig', registry.npmrc, '--ignore-scripts'], work);
    await Promise.all(packed.map((p) => publish(p.file)));
    const spi = await sh('npm', ['view', '@bifro/spi', 'version'], work);
    expect(spi.trim()).toBe(SPI_VERSION);
  });
});

describe('from empty folders, with only the registry: npm create bifro-plugin@latest, npm install @bifro/core, npx bifro', () => {
  const clients = withClients(() => port);
  let port = 0;

  it('a generated plugin builds against the published SPI, installs into the published broker and lets the demo user in', async () => {
    const user = path.join(work, 'user');
    mkdirSync(user);
    const created = await sh('npm', ['create', 'bifro-plugin@latest', 'my-auth', '--', '--kind', 'auth', '--name', PLUGIN, '--yes'], user);
    const project = path.join(user, 'my-auth');
    const pkg = readJson<{ devDependencies: Record<string, string> }>(path.join(project, 'package.json'));
    // Installed from a registry, the generator depends on the SPI there: a range, nothing vendored.
    expect(pkg.devDependencies['@bifro/spi']).toBe(`^${SPI_VERSION}`);
    expect(existsSync(path.join(project, 'vendor'))).toBe(false);
    const tarball = path.join(project, PLUGIN_TARBALL);
    expect(created).toContain(`npx bifro plugin install ${tarball}\n`);
    expect(created).toContain('user name "demo"');

    // The plugin project and the broker folder install side by side (mostly waiting on the registry).
    const broker = path.join(user, 'broker');
    mkdirSync(broker);
    await Promise.all([
      (async () => {
        await sh('npm', ['install', '--no-audit', '--no-fund'], project);
        await sh('npm', ['run', 'build'], project);
        await sh('npm', ['run', 'pack'], project);
      })(),
      (async () => {
        await sh('npm', ['init', '-y'], broker);
        await sh('npm', ['install', '@bifro/core', '--no-audit', '--no-fund'], broker);
      })(),
    ]);
    expect(readJson<{ version: string }>(path.join(project, 'node_modules', '@bifro', 'spi', 'package.json')).version).toBe(SPI_VERSION);
    const coreVersion = readJson<{ version: string }>(path.join(REPO, 'core', 'package.json')).version;
    expect(await sh('npx', ['bifro', '--version'], broker)).toContain(coreVersion);

    mkdirSync(path.join(broker, 'conf'));
    writeFileSync(
      path.join(broker, 'conf', 'bifro.yml'),
      [
        'dataDir: ../data',
        'listeners:',
        '  - { name: tcp, type: tcp, host: 127.0.0.1, port: 0 }',
        'plugins:',
        '  auth:',
        `    - use: '${PLUGIN}'`,
        '  storage:',
        "    use: '@bifro/plugin-storage-memory'",
        '',
      ].join('\n'),
    );
    // No --plugins-dir, no pluginsDir: the default, <dataDir>/plugins.
    const installed = await sh('npx', ['bifro', 'plugin', 'install', tarball], broker);
    expect(installed).toContain(`installed ${PLUGIN}@0.1.0`);
    expect(readdirSync(path.join(broker, 'data', 'plugins'))).toEqual(['acme+bifro-auth-release']);

    const started = await startInstalledBroker(broker);
    try {
      port = started.port;
      const demo = await tryConnect(port, { protocolVersion: 5, clientId: uniqueName('demo'), username: 'demo', password: 'demo-secret' });
      clients.track(demo.client);
      expect(codeOf(demo)).toBe(0);
      const wrong = await tryConnect(port, { protocolVersion: 5, clientId: uniqueName('w'), username: 'demo', password: 'nope' });
      clients.track(wrong.client);
      expect(codeOf(wrong)).toBe(0x86);
    } finally {
      await started.stop();
    }
  });
});

/**
 * `bifro start` of the broker installed in `folder` (its conf/bifro.yml), by the bin npm linked
 * (what `npx bifro start` runs; started directly so that the test stops this process by its pid).
 */
function startInstalledBroker(folder: string): Promise<{ port: number; stop(): Promise<void> }> {
  const bin = path.join(folder, 'node_modules', '@bifro', 'core', 'bin', 'bifro.js');
  const child: ChildProcess = spawn(process.execPath, [bin, 'start'], {
    cwd: folder,
    env: { ...cleanEnv(), BIFRO_LOG_PRETTY: 'false' },
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  let out = '';
  const exited = new Promise<void>((resolve) => child.once('exit', () => resolve()));
  const stop = async (): Promise<void> => {
    if (child.exitCode === null && child.signalCode === null) child.kill('SIGTERM');
    await exited;
  };
  return new Promise((resolve, reject) => {
    const timer = setTimeout(() => {
      void stop();
      reject(new Error(`the installed broker did not start in 20 s:\n${out}`));
    }, 20_000);
    child.stderr!.on('data', (d: Buffer) => (out += d.toString()));
    child.stdout!.on('data', (d: Buffer) => {
      out += d.toString();
      const started = out
        .split('\n')
        .slice(0, -1) // complete lines only
        .filter((l) => l.startsWith('{'))
        .map((l) => JSON.parse(l) as { msg?: string; listeners?: { port: number }[] })
        .find((e) => e.msg?.startsWith('bifro started') && e.listeners?.[0] !== undefined);
      if (started === undefined) return;
      clearTimeout(timer);
      resolve({ port: started.listeners![0]!.port, stop });
    });
    void exited.then(() => {
      clearTimeout(timer);
      reject(new Error(`the installed broker exited before it was ready:\n${out}`));
    });
  });
}

/** The CONNACK code of a connect attempt (MQTT.js reports a refusal as an error with the code). */
function codeOf(r: ConnectResult): number | undefined {
  return r.connack?.reasonCode ?? r.connack?.returnCode ?? r.error?.code;
}
