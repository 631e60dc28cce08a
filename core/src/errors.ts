/**
 * Coded errors. Every error the broker reports to an operator has a stable code listed in a
 * catalogue (one per area, gathered in error-catalogue.ts) and documented in docs/errors.md; a test
 * keeps the two in sync.
 */

/** One catalogue entry: what the code means and what the operator should do. */
export interface ErrorSpec {
  /** One line: what happened. */
  readonly summary: string;
  /** What to do about it. */
  readonly remedy: string;
}

/** A catalogue of codes for one area, e.g. `{ BIFRO_CONFIG_UNKNOWN_KEY: {...} }`. */
export type ErrorCatalogue<C extends string> = { readonly [K in C]: ErrorSpec };

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
