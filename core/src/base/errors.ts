/**
 * Coded errors. Every error the broker reports to an operator has a stable code listed in a
 * catalogue (one per area, gathered in error-catalogue.ts) and documented in docs/errors.md; a test
 * keeps the two in sync.
 */

import type { ErrorCatalogue, ErrorSpec } from '@bifro/spi';

/**
 * One catalogue entry (what the code means and what the operator should do), and a catalogue of
 * codes for one area, e.g. `{ BIFRO_CONFIG_UNKNOWN_KEY: {...} }`: the SPI's shapes, which plugins
 * use for the codes they declare.
 */
export type { ErrorCatalogue, ErrorSpec };

/** Declares an area's catalogue with its codes checked at compile time. */
export function defineErrors<C extends string>(catalogue: ErrorCatalogue<C>): ErrorCatalogue<C> {
  return catalogue;
}

/** An error with a catalogue code. `message` names the file, key, plugin or field involved. */
export class BifroError extends Error {
  override readonly name = 'BifroError';

  constructor(
    readonly code: string,
    message: string,
    readonly details: Readonly<Record<string, unknown>> = {},
    options?: { cause?: unknown },
  ) {
    super(`${code}: ${message}`, options);
  }
}

/** The message of anything thrown, for logs. */
export function describeError(err: unknown): string {
  if (err instanceof Error) return err.message;
  return String(err);
}

/** The codes plugins declared (`PluginDefinition.errors`), by code, with the plugin that declared each. */
const contributed = new Map<string, { readonly plugin: string; readonly spec: ErrorSpec }>();

/**
 * Records the error codes a loaded plugin declares, so that the CLI prints their remedy like a
 * core code's. A code another plugin declared already keeps its first declaration; those codes are
 * returned (the caller warns). Declaring again for the same plugin replaces its entries.
 */
export function registerPluginErrors(plugin: string, catalogue: Readonly<Record<string, ErrorSpec>>): string[] {
  const taken: string[] = [];
  for (const [code, spec] of Object.entries(catalogue)) {
    const other = contributed.get(code);
    if (other !== undefined && other.plugin !== plugin) taken.push(code);
    else contributed.set(code, { plugin, spec: { summary: spec.summary, remedy: spec.remedy } });
  }
  return taken;
}

/** The entry of a code a loaded plugin declared, with the plugin's name. */
export function pluginErrorSpec(code: string): { readonly plugin: string; readonly spec: ErrorSpec } | undefined {
  return contributed.get(code);
}
