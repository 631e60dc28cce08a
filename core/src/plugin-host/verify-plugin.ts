import { promises as fs } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import pino from 'pino';
import {
  SPI_VERSION,
  type PluginContext,
  type PluginDefinition,
  type PluginKind,
  type PluginKindMap,
  type PluginManifest,
  type TenantUsageReader,
} from '@bifro/spi';
import {
  accessControlConformance,
  authProviderConformance,
  clientBalancerConformance,
  eventCollectorConformance,
  resourceThrottlerConformance,
  runConformance,
  settingProviderConformance,
  storageConformance,
  type ConformanceCase,
} from '@bifro/spi/testing';
import { BifroError, describeError, registerPluginErrors } from '../base/errors';
import { toPluginLogger, type Logger } from '../base/logger';
import { phaseOf, pluginError, type PluginPhase } from './plugin-errors';
import { BROKER_DIR, discoverPlugins, findPlugin, readPluginPackage, type PluginPackage } from './plugin-discovery';
import { closeInstance, createInstance } from './plugin-instance';
import { checkSpiVersion, readManifest } from './plugin-manifest';
import { definitionOf, importPlugin } from './plugin-module';

/** The phases `verifyPlugin` reports: the load phases, then `close`, then the kind's conformance kit. */
export type VerifyPhase = PluginPhase | 'close' | 'conformance';

/** The phases run once per plugin; the others run once per declared kind. */
const PLUGIN_LEVEL: readonly PluginPhase[] = ['resolve', 'manifest', 'version', 'import', 'shape'];
const KIND_LEVEL: readonly VerifyPhase[] = ['instantiate', 'instanceShape', 'init', 'close', 'conformance'];

export interface VerifyStep {
  readonly phase: VerifyPhase;
  /** For the per-kind phases (instantiate, instanceShape, init, close). */
  readonly kind?: PluginKind;
  /** `skipped`: not run because an earlier phase failed. */
  readonly status: 'ok' | 'failed' | 'skipped';
  /** The error code of a failed phase. */
  readonly code?: string;
  readonly message?: string;
  /** The conformance phase: how many cases passed, and each failed case with what it threw. */
  readonly cases?: { readonly passed: number; readonly failed: readonly { readonly name: string; readonly message: string }[] };
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
  /** The options each kind of the plugin (by package name) is instantiated with: the config's, when it uses the plugin; `{}` when absent. */
  readonly optionsFor?: (kind: PluginKind, name: string) => Readonly<Record<string, unknown>> | undefined;
}

const DEFAULT_VERIFY_TIMEOUT_MS = 5000;

const NO_USAGE: TenantUsageReader = { get: () => 0 };

/**
 * Runs every load phase on one plugin, as the broker would, and reports each: resolve, manifest,
 * version, import, shape, then for every declared kind instantiate (with the config's options for
 * it, else empty ones), instanceShape, init and close, and the kind's conformance kit from
 * `@bifro/spi/testing` on fresh instances. `target` is a folder (relative to `cwd`, or a folder
 * name in the plugins directory) or a package name.
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
      const options = opts.optionsFor?.(kind, pkg.name) ?? {};
      steps.push(...(await verifyKind(pkg, kind, definition, { dataDir, cwd: opts.cwd, timeoutMs, logger, options })));
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
  env: { dataDir: string; cwd: string; timeoutMs: number; logger: Logger; options: Readonly<Record<string, unknown>> },
): Promise<VerifyStep[]> {
  const contextIn = (dataDir: string): PluginContext => ({
    name: pkg.name,
    version: pkg.version,
    dir: pkg.dir,
    options: env.options,
    logger: toPluginLogger(env.logger.child({ plugin: pkg.name, kind })),
    dataDir,
    configDir: env.cwd,
    spiVersion: SPI_VERSION,
    tenantUsage: NO_USAGE,
  });
  const context = contextIn(env.dataDir);
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
  // The kit: each case on a fresh instance (storage: in a fresh data directory), as the broker makes it.
  const dirs = new Map<object, string>();
  const create = async <K extends PluginKind>(k: K): Promise<PluginKindMap[K]> => {
    const dataDir = await fs.mkdtemp(path.join(env.dataDir, 'case-'));
    const created = await createInstance(pkg, k, definition, contextIn(dataDir), env.timeoutMs);
    dirs.set(created, dataDir);
    return created;
  };
  const destroy = async (i: object): Promise<void> => {
    const dir = dirs.get(i);
    dirs.delete(i);
    if (dir !== undefined) await fs.rm(dir, { recursive: true, force: true });
  };
  const result = await runConformance(conformanceCases(kind, create, destroy, env.timeoutMs));
  // The first line of what a case threw (assertion diffs run long).
  const failed = result.failed.map((f) => ({ name: f.name, message: describeError(f.error).split('\n')[0]! }));
  const cases = { passed: result.passed.length, failed };
  steps.push(
    failed.length === 0
      ? { phase: 'conformance', kind, status: 'ok', cases }
      : {
          phase: 'conformance',
          kind,
          status: 'failed',
          code: 'BIFRO_PLUGIN_CONFORMANCE_FAILED',
          message: `plugin ${pkg.name}: ${failed.length} of ${failed.length + cases.passed} ${kind} conformance cases failed: ${failed.map((f) => f.name).join('; ')}`,
          cases,
        },
  );
  return steps;
}

/** The `@bifro/spi/testing` kit of one kind over a factory of fresh instances. */
function conformanceCases(
  kind: PluginKind,
  create: <K extends PluginKind>(k: K) => Promise<PluginKindMap[K]>,
  destroy: (instance: object) => Promise<void>,
  callTimeoutMs: number,
): ConformanceCase[] {
  const common = { destroy, callTimeoutMs };
  switch (kind) {
    case 'auth':
      return authProviderConformance({ create: () => create('auth'), ...common });
    case 'acl':
      return accessControlConformance({ create: () => create('acl'), ...common });
    case 'balancer':
      return clientBalancerConformance({ create: () => create('balancer'), ...common });
    case 'events':
      return eventCollectorConformance({ create: () => create('events'), ...common });
    case 'settings':
      return settingProviderConformance({ create: () => create('settings'), ...common });
    case 'throttler':
      return resourceThrottlerConformance({ create: () => create('throttler'), ...common });
    case 'storage':
      return storageConformance({ create: () => create('storage'), ...common });
  }
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
