import { cpSync, existsSync, mkdirSync, mkdtempSync, readdirSync, readFileSync, rmSync, symlinkSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { SPI_VERSION } from '@bifro/spi';
import { startBrokerProcess, type BrokerProcess } from '../support/broker-process';
import { tryConnect, uniqueName, waitUntil, withClients, type ConnectResult } from '../support/mqtt-helpers';
import { run, startNpmRegistry, type NpmRegistry } from '../support/npm-registry';
import { REPO } from '../support/test-broker';

/**
 * The plugin marketplace as a user meets it, against a real npm registry on 127.0.0.1 (verdaccio,
 * proxying the public registry for typescript, jest...): this workspace's `@bifro/spi` and
 * `create-bifro-plugin` are published to it, then the commands of docs/plugin-authoring.md run as
 * written — `npm create bifro-plugin` for every kind, `npm install && npm test && npm run build`,
 * `npm publish`, `bifro plugin search`, `bifro plugin install` — and a broker started as its own
 * process (so the broker's `@bifro/spi` is shared with plugins for real, not by Jest's module
 * mapping) uses the generated plugins with real MQTT clients.
 */

jest.setTimeout(900_000);

const BIFRO = path.join(REPO, 'core', 'bin', 'bifro.js');
const KINDS = ['auth', 'acl', 'balancer', 'events', 'settings', 'throttler', 'storage'] as const;
const SPI_RANGE = `^${SPI_VERSION}`;

let registry: NpmRegistry;
let work: string;

/** A command with the test registry's npm settings; rejects with its output on failure or after `timeoutMs`. */
async function sh(command: string, args: readonly string[], cwd: string, timeoutMs = 240_000): Promise<string> {
  const { code, output } = await run(command, args, cwd, { ...cleanEnv(), ...registry.env() }, timeoutMs);
  if (code !== 0) throw new Error(`${command} ${args.join(' ')} (in ${cwd}) exited ${code}:\n${output}`);
  return output;
}

/** The environment without BIFRO_* and npm_* variables of the runner (jest may run under `npm test`). */
function cleanEnv(): NodeJS.ProcessEnv {
  const env: NodeJS.ProcessEnv = {};
  for (const [k, v] of Object.entries(process.env)) if (!k.startsWith('BIFRO_') && !k.toLowerCase().startsWith('npm_')) env[k] = v;
  return env;
}

const projectDir = (kind: string): string => path.join(work, `my-${kind}`);
const packageName = (kind: string): string => `@acme/bifro-${kind}-demo`;

beforeAll(async () => {
  work = mkdtempSync(path.join(os.tmpdir(), 'bifro-marketplace-'));
  registry = await startNpmRegistry();
  // What a release of this repository publishes (spi/dist and archetype/dist are built by `npm test`).
  await registry.publish(path.join(REPO, 'spi'));
  await registry.publish(path.join(REPO, 'archetype'));
});

afterAll(async () => {
  await registry?.stop();
  if (work !== undefined) rmSync(work, { recursive: true, force: true });
});

describe('npm create bifro-plugin → npm publish → bifro plugin install → a broker using it', () => {
  const clients = withClients(() => broker.port);
  let broker: BrokerProcess;

  it('npm create bifro-plugin generates a project for every kind, without a terminal', async () => {
    // The first run installs create-bifro-plugin from the registry into npm's cache; the others reuse it.
    const create = (kind: string): Promise<string> =>
      sh('npm', ['create', 'bifro-plugin@latest', `my-${kind}`, '--', '--kind', kind, '--name', packageName(kind), '--yes'], work);
    await create('auth');
    await Promise.all(KINDS.filter((k) => k !== 'auth').map(create));
    for (const kind of KINDS) {
      const pkg = JSON.parse(readFileSync(path.join(projectDir(kind), 'package.json'), 'utf8')) as Record<string, unknown>;
      expect(pkg).toMatchObject({
        name: packageName(kind),
        keywords: expect.arrayContaining(['bifro-plugin']),
        bifro: { kinds: [kind], spi: SPI_RANGE },
        peerDependencies: { '@bifro/spi': SPI_RANGE },
        devDependencies: expect.objectContaining({ '@bifro/spi': SPI_RANGE }),
      });
      expect(existsSync(path.join(projectDir(kind), 'src', `${kind}.ts`))).toBe(true);
      expect(existsSync(path.join(projectDir(kind), 'test', `${kind}.test.ts`))).toBe(true);
    }
  });

  it('the generated project installs, tests and builds out of the box (npm install && npm test && npm run build)', async () => {
    const dir = projectDir('auth');
    await sh('npm', ['install', '--no-audit', '--no-fund'], dir);
    // The broker's SPI comes from the registry as a dev dependency, the version this repository has.
    const spi = JSON.parse(readFileSync(path.join(dir, 'node_modules', '@bifro', 'spi', 'package.json'), 'utf8')) as { version: string };
    expect(spi.version).toBe(SPI_VERSION);
    const tested = await sh('npm', ['test'], dir);
    // The auth conformance kit alone is more than twenty cases, and the example's own tests come on top.
    expect(Number(/Tests:\s+(\d+) passed/.exec(tested)?.[1])).toBeGreaterThan(20);
    expect(tested).not.toMatch(/failed/);
    await sh('npm', ['run', 'build'], dir);
    expect(existsSync(path.join(dir, 'dist', 'index.js'))).toBe(true);
    const packed = await sh('npm', ['run', 'pack'], dir);
    expect(packed).toContain('acme-bifro-auth-demo-0.1.0.tgz');
  });

  it('every other kind builds and passes its own tests too (the same dependencies, shared)', async () => {
    const modules = path.join(projectDir('auth'), 'node_modules');
    await Promise.all(
      KINDS.filter((k) => k !== 'auth').map(async (kind) => {
        symlinkSync(modules, path.join(projectDir(kind), 'node_modules'), 'dir');
        await sh('npm', ['run', 'build'], projectDir(kind));
        expect(existsSync(path.join(projectDir(kind), 'dist', 'index.js'))).toBe(true);
      }),
    );
    // Their tests one after the other (each is a jest run with ts-jest: two cores).
    for (const kind of KINDS.filter((k) => k !== 'auth')) {
      expect(await sh('npm', ['test'], projectDir(kind))).toMatch(/Tests:\s+\d+ passed/);
    }
  });

  it('npm publish puts it on the registry, and bifro plugin search finds it with its SPI range', async () => {
    await registry.publish(projectDir('auth'));
    await registry.publish(projectDir('events'));
    const found = await sh(process.execPath, [BIFRO, 'plugin', 'search', 'demo', '--registry', registry.url, '--json'], work);
    const results = JSON.parse(found) as { name: string; version: string; spiRange?: string; compatible?: boolean }[];
    expect(results).toEqual(
      expect.arrayContaining([
        expect.objectContaining({ name: packageName('auth'), version: '0.1.0', spiRange: SPI_RANGE }),
        expect.objectContaining({ name: packageName('events'), version: '0.1.0', spiRange: SPI_RANGE }),
      ]),
    );
    // The packages that made it (the SPI, the generator) are on the registry but are not plugins.
    expect(results.map((r) => r.name)).not.toContain('@bifro/spi');
  });

  it('bifro plugin install by name, then a broker whose config uses it: the example user gets in, others do not', async () => {
    const pluginsDir = path.join(work, 'plugins');
    mkdirSync(pluginsDir);
    const installed = await sh(
      process.execPath,
      [BIFRO, 'plugin', 'install', packageName('auth'), '--plugins-dir', pluginsDir, '--registry', registry.url],
      work,
    );
    expect(installed).toContain(`${packageName('auth')}@0.1.0`);
    const folders = readdirSync(pluginsDir);
    expect(folders).toHaveLength(1);
    // A peer: not installed next to the plugin; the broker shares its own.
    expect(existsSync(path.join(pluginsDir, folders[0]!, 'node_modules', '@bifro', 'spi'))).toBe(false);

    // The generated event collector as a drop-in folder, as built: package.json and dist, nothing else.
    const dropIn = path.join(pluginsDir, 'events-demo');
    mkdirSync(dropIn);
    cpSync(path.join(projectDir('events'), 'package.json'), path.join(dropIn, 'package.json'));
    cpSync(path.join(projectDir('events'), 'dist'), path.join(dropIn, 'dist'), { recursive: true });

    const config = path.join(work, 'bifro.yml');
    writeFileSync(
      config,
      [
        `dataDir: ${JSON.stringify(path.join(work, 'data'))}`,
        `pluginsDir: ${JSON.stringify(pluginsDir)}`,
        'listeners:',
        '  - { name: tcp, type: tcp, host: 127.0.0.1, port: 0 }',
        'plugins:',
        '  auth:',
        `    - use: '${packageName('auth')}'`,
        '  events:',
        `    - use: '${packageName('events')}'`,
        '      options: { summaryEvery: 1, eventTypes: [clientConnected] }',
        '',
      ].join('\n'),
    );
    const listed = await sh(process.execPath, [BIFRO, 'plugin', 'list', '--config', config], work);
    expect(listed).toContain(packageName('auth'));
    expect(listed).toContain(packageName('events'));

    broker = await startBrokerProcess(config);
    try {
      const demo = await tryConnect(broker.port, {
        protocolVersion: 5,
        clientId: uniqueName('demo'),
        username: 'demo',
        password: 'demo-secret',
      });
      clients.track(demo.client);
      expect(codeOf(demo)).toBe(0);
      const wrong = await tryConnect(broker.port, { protocolVersion: 5, clientId: uniqueName('w'), username: 'demo', password: 'nope' });
      clients.track(wrong.client);
      expect(codeOf(wrong)).toBe(0x86);
      const v3 = await tryConnect(broker.port, { protocolVersion: 4, clientId: uniqueName('v3'), username: 'intruder', password: 'x' });
      clients.track(v3.client);
      expect(codeOf(v3)).not.toBe(0);
      // The collector counted the one connection that got in.
      const counted = (): boolean =>
        broker
          .output()
          .split('\n')
          .some((l) => l.includes('"event counts"') && l.includes(packageName('events')) && l.includes('"clientConnected":1'));
      expect(await waitUntil(counted, 5000)).toBe(true);
    } finally {
      await broker.stop();
    }
  });
});

describe('bifro plugin install runs nothing of the package until the broker starts', () => {
  const NAME = '@acme/bifro-scripted-demo';

  /** A plugin whose postinstall script writes `script-ran` and whose top-level code writes `module-loaded` (both in `markers`). */
  function writeScriptedPlugin(dir: string, markers: string): void {
    mkdirSync(dir, { recursive: true });
    // Single quotes only: the script runs inside a double-quoted `node -e "..."`.
    const write = (file: string): string => `require('fs').writeFileSync('${path.join(markers, file)}', 'x')`;
    writeFileSync(
      path.join(dir, 'package.json'),
      JSON.stringify({
        name: NAME,
        version: '1.0.0',
        main: 'index.js',
        bifro: { kinds: ['events'], spi: SPI_RANGE },
        peerDependencies: { '@bifro/spi': SPI_RANGE },
        scripts: { postinstall: `node -e "${write('script-ran')}"` },
      }),
    );
    writeFileSync(
      path.join(dir, 'index.js'),
      `${write('module-loaded')};\nmodule.exports = { events: () => ({ wants: () => true, report() {} }) };\n`,
    );
  }

  it('no install script without --allow-scripts; with it, the script runs; the module runs only when the broker loads it', async () => {
    const root = path.join(work, 'scripted');
    const markers = path.join(root, 'markers');
    const pluginsDir = path.join(root, 'plugins');
    mkdirSync(markers, { recursive: true });
    writeScriptedPlugin(path.join(root, 'src'), markers);
    await registry.publish(path.join(root, 'src'));
    const install = (...extra: string[]): Promise<string> =>
      sh(process.execPath, [BIFRO, 'plugin', 'install', NAME, '--plugins-dir', pluginsDir, '--registry', registry.url, ...extra], root);

    const plain = await install();
    expect(plain).toContain('1 install script declared, NOT run (--allow-scripts runs them):');
    expect(plain).toMatch(/integrity: +sha512-/);
    expect(readdirSync(markers)).toEqual([]);

    const allowed = await install('--allow-scripts', '--force');
    expect(allowed).toContain('warning: --allow-scripts: npm runs the install scripts');
    expect(allowed).toContain('1 install script declared, run (--allow-scripts):');
    expect(readdirSync(markers)).toEqual(['script-ran']);

    const config = path.join(root, 'bifro.yml');
    writeFileSync(
      config,
      [
        `dataDir: ${JSON.stringify(path.join(root, 'data'))}`,
        `pluginsDir: ${JSON.stringify(pluginsDir)}`,
        'listeners:',
        '  - { name: tcp, type: tcp, host: 127.0.0.1, port: 0 }',
        'plugins:',
        '  events:',
        `    - use: '${NAME}'`,
        '',
      ].join('\n'),
    );
    const started = await startBrokerProcess(config);
    try {
      expect(readdirSync(markers).sort()).toEqual(['module-loaded', 'script-ran']);
    } finally {
      await started.stop();
    }
  });
});

/** The CONNACK code of a connect attempt (MQTT.js reports a refusal as an error with the code). */
function codeOf(r: ConnectResult): number | undefined {
  return r.connack?.reasonCode ?? r.connack?.returnCode ?? r.error?.code;
}
