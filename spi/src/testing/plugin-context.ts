import type { PluginContext, PluginLogger } from '../common';
import type { ResourceType } from '../throttler';
import { SPI_VERSION } from '../version';

/** One line a {@link testPluginContext} logger received. */
export interface LoggedLine {
  readonly level: 'trace' | 'debug' | 'info' | 'warn' | 'error';
  readonly msg: string;
  readonly fields?: Readonly<Record<string, unknown>>;
}

/** Options of {@link testPluginContext}. */
export interface TestPluginContextOptions {
  /** The plugin's `options` block. */
  readonly options?: Readonly<Record<string, unknown>>;
  /** Usage values returned by `tenantUsage.get`, by tenant then resource; 0 when absent. */
  readonly usage?: Readonly<Record<string, Partial<Record<ResourceType, number>>>>;
  /** Overrides of the other context fields. */
  readonly name?: string;
  readonly version?: string;
  readonly dir?: string;
  readonly dataDir?: string;
  readonly configDir?: string;
}

/** A {@link PluginContext} for tests, with the lines its logger received. */
export interface TestPluginContext extends PluginContext {
  /** Every line logged so far, in order. */
  readonly logged: LoggedLine[];
}

/**
 * A plugin context for calling a plugin factory in tests: a logger that records lines instead
 * of printing them, a usage reader over fixed values, and the current {@link SPI_VERSION}.
 *
 * @example
 * ```ts
 * const ctx = testPluginContext({ options: { file: 'passwords' }, usage: { t1: { TotalConnections: 5 } } });
 * const auth = await plugin.auth!(ctx);
 * expect(ctx.logged.filter((l) => l.level === 'error')).toEqual([]);
 * ```
 */
export function testPluginContext(options: TestPluginContextOptions = {}): TestPluginContext {
  const logged: LoggedLine[] = [];
  const line =
    (level: LoggedLine['level']) =>
    (msg: string, fields?: Readonly<Record<string, unknown>>): void => {
      logged.push(fields === undefined ? { level, msg } : { level, msg, fields });
    };
  const logger: PluginLogger = {
    trace: line('trace'),
    debug: line('debug'),
    info: line('info'),
    warn: line('warn'),
    error: line('error'),
  };
  const usage = options.usage ?? {};
  return {
    name: options.name ?? 'test-plugin',
    version: options.version ?? '0.0.0',
    dir: options.dir ?? process.cwd(),
    options: options.options ?? {},
    logger,
    dataDir: options.dataDir ?? process.cwd(),
    configDir: options.configDir ?? process.cwd(),
    spiVersion: SPI_VERSION,
    tenantUsage: { get: (tenantId, resource) => usage[tenantId]?.[resource] ?? 0 },
    logged,
  };
}
