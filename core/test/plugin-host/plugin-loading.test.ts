import 'reflect-metadata';
import { promises as fs } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { container as rootContainer } from 'tsyringe';
import { SPI_VERSION } from '@bifro/spi';
import { errorSpec } from '../../src/cli/error-catalogue';
import { BifroError, pluginErrorSpec } from '../../src/base/errors';
import { loadPlugins, PLUGIN_TOKENS, registerPluginHost, type AuthManager, type PluginHost } from '../../src/plugin-host';
import { loadPluginHost } from '../../src/plugin-host/plugin-host';
import { PLUGIN_ERRORS } from '../../src/plugin-host/plugin-errors';
import {
  authRequest,
  capturingLogger,
  client,
  configWith,
  fixture,
  FIXTURES_DIR,
  FixedUsage,
  rejectionOf,
  WARN,
} from './plugin-host-fixtures';

const usage = new FixedUsage();
const hosts: PluginHost[] = [];

async function load(...args: Parameters<typeof configWith>): Promise<PluginHost> {
  const host = await loadPlugins(configWith(...args), capturingLogger().logger, usage);
  hosts.push(host);
  return host;
}

afterEach(async () => {
  await Promise.all(hosts.splice(0).map((host) => host.close()));
});

describe('a broken required plugin rejects loadPlugins with a coded error', () => {
  const cases: ReadonlyArray<{
    folder: string;
    kind: 'auth' | 'acl' | 'balancer';
    code: keyof typeof PLUGIN_ERRORS;
    phase: string;
    says: string[];
  }> = [
    { folder: 'no-manifest', kind: 'auth', code: 'BIFRO_PLUGIN_MANIFEST_MISSING', phase: 'manifest', says: ['no "bifro" field'] },
    { folder: 'manifest-invalid', kind: 'auth', code: 'BIFRO_PLUGIN_MANIFEST_INVALID', phase: 'manifest', says: ['"mqtt-bridge"'] },
    {
      folder: 'broken-import',
      kind: 'auth',
      code: 'BIFRO_PLUGIN_IMPORT_FAILED',
      phase: 'import',
      says: ['@fixtures/package-that-is-not-installed'],
    },
    { folder: 'wrong-shape', kind: 'auth', code: 'BIFRO_PLUGIN_SHAPE_INVALID', phase: 'shape', says: ['exports a string'] },
    { folder: 'missing-factory', kind: 'acl', code: 'BIFRO_PLUGIN_SHAPE_INVALID', phase: 'shape', says: ['no factory function for acl'] },
    {
      folder: 'valid-auth',
      kind: 'acl',
      code: 'BIFRO_PLUGIN_KIND_NOT_PROVIDED',
      phase: 'manifest',
      says: ['as acl', 'declares only auth'],
    },
    {
      folder: 'factory-throws',
      kind: 'balancer',
      code: 'BIFRO_PLUGIN_INSTANTIATE_FAILED',
      phase: 'instantiate',
      says: ['option "nodes" is required'],
    },
    {
      folder: 'bad-instance',
      kind: 'acl',
      code: 'BIFRO_PLUGIN_INSTANCE_INVALID',
      phase: 'instanceShape',
      says: ['acl.checkPermission is not a function'],
    },
    { folder: 'init-throws', kind: 'auth', code: 'BIFRO_PLUGIN_INIT_FAILED', phase: 'init', says: ['cannot open the user database'] },
    { folder: 'init-hangs', kind: 'auth', code: 'BIFRO_PLUGIN_INIT_TIMEOUT', phase: 'init', says: ['200 ms', 'plugins.initTimeoutMs'] },
  ];

  it.each(cases)('$folder as $kind → $code', async ({ folder, kind, code, phase, says }) => {
    const ref = fixture(folder);
    const plugins = kind === 'balancer' ? { balancer: ref } : { [kind]: [ref] };
    const err = await rejectionOf(() => load(plugins));
    expect(err).toBeInstanceOf(BifroError);
    expect(err.code).toBe(code);
    expect(err.details).toMatchObject({ phase, plugin: `@fixtures/${folder}` });
    expect(err.message).toContain(`@fixtures/${folder}`);
    expect(err.message).toContain(path.join(FIXTURES_DIR, folder));
    for (const text of says) expect(err.message).toContain(text);
  });

  it('spi-mismatch names the plugin, its folder, its range and our SPI version', async () => {
    const err = await rejectionOf(() => load({ auth: [fixture('spi-mismatch')] }));
    expect(err.code).toBe('BIFRO_PLUGIN_SPI_MISMATCH');
    expect(err.details).toMatchObject({ phase: 'version', spiRange: '^2.0.0', spiVersion: SPI_VERSION });
    expect(err.message).toContain('@fixtures/spi-mismatch');
    expect(err.message).toContain(path.join(FIXTURES_DIR, 'spi-mismatch'));
    expect(err.message).toContain('^2.0.0');
    expect(err.message).toContain(SPI_VERSION);
  });

  it('a plugin that is nowhere → BIFRO_PLUGIN_NOT_FOUND naming it', async () => {
    const err = await rejectionOf(() => load({ acl: [fixture('not-there')] }));
    expect(err.code).toBe('BIFRO_PLUGIN_NOT_FOUND');
    expect(err.details).toMatchObject({ phase: 'resolve' });
    expect(err.message).toContain('@fixtures/not-there');
    expect(err.message).toContain(FIXTURES_DIR);
  });

  it('a plugins.packages entry that is not installed → BIFRO_PLUGIN_NOT_FOUND when used', async () => {
    const err = await rejectionOf(() =>
      load({ packages: ['@fixtures/not-installed'], acl: [{ use: '@fixtures/not-installed', required: true, options: {} }] }),
    );
    expect(err.code).toBe('BIFRO_PLUGIN_NOT_FOUND');
    expect(err.message).toContain('@fixtures/not-installed');
  });

  it('a folder without package.json named by the config → BIFRO_PLUGIN_MANIFEST_MISSING naming the folder', async () => {
    const err = await rejectionOf(() => load({ auth: [{ use: 'bare-folder', required: true, options: {} }] }));
    expect(err.code).toBe('BIFRO_PLUGIN_MANIFEST_MISSING');
    expect(err.message).toContain(path.join(FIXTURES_DIR, 'bare-folder'));
  });

  it('init timeout is enforced quickly, and init failure closes the instance', async () => {
    const started = Date.now();
    await expect(load({ auth: [fixture('init-hangs')] })).rejects.toMatchObject({ code: 'BIFRO_PLUGIN_INIT_TIMEOUT' });
    expect(Date.now() - started).toBeLessThan(2000);
    const closed: string[] = [];
    await expect(load({ auth: [fixture('init-throws', { closed })] })).rejects.toMatchObject({ code: 'BIFRO_PLUGIN_INIT_FAILED' });
    expect(closed).toEqual(['closed']);
  });

  it('closes the plugins already loaded before rejecting', async () => {
    const closed: string[] = [];
    const err = await rejectionOf(() => load({ storage: fixture('valid-storage', { closed }), auth: [fixture('init-throws')] }));
    expect(err.code).toBe('BIFRO_PLUGIN_INIT_FAILED');
    expect(closed).toEqual(['closed']);
  });

  it('two folders with the same package name → BIFRO_PLUGIN_DUPLICATE naming both', async () => {
    const dir = await fs.mkdtemp(path.join(os.tmpdir(), 'bifro-dup-'));
    try {
      for (const copy of ['one', 'two']) {
        await fs.cp(path.join(FIXTURES_DIR, 'valid-acl'), path.join(dir, copy), { recursive: true });
      }
      const err = await rejectionOf(() => load({ acl: [fixture('valid-acl')] }, { pluginsDir: dir }));
      expect(err.code).toBe('BIFRO_PLUGIN_DUPLICATE');
      expect(err.message).toContain(path.join(dir, 'one'));
      expect(err.message).toContain(path.join(dir, 'two'));
      expect(err.message).toContain('@fixtures/valid-acl');
    } finally {
      await fs.rm(dir, { recursive: true, force: true });
    }
  });
});

describe('optional plugins', () => {
  it('a broken optional plugin is skipped with a warning carrying its code and message', async () => {
    const { logger, lines } = capturingLogger();
    const host = await loadPlugins(
      configWith({ auth: [fixture('spi-mismatch', {}, false), fixture('broken-import', {}, false), fixture('valid-auth')] }),
      logger,
      usage,
    );
    hosts.push(host);
    const warnings = lines.filter((line) => line.level === WARN && String(line.msg).startsWith('optional plugin'));
    expect(warnings.map((w) => w.code)).toEqual(['BIFRO_PLUGIN_SPI_MISMATCH', 'BIFRO_PLUGIN_IMPORT_FAILED']);
    expect(warnings[0]!.msg).toContain('@fixtures/spi-mismatch');
    expect(warnings[0]!.msg).toContain('^2.0.0');
    expect(host.plugins.map((p) => p.name)).toContain('@fixtures/valid-auth');
    expect(host.plugins.map((p) => p.name)).not.toContain('@fixtures/spi-mismatch');
    expect(host.auth.authenticate(authRequest({ username: 'u', password: Buffer.from('secret') }))).toMatchObject({
      type: 'ok',
      tenantId: 't1',
    });
  });

  it('a skipped optional balancer falls back to the built-in', async () => {
    const host = await load({ balancer: fixture('factory-throws', {}, false) });
    expect(host.plugins.find((p) => p.kinds.includes('balancer'))).toMatchObject({
      name: '@bifro/core:no-redirect-balancer',
      source: 'builtin',
    });
    expect(host.balancer.needRedirect(client())).toEqual({ type: 'none' });
  });

  it('when every configured auth plugin is skipped, clients are refused (no silent allow-all)', async () => {
    const { logger, lines } = capturingLogger();
    const host = await loadPlugins(configWith({ auth: [fixture('init-throws', {}, false)] }), logger, usage);
    hosts.push(host);
    expect(host.plugins.some((p) => p.name === '@bifro/core:dev-allow-all-auth')).toBe(false);
    expect(host.auth.authenticate(authRequest())).toMatchObject({ type: 'reject', reason: 'notAuthorized' });
    expect(lines.some((line) => line.level === 50 && String(line.msg).includes('no auth plugin could be loaded'))).toBe(true);
  });
});

describe('first-party defaults', () => {
  it('with no plugin configured: dev-only allow-all auth (loud warning), allow-all acl, no redirect, registry settings, unlimited throttler', async () => {
    const { logger, lines } = capturingLogger();
    const host = await loadPlugins(configWith({}), logger, usage);
    hosts.push(host);
    const warning = lines.find((line) => line.level === WARN && line.plugin === '@bifro/core:dev-allow-all-auth');
    expect(warning?.msg).toContain('DEV-ONLY');
    expect(warning?.msg).toContain('EVERY client is accepted');
    expect(lines.some((line) => line.level === 30 && line.plugin === '@bifro/core:allow-all-acl')).toBe(true);

    expect(host.auth.authenticate(authRequest({ username: 'acme/alice' }))).toEqual({ type: 'ok', tenantId: 'acme', userId: 'alice' });
    expect(host.auth.authenticate(authRequest({ username: 'bob' }))).toEqual({ type: 'ok', tenantId: 'default', userId: 'bob' });
    expect(host.auth.authenticate(authRequest({ clientId: 'dev-7' }))).toEqual({ type: 'ok', tenantId: 'default', userId: 'dev-7' });
    expect(host.acl.check(client(), { type: 'publish', topic: 'a', qos: 0, retain: false })).toBe(true);
    expect(host.balancer.needRedirect(client())).toEqual({ type: 'none' });
    expect(host.settings.get('acme', 'MaxTopicLevels')).toBe(128);
    expect(host.throttler.hasResource('acme', 'TotalConnections')).toBe(true);
    expect(host.events.wants('clientConnected')).toBe(false);

    const builtins = host.plugins.filter((p) => p.source === 'builtin').map((p) => p.name);
    expect(builtins.sort()).toEqual([
      '@bifro/core:allow-all-acl',
      '@bifro/core:dev-allow-all-auth',
      '@bifro/core:no-redirect-balancer',
      '@bifro/core:registry-default-settings',
      '@bifro/core:unlimited-throttler',
    ]);
  });

  it('the dev-only warning is repeated at every start', async () => {
    for (let start = 0; start < 2; start++) {
      const { logger, lines } = capturingLogger();
      hosts.push(await loadPlugins(configWith({}), logger, usage));
      expect(lines.filter((line) => line.level === WARN && line.plugin === '@bifro/core:dev-allow-all-auth')).toHaveLength(1);
    }
  });

  it('without plugins.storage, uses the package @bifro/plugin-storage-level (found here in the plugins directory)', async () => {
    const dir = await fs.mkdtemp(path.join(os.tmpdir(), 'bifro-default-storage-'));
    try {
      const copy = path.join(dir, 'storage-memory');
      await fs.cp(path.join(FIXTURES_DIR, 'valid-storage'), copy, { recursive: true });
      const pkgFile = path.join(copy, 'package.json');
      const pkg = JSON.parse(await fs.readFile(pkgFile, 'utf8')) as Record<string, unknown>;
      await fs.writeFile(pkgFile, JSON.stringify({ ...pkg, name: '@bifro/plugin-storage-level' }));
      const host = await load({ storage: undefined }, { pluginsDir: dir });
      expect(host.plugins.find((p) => p.kinds.includes('storage'))).toMatchObject({
        name: '@bifro/plugin-storage-level',
        source: 'plugins-dir',
        dir: copy,
      });
      await host.storage.retained.put('t', { topic: 'a/b', payload: Buffer.from('x'), qos: 0, retain: true, publishedAt: 0 });
      expect(await host.storage.retained.match('t', 'a/+', 10, 1)).toHaveLength(1);
    } finally {
      await fs.rm(dir, { recursive: true, force: true });
    }
  });

  it('without plugins.storage, resolves the installed @bifro/plugin-storage-level package from the broker (needs its dist: npm test builds first)', async () => {
    const dataDir = await fs.mkdtemp(path.join(os.tmpdir(), 'bifro-default-level-'));
    const host = await load({ storage: undefined }, { dataDir });
    try {
      expect(host.plugins.find((p) => p.kinds.includes('storage'))).toMatchObject({
        name: '@bifro/plugin-storage-level',
        source: 'package',
      });
      await host.storage.sessions.put({
        tenantId: 't',
        clientId: 'c',
        userId: 'u',
        protocolVersion: 5,
        expirySeconds: 60,
        createdAt: 1,
        subscriptions: [],
      });
      expect(await host.storage.sessions.get('t', 'c')).toMatchObject({ userId: 'u' });
    } finally {
      await host.close();
      await fs.rm(dataDir, { recursive: true, force: true });
    }
  });

  it('without plugins.storage and without the default package → BIFRO_PLUGIN_STORAGE_MISSING', async () => {
    const config = configWith({ storage: undefined });
    const err = await rejectionOf(() =>
      loadPluginHost(config, capturingLogger().logger, usage, { defaultStoragePackage: '@fixtures/storage-not-installed' }),
    );
    expect(err.code).toBe('BIFRO_PLUGIN_STORAGE_MISSING');
    expect(err.message).toContain('@fixtures/storage-not-installed');
    expect(err.message).toContain('plugins.storage');
  });
});

describe('the loaded host', () => {
  it('lists one entry per plugin, with the kinds it serves, its version, folder, range and stats', async () => {
    const host = await load({ auth: [fixture('multi-kind')], acl: [fixture('multi-kind')] });
    const multi = host.plugins.find((p) => p.name === '@fixtures/multi-kind');
    expect(multi).toMatchObject({
      version: '1.0.0',
      dir: path.join(FIXTURES_DIR, 'multi-kind'),
      kinds: ['auth', 'acl'],
      spiRange: '^1.0.0',
      source: 'plugins-dir',
    });
    const outcome = host.auth.authenticate(authRequest());
    expect(outcome).toMatchObject({ type: 'ok', tenantId: 'multi' });
    expect(host.acl.check(client({ tenantId: 'multi' }), { type: 'connect' })).toBe(true);
    expect(multi!.stats.auth).toMatchObject({ calls: 1, failures: 0, timeouts: 0 });
    expect(multi!.stats.acl).toMatchObject({ calls: 1 });
  });

  it('registers every manager in a tsyringe container', async () => {
    const host = await load({});
    const container = rootContainer.createChildContainer();
    registerPluginHost(container, host);
    expect(container.resolve<AuthManager>(PLUGIN_TOKENS.Auth)).toBe(host.auth);
    expect(container.resolve(PLUGIN_TOKENS.Acl)).toBe(host.acl);
    expect(container.resolve(PLUGIN_TOKENS.Balancer)).toBe(host.balancer);
    expect(container.resolve(PLUGIN_TOKENS.Events)).toBe(host.events);
    expect(container.resolve(PLUGIN_TOKENS.Settings)).toBe(host.settings);
    expect(container.resolve(PLUGIN_TOKENS.Throttler)).toBe(host.throttler);
    expect(container.resolve(PLUGIN_TOKENS.Storage)).toBe(host.storage);
  });

  it('close() closes the plugins once, however often it is called', async () => {
    const closed: string[] = [];
    const host = await loadPlugins(configWith({ storage: fixture('valid-storage', { closed }) }), capturingLogger().logger, usage);
    await Promise.all([host.close(), host.close()]);
    await host.close();
    expect(closed).toEqual(['closed']);
  });
});

describe('error codes a plugin declares (PluginDefinition.errors)', () => {
  let dir: string;

  /** A plugins directory with the valid-storage fixture and an auth plugin `folder` exporting `errors` (JavaScript source). */
  async function authDeclaring(folder: string, errors: string): Promise<void> {
    await fs.mkdir(path.join(dir, folder));
    await fs.writeFile(
      path.join(dir, folder, 'package.json'),
      JSON.stringify({ name: `@fixtures/${folder}`, version: '1.0.0', main: 'index.js', bifro: { kinds: ['auth'], spi: '^1.1.0' } }),
    );
    await fs.writeFile(
      path.join(dir, folder, 'index.js'),
      `module.exports = { auth: () => ({ authenticate: () => ({ type: 'defer' }) }), errors: ${errors} };\n`,
    );
  }

  beforeEach(async () => {
    dir = await fs.mkdtemp(path.join(os.tmpdir(), 'bifro-errors-'));
    await fs.cp(path.join(FIXTURES_DIR, 'valid-storage'), path.join(dir, 'valid-storage'), { recursive: true });
  });
  afterEach(async () => {
    await fs.rm(dir, { recursive: true, force: true });
  });

  it('are known once the host loaded the plugin: errorSpec gives their remedy like a core code', async () => {
    await authDeclaring('declares-errors', `{ ACME_TEST_BIND_FAILED: { summary: 'The bind was refused.', remedy: 'Check bindDn.' } }`);
    expect(errorSpec('ACME_TEST_BIND_FAILED')).toBeUndefined();
    await load({ auth: [fixture('declares-errors')] }, { pluginsDir: dir });
    expect(errorSpec('ACME_TEST_BIND_FAILED')).toEqual({ summary: 'The bind was refused.', remedy: 'Check bindDn.' });
    expect(pluginErrorSpec('ACME_TEST_BIND_FAILED')?.plugin).toBe('@fixtures/declares-errors');
    expect(errorSpec('BIFRO_PLUGIN_NOT_FOUND')).toBe(PLUGIN_ERRORS.BIFRO_PLUGIN_NOT_FOUND); // core codes unchanged
  });

  it.each([
    ['a list', `[]`, 'is a list'],
    ['a lower-case code', `{ acme_bad: { summary: 's', remedy: 'r' } }`, 'the code "acme_bad"'],
    ['an entry without remedy', `{ ACME_NO_REMEDY: { summary: 's' } }`, 'gives ACME_NO_REMEDY no remedy'],
    ['an entry that is a string', `{ ACME_STRING: 'oops' }`, 'gives ACME_STRING a string'],
  ])('%s → BIFRO_PLUGIN_SHAPE_INVALID in phase shape, naming the problem', async (_, errors, says) => {
    await authDeclaring('bad-errors', errors);
    const err = await rejectionOf(() => load({ auth: [fixture('bad-errors')] }, { pluginsDir: dir }));
    expect(err.code).toBe('BIFRO_PLUGIN_SHAPE_INVALID');
    expect(err.details).toMatchObject({ phase: 'shape', plugin: '@fixtures/bad-errors', member: 'errors' });
    expect(err.message).toContain(says);
  });

  it('a code another plugin declared first keeps the first entry, with a warning naming the code', async () => {
    await authDeclaring('first-claim', `{ ACME_SHARED_CODE: { summary: 'first', remedy: 'first remedy' } }`);
    await authDeclaring('second-claim', `{ ACME_SHARED_CODE: { summary: 'second', remedy: 'second remedy' } }`);
    const { logger, lines } = capturingLogger();
    const config = configWith({ auth: [fixture('first-claim'), fixture('second-claim')] }, { pluginsDir: dir });
    hosts.push(await loadPlugins(config, logger, usage));
    expect(errorSpec('ACME_SHARED_CODE')?.summary).toBe('first');
    const warning = lines.find((l) => l.level === WARN && l.msg.includes('ACME_SHARED_CODE'));
    expect(warning).toMatchObject({ plugin: '@fixtures/second-claim', codes: ['ACME_SHARED_CODE'] });
  });
});
