import type { PluginContext, PluginDefinition, PluginKind, PluginKindMap, PluginFactory } from '@bifro/spi';
import { describeError } from '../base/errors';
import { raceTimeout, TIMED_OUT } from './call-timeout';
import { instanceProblems } from './instance-shape';
import { pluginError } from './plugin-errors';
import type { PluginPackage } from './plugin-discovery';

/**
 * Creates a plugin's instance of one kind and prepares it: phase `instantiate` (the factory,
 * awaited under the init timeout), `instanceShape` (the methods the kind needs) and `init`
 * (optional `init()` under the init timeout). An instance that fails after it was created is
 * closed before the error is thrown.
 */
export async function createInstance<K extends PluginKind>(
  pkg: PluginPackage,
  kind: K,
  definition: PluginDefinition,
  context: PluginContext,
  initTimeoutMs: number,
): Promise<PluginKindMap[K]> {
  const factory = definition[kind] as PluginFactory<K>;
  const at = (phase: 'instantiate' | 'instanceShape' | 'init') => ({ phase, plugin: pkg.name, dir: pkg.dir, kind });

  let created: PluginKindMap[K] | typeof TIMED_OUT;
  try {
    created = await raceTimeout(
      Promise.resolve().then(() => factory(context)),
      initTimeoutMs,
    );
  } catch (err) {
    throw pluginError(
      'BIFRO_PLUGIN_INSTANTIATE_FAILED',
      `plugin ${pkg.name} (${pkg.dir}): the ${kind} factory threw: ${describeError(err)}`,
      at('instantiate'),
      err,
    );
  }
  if (created === TIMED_OUT) {
    throw pluginError(
      'BIFRO_PLUGIN_INIT_TIMEOUT',
      `plugin ${pkg.name} (${pkg.dir}): the ${kind} factory did not finish within ${initTimeoutMs} ms (plugins.initTimeoutMs)`,
      { ...at('instantiate'), timeoutMs: initTimeoutMs },
    );
  }
  const instance = created;

  const problems = instanceProblems(kind, instance);
  if (problems.length > 0) {
    throw pluginError(
      'BIFRO_PLUGIN_INSTANCE_INVALID',
      `plugin ${pkg.name} (${pkg.dir}): the ${kind} instance does not fit the SPI: ${problems.join('; ')}`,
      { ...at('instanceShape'), problems },
    );
  }

  if (instance.init === undefined) return instance;
  let initialized: void | typeof TIMED_OUT;
  try {
    initialized = await raceTimeout(
      Promise.resolve().then(() => instance.init?.()),
      initTimeoutMs,
    );
  } catch (err) {
    await closeQuietly(instance, initTimeoutMs);
    throw pluginError(
      'BIFRO_PLUGIN_INIT_FAILED',
      `plugin ${pkg.name} (${pkg.dir}): ${kind} init() failed: ${describeError(err)}`,
      at('init'),
      err,
    );
  }
  if (initialized === TIMED_OUT) {
    await closeQuietly(instance, initTimeoutMs);
    throw pluginError(
      'BIFRO_PLUGIN_INIT_TIMEOUT',
      `plugin ${pkg.name} (${pkg.dir}): ${kind} init() did not finish within ${initTimeoutMs} ms (plugins.initTimeoutMs)`,
      { ...at('init'), timeoutMs: initTimeoutMs },
    );
  }
  return instance;
}

/** Closes an instance under a timeout. Resolves with the problem, or undefined when it closed cleanly. */
export async function closeInstance(instance: { close?(): Promise<void> | void }, timeoutMs: number): Promise<string | undefined> {
  if (instance.close === undefined) return undefined;
  try {
    const closed = await raceTimeout(
      Promise.resolve().then(() => instance.close?.()),
      timeoutMs,
    );
    return closed === TIMED_OUT ? `close() did not finish within ${timeoutMs} ms` : undefined;
  } catch (err) {
    return `close() failed: ${describeError(err)}`;
  }
}

async function closeQuietly(instance: { close?(): Promise<void> | void }, timeoutMs: number): Promise<void> {
  await closeInstance(instance, timeoutMs);
}
