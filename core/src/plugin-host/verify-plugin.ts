import { promises as fs } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import pino from 'pino';
import { SPI_VERSION, type PluginDefinition, type PluginKind, type PluginManifest, type TenantUsageReader } from '@bifro/spi';
import { BifroError, describeError, registerPluginErrors } from '../base/errors';
import { toPluginLogger, type Logger } from '../base/logger';
import { phaseOf, pluginError, type PluginPhase } from './plugin-errors';
import { BROKER_DIR, discoverPlugins, findPlugin, readPluginPackage, type PluginPackage } from './plugin-discovery';
import { closeInstance, createInstance } from './plugin-instance';
import { checkSpiVersion, readManifest } from './plugin-manifest';
import { definitionOf, importPlugin } from './plugin-module';

/** The phases `verifyPlugin` reports: the load phases, then `close`. */
export type VerifyPhase = PluginPhase | 'close';

/** The phases run once per plugin; the others run once per declared kind. */
const PLUGIN_LEVEL: readonly PluginPhase[] = ['resolve', 'manifest', 'version', 'import', 'shape'];
const KIND_LEVEL: readonly VerifyPhase[] = ['instantiate', 'instanceShape', 'init', 'close'];

export interface VerifyStep {
  readonly phase: VerifyPhase;
  /** For the per-kind phases (instantiate, instanceShape, init, close). */
  readonly kind?: PluginKind;
  /** `skipped`: not run because an earlier phase failed. */
  readonly status: 'ok' | 'failed' | 'skipped';
  /** The error code of a failed phase. */
  readonly code?: string;
  readonly message?: string;
}

/** What `bifro plugin verify` prints. */
export interface VerifyReport {
  /** The folder or package name as given. */
  readonly target: string;
  /** true when every phase passed. */
  readonly ok: boolean;
  readonly name?: string;
  readonly version?: string;
  readonly dir?: string;
  /** Declared kinds (empty when the manifest could not be read). */
  readonly kinds: readonly PluginKind[];
  /** The plugin's `bifro.spi` range. */
  readonly spiRange?: string;
  /** The SPI version of this broker. */
  readonly spiVersion: string;
  /** Every phase in order, per kind for the per-kind phases. */
  readonly steps: readonly VerifyStep[];
}

export interface VerifyOptions {
  readonly pluginsDir: string;
  readonly cwd: string;
  /** Limit for each factory, init and close; default 5000 ms. */
  readonly initTimeoutMs?: number;
  /** Receives the plugin's own log lines; silent by default. */
  readonly logger?: Logger;
}

const DEFAULT_VERIFY_TIMEOUT_MS = 5000;

const NO_USAGE: TenantUsageReader = { get: () => 0 };

/**
 * Runs every load phase on one plugin, as the broker would, and reports each: resolve, manifest,
 * version, import, shape, then for every declared kind instantiate (with empty options),
 * instanceShape, init and close. `target` is a folder (relative to `cwd`, or a folder name in the
 * plugins directory) or a package name.
 */
export async function verifyPlugin(target: string, opts: VerifyOptions): Promise<VerifyReport> {
  const steps: VerifyStep[] = [];
  const timeoutMs = opts.initTimeoutMs ?? DEFAULT_VERIFY_TIMEOUT_MS;
  const logger = opts.logger ?? pino({ level: 'silent' });
  let pkg: PluginPackage | undefined;
  let manifest: PluginManifest | undefined;

  const report = (): VerifyReport => ({
    target,
    ok: steps.every((step) => step.status === 'ok'),
    ...(pkg === undefined ? {} : { name: pkg.name, version: pkg.version, dir: pkg.dir }),
    kinds: manifest?.kinds ?? [],
    ...(manifest === undefined ? {} : { spiRange: manifest.spi }),
    spiVersion: SPI_VERSION,
    steps,
  });
  const failPluginLevel = (err: unknown): VerifyReport => {
    const phase = phaseOf(err);
    // Phases already recorded passed; the failed one is the one the error names (or the next one).
    const failedIndex = Math.max(phase === undefined ? -1 : PLUGIN_LEVEL.indexOf(phase), steps.length);
    for (let i = steps.length; i < PLUGIN_LEVEL.length; i++) {
      const step = PLUGIN_LEVEL[i]!;
      if (i < failedIndex) steps.push({ phase: step, status: 'ok' });
      else if (i === failedIndex) steps.push(failedStep(step, err));
      else steps.push({ phase: step, status: 'skipped' });
    }
    for (const kind of manifest?.kinds ?? [undefined]) {
      for (const step of KIND_LEVEL) steps.push({ phase: step, ...(kind === undefined ? {} : { kind }), status: 'skipped' });
    }
    return report();
  };

  let definition: PluginDefinition;
  try {
    pkg = await resolveTarget(target, opts);
    steps.push({ phase: 'resolve', status: 'ok' });
    manifest = readManifest(pkg);
    steps.push({ phase: 'manifest', status: 'ok' });
    checkSpiVersion(pkg, manifest);
    steps.push({ phase: 'version', status: 'ok' });
    definition = definitionOf(pkg, manifest, await importPlugin(pkg, manifest));
    if (definition.errors !== undefined) registerPluginErrors(pkg.name, definition.errors);
    steps.push({ phase: 'import', status: 'ok' }, { phase: 'shape', status: 'ok' });
  } catch (err) {
    return failPluginLevel(err);
  }

  const dataDir = await fs.mkdtemp(path.join(os.tmpdir(), 'bifro-verify-'));
  try {
    for (const kind of manifest.kinds) {
      steps.push(...(await verifyKind(pkg, kind, definition, { dataDir, cwd: opts.cwd, timeoutMs, logger })));
    }
  } finally {
    await fs.rm(dataDir, { recursive: true, force: true });
  }
  return report();
}

async function verifyKind(
  pkg: PluginPackage,
  kind: PluginKind,
  definition: PluginDefinition,
  env: { dataDir: string; cwd: string; timeoutMs: number; logger: Logger },
): Promise<VerifyStep[]> {
  const context = {
    name: pkg.name,
    version: pkg.version,
    dir: pkg.dir,
    options: {},
    logger: toPluginLogger(env.logger.child({ plugin: pkg.name, kind })),
    dataDir: env.dataDir,
    configDir: env.cwd,
    spiVersion: SPI_VERSION,
    tenantUsage: NO_USAGE,
  };
  let instance: { close?(): Promise<void> | void };
  try {
    instance = await createInstance(pkg, kind, definition, context, env.timeoutMs);
  } catch (err) {
    const failed = phaseOf(err) ?? 'instantiate';
    return KIND_LEVEL.map((phase): VerifyStep => {
      if (phase === failed) return { ...failedStep(phase, err), kind };
      const before = phase !== 'close' && KIND_LEVEL.indexOf(phase) < KIND_LEVEL.indexOf(failed);
      return { phase, kind, status: before ? 'ok' : 'skipped' };
    });
  }
  const steps: VerifyStep[] = [
    { phase: 'instantiate', kind, status: 'ok' },
    { phase: 'instanceShape', kind, status: 'ok' },
    { phase: 'init', kind, status: 'ok' },
  ];
  const problem = await closeInstance(instance, env.timeoutMs);
  steps.push(
    problem === undefined
      ? { phase: 'close', kind, status: 'ok' }
      : { phase: 'close', kind, status: 'failed', message: `plugin ${pkg.name}: ${kind} ${problem}` },
  );
  return steps;
}

/** A folder (relative to cwd, or by folder name in the plugins directory) or a package name. */
async function resolveTarget(target: string, opts: VerifyOptions): Promise<PluginPackage> {
  for (const dir of [path.resolve(opts.cwd, target), path.resolve(opts.pluginsDir, target)]) {
    const stat = await fs.stat(dir).catch(() => undefined);
    if (!stat?.isDirectory()) continue;
    const pkg = await readPluginPackage(dir, dir.startsWith(path.resolve(opts.pluginsDir) + path.sep) ? 'plugins-dir' : 'package', target);
    if (pkg !== undefined) return pkg;
    throw pluginError('BIFRO_PLUGIN_MANIFEST_MISSING', `${dir} has no package.json (a plugin needs one with a "bifro" field)`, {
      phase: 'manifest',
      plugin: target,
      dir,
    });
  }
  const discovery = await discoverPlugins({ pluginsDir: opts.pluginsDir, packages: [], resolvePaths: [opts.cwd, BROKER_DIR] });
  return findPlugin(discovery, target, opts.pluginsDir);
}

function failedStep(phase: VerifyPhase, err: unknown): VerifyStep {
  if (err instanceof BifroError) return { phase, status: 'failed', code: err.code, message: err.message };
  return { phase, status: 'failed', message: describeError(err) };
}
