import { promises as fs } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { SPI_VERSION } from '@bifro/spi';
import { listPlugins, verifyPlugin, type VerifyReport, type VerifyStep } from '../../src/plugin-host';
import { configWith, fixture, FIXTURES_DIR } from './plugin-host-fixtures';

const opts = { pluginsDir: FIXTURES_DIR, cwd: path.resolve(FIXTURES_DIR, '..'), initTimeoutMs: 200 };
/** A valid plugin's calls get the default-like bound: 200 ms made the first (cold) one fail on a loaded CI machine. */
const validOpts = { ...opts, initTimeoutMs: 2000 };

const statusOf = (report: VerifyReport): string[] =>
  report.steps.map((s: VerifyStep) => `${s.phase}${s.kind === undefined ? '' : `:${s.kind}`}=${s.status}`);
const failed = (report: VerifyReport): VerifyStep[] => report.steps.filter((s) => s.status === 'failed');

describe('verifyPlugin', () => {
  it.each([
    'valid-auth',
    'valid-acl',
    'valid-balancer',
    'valid-events',
    'valid-settings',
    'valid-throttler',
    'valid-storage',
    'auth-defer-first',
    'auth-accept-second',
    'acl-defers',
    'acl-errors',
    'multi-kind',
  ])('%s passes every phase', async (folder) => {
    const report = await verifyPlugin(folder, validOpts);
    expect(failed(report)).toEqual([]);
    expect(report).toMatchObject({
      ok: true,
      name: `@fixtures/${folder}`,
      version: '1.0.0',
      spiRange: '^1.0.0',
      spiVersion: SPI_VERSION,
      dir: path.join(FIXTURES_DIR, folder),
    });
    const perKind = report.kinds.flatMap((kind) =>
      ['instantiate', 'instanceShape', 'init', 'close', 'conformance'].map((phase) => `${phase}:${kind}=ok`),
    );
    expect(statusOf(report)).toEqual(['resolve=ok', 'manifest=ok', 'version=ok', 'import=ok', 'shape=ok', ...perKind]);
  });

  const failures: ReadonlyArray<[folder: string, phase: string, code: string]> = [
    ['no-manifest', 'manifest', 'BIFRO_PLUGIN_MANIFEST_MISSING'],
    ['bare-folder', 'manifest', 'BIFRO_PLUGIN_MANIFEST_MISSING'],
    ['manifest-invalid', 'manifest', 'BIFRO_PLUGIN_MANIFEST_INVALID'],
    ['spi-mismatch', 'version', 'BIFRO_PLUGIN_SPI_MISMATCH'],
    ['broken-import', 'import', 'BIFRO_PLUGIN_IMPORT_FAILED'],
    ['wrong-shape', 'shape', 'BIFRO_PLUGIN_SHAPE_INVALID'],
    ['missing-factory', 'shape', 'BIFRO_PLUGIN_SHAPE_INVALID'],
    ['factory-throws', 'instantiate', 'BIFRO_PLUGIN_INSTANTIATE_FAILED'],
    ['bad-instance', 'instanceShape', 'BIFRO_PLUGIN_INSTANCE_INVALID'],
    ['init-throws', 'init', 'BIFRO_PLUGIN_INIT_FAILED'],
    ['init-hangs', 'init', 'BIFRO_PLUGIN_INIT_TIMEOUT'],
    // Loads, but its report() throws: the events conformance kit says which cases failed.
    ['events-throws', 'conformance', 'BIFRO_PLUGIN_CONFORMANCE_FAILED'],
  ];

  it.each(failures)('%s fails at %s with %s; earlier phases pass, later ones are skipped', async (folder, phase, code) => {
    const report = await verifyPlugin(folder, opts);
    expect(report.ok).toBe(false);
    expect(failed(report)).toEqual([expect.objectContaining({ phase, code, message: expect.stringContaining(folder) })]);
    const index = report.steps.findIndex((s) => s.status === 'failed');
    expect(report.steps.slice(0, index).every((s) => s.status === 'ok')).toBe(true);
    expect(report.steps.slice(index + 1).every((s) => s.status === 'skipped')).toBe(true);
    const phases = report.steps.map((s) => s.phase);
    expect(phases.slice(0, 5)).toEqual(['resolve', 'manifest', 'version', 'import', 'shape']);
    expect(phases.slice(5, 10)).toEqual(['instantiate', 'instanceShape', 'init', 'close', 'conformance']);
  });

  it('names each failed conformance case with the first line of what it threw, and counts those that passed', async () => {
    const report = await verifyPlugin('events-throws', opts);
    const step = failed(report)[0]!;
    expect(step.cases!.passed).toBeGreaterThan(0);
    expect(step.cases!.failed.length).toBeGreaterThan(0);
    for (const c of step.cases!.failed) {
      expect(c.name).toMatch(/^events: /);
      expect(c.message).toContain('collector is full');
      expect(c.message).not.toContain('\n');
    }
    expect(step.message).toContain(
      `${step.cases!.failed.length} of ${step.cases!.failed.length + step.cases!.passed} events conformance cases failed`,
    );
  });

  it('instantiates with the options it is given for a kind (from the config, by the CLI)', async () => {
    const withOptions = await verifyPlugin('valid-auth', {
      ...opts,
      optionsFor: (kind) => (kind === 'auth' ? { tenantId: 'from-config' } : undefined),
    });
    expect(withOptions.ok).toBe(true);
    const throwing = await verifyPlugin('factory-throws', { ...opts, optionsFor: () => ({ anything: true }) });
    expect(failed(throwing)[0]!.phase).toBe('instantiate');
  });

  it('reports the plugin identity even when the version check fails', async () => {
    const report = await verifyPlugin('spi-mismatch', opts);
    expect(report).toMatchObject({
      name: '@fixtures/spi-mismatch',
      version: '1.0.0',
      kinds: ['auth'],
      spiRange: '^2.0.0',
      spiVersion: SPI_VERSION,
    });
    expect(failed(report)[0]!.message).toContain('^2.0.0');
    expect(failed(report)[0]!.message).toContain(SPI_VERSION);
  });

  it('accepts a folder path relative to cwd, an absolute folder, and a package name from the plugins directory', async () => {
    expect((await verifyPlugin('plugins/valid-acl', opts)).ok).toBe(true);
    expect((await verifyPlugin(path.join(FIXTURES_DIR, 'valid-acl'), opts)).ok).toBe(true);
    expect((await verifyPlugin('@fixtures/valid-acl', opts)).ok).toBe(true);
  });

  it('an unknown target fails at resolve with BIFRO_PLUGIN_NOT_FOUND', async () => {
    const report = await verifyPlugin('@fixtures/nowhere', opts);
    expect(report.ok).toBe(false);
    expect(report.kinds).toEqual([]);
    expect(failed(report)).toEqual([expect.objectContaining({ phase: 'resolve', code: 'BIFRO_PLUGIN_NOT_FOUND' })]);
  });
});

describe('listPlugins', () => {
  it('lists the plugins of the plugins directory with their compatibility and what the config uses them for', async () => {
    const entries = await listPlugins(
      configWith({
        auth: [fixture('valid-auth'), fixture('multi-kind')],
        acl: [fixture('multi-kind')],
        storage: fixture('valid-storage'),
        events: [fixture('not-installed', {}, false)],
      }),
    );
    const byName = new Map(entries.map((e) => [e.name, e]));
    expect(byName.get('@fixtures/valid-auth')).toMatchObject({
      version: '1.0.0',
      kinds: ['auth'],
      spiRange: '^1.0.0',
      compatible: true,
      loadable: true,
      source: 'plugins-dir',
      usedFor: ['auth'],
      problem: undefined,
    });
    expect(byName.get('@fixtures/multi-kind')).toMatchObject({ usedFor: ['auth', 'acl'], compatible: true });
    expect(byName.get('@fixtures/valid-acl')).toMatchObject({ usedFor: [], compatible: true });
    expect(byName.get('@fixtures/spi-mismatch')).toMatchObject({
      compatible: false,
      spiRange: '^2.0.0',
      problem: { code: 'BIFRO_PLUGIN_SPI_MISMATCH' },
    });
    expect(byName.get('@fixtures/manifest-invalid')).toMatchObject({
      compatible: false,
      loadable: false,
      problem: { code: 'BIFRO_PLUGIN_MANIFEST_INVALID' },
    });
    // Compatible on paper, but the module cannot be loaded: said, with the reason.
    expect(byName.get('@fixtures/broken-import')).toMatchObject({
      compatible: true,
      loadable: false,
      problem: { code: 'BIFRO_PLUGIN_IMPORT_FAILED', message: expect.stringContaining('broken-import') },
    });
    expect(byName.get('@fixtures/wrong-shape')).toMatchObject({
      compatible: true,
      loadable: false,
      problem: { code: 'BIFRO_PLUGIN_SHAPE_INVALID' },
    });
    expect(byName.has('@fixtures/no-manifest')).toBe(false);
    expect(byName.get('@fixtures/not-installed')).toMatchObject({
      usedFor: ['events'],
      compatible: false,
      problem: { code: 'BIFRO_PLUGIN_NOT_FOUND' },
    });
    const builtins = entries.filter((e) => e.source === 'builtin');
    expect(builtins.map((e) => e.name).sort()).toEqual([
      '@bifro/core:no-redirect-balancer',
      '@bifro/core:registry-default-settings',
      '@bifro/core:unlimited-throttler',
    ]);
  });

  it('shows the dev-only auth and the default storage package when the config names none', async () => {
    const dir = await fs.mkdtemp(path.join(os.tmpdir(), 'bifro-list-'));
    try {
      const copy = path.join(dir, 'storage-memory');
      await fs.cp(path.join(FIXTURES_DIR, 'valid-storage'), copy, { recursive: true });
      const pkgFile = path.join(copy, 'package.json');
      const pkg = JSON.parse(await fs.readFile(pkgFile, 'utf8')) as Record<string, unknown>;
      await fs.writeFile(pkgFile, JSON.stringify({ ...pkg, name: '@bifro/plugin-storage-level' }));
      const entries = await listPlugins(configWith({ storage: undefined }, { pluginsDir: dir }));
      expect(entries.find((e) => e.name === '@bifro/core:dev-allow-all-auth')).toMatchObject({
        source: 'builtin',
        usedFor: ['auth'],
        compatible: true,
      });
      expect(entries.find((e) => e.name === '@bifro/plugin-storage-level')).toMatchObject({
        source: 'plugins-dir',
        dir: copy,
        usedFor: ['storage'],
        problem: undefined,
      });
    } finally {
      await fs.rm(dir, { recursive: true, force: true });
    }
  });
});
