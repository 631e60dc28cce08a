import type { Lifecycle, MaybePromise } from '../common';

/**
 * One check of a conformance kit. Runner-agnostic: `run` resolves when the check passes and
 * rejects (with an `AssertionError` from `node:assert`) when it fails.
 */
export interface ConformanceCase {
  /** Stable, descriptive name, e.g. `storage/inbox: read returns entries oldest first`. */
  readonly name: string;
  /** Runs the check against a fresh instance of the plugin. */
  readonly run: () => Promise<void>;
}

/** The part of a test runner's API {@link registerConformance} needs (jest, vitest, mocha...). */
export interface ConformanceRegistrar {
  it(name: string, fn: () => Promise<void>): void;
}

/**
 * Registers every case as a test of a runner with jest-like globals.
 *
 * @example
 * ```ts
 * import { registerConformance, storageConformance } from '@bifro/spi/testing';
 * describe('storage conformance', () => {
 *   registerConformance(storageConformance({ create: async () => new MyStorage() }), { it });
 * });
 * ```
 */
export function registerConformance(cases: readonly ConformanceCase[], api: ConformanceRegistrar): void {
  for (const c of cases) api.it(c.name, () => c.run());
}

/** One failed case of a {@link ConformanceReport}. */
export interface ConformanceFailure {
  readonly name: string;
  readonly error: unknown;
}

/** Outcome of {@link runConformance}. */
export interface ConformanceReport {
  /** Names of the cases that passed, in run order. */
  readonly passed: readonly string[];
  /** Cases that failed, with what they threw. */
  readonly failed: readonly ConformanceFailure[];
}

/**
 * Runs cases one after the other without a test runner (e.g. for `bifro plugin verify`) and
 * reports which passed and which failed. Never rejects.
 *
 * @example
 * ```ts
 * const report = await runConformance(authProviderConformance({ create: () => myAuth }));
 * for (const f of report.failed) console.error(f.name, f.error);
 * ```
 */
export async function runConformance(cases: readonly ConformanceCase[]): Promise<ConformanceReport> {
  const passed: string[] = [];
  const failed: ConformanceFailure[] = [];
  for (const c of cases) {
    try {
      await c.run();
      passed.push(c.name);
    } catch (error) {
      failed.push({ name: c.name, error });
    }
  }
  return { passed, failed };
}

/**
 * How a kit obtains and disposes of the instance under test. Every case gets a fresh instance:
 * `create`, then `init` when present, the check, `close` when present, then `destroy`.
 */
export interface InstanceFactory<T extends Lifecycle> {
  /** Creates a fresh instance (for storage: an empty one). */
  readonly create: () => MaybePromise<T>;
  /** Releases what `create` allocated (temporary folders...), after `close`. */
  readonly destroy?: (instance: T) => MaybePromise<void>;
  /** Milliseconds one plugin call may take before the case fails; default 5000. */
  readonly callTimeoutMs?: number;
}

/** Default of {@link InstanceFactory.callTimeoutMs}. */
export const DEFAULT_CALL_TIMEOUT_MS = 5000;
