import assert from 'node:assert/strict';
import { RESOURCE_TYPES, type ResourceThrottler, type ResourceType } from '../throttler';
import type { ConformanceCase, InstanceFactory } from './conformance-case';
import { callSync, lifecycleCheck, withInstance } from './contract-checks';

/** An answer the throttler under test must give. */
export interface ThrottleExpectation {
  readonly tenantId: string;
  readonly resource: ResourceType;
  readonly hasResource: boolean;
}

/** Options of {@link resourceThrottlerConformance}. */
export interface ResourceThrottlerConformanceOptions extends InstanceFactory<ResourceThrottler> {
  /** Tenants to ask about every resource, besides a few plain and odd ones. */
  readonly tenants?: readonly string[];
  /** The throttler's own answers, checked one by one (give `create` a context with the usage they need). */
  readonly expectations?: readonly ThrottleExpectation[];
}

const ORDINARY_TENANTS = ['t1', '', 'tenant-ü', 'unknown-tenant-bifro-conformance'];

/**
 * The conformance kit of {@link ResourceThrottler}: lifecycle, and a synchronous boolean without
 * throwing for every resource type and varied tenants; `quota`, when the throttler has it,
 * answers `undefined` or a finite non-negative number the same way; plus the throttler's own answers.
 *
 * @example
 * ```ts
 * const ctx = testPluginContext({ usage: { busy: { TotalConnections: 1000 } } });
 * registerConformance(
 *   resourceThrottlerConformance({
 *     create: () => plugin.throttler!(ctx),
 *     expectations: [{ tenantId: 'busy', resource: 'TotalConnections', hasResource: false }],
 *   }),
 *   { it },
 * );
 * ```
 */
export function resourceThrottlerConformance(options: ResourceThrottlerConformanceOptions): ConformanceCase[] {
  const cases: ConformanceCase[] = [];
  const add = (name: string, check: (p: ResourceThrottler, timeoutMs: number) => Promise<void>): void => {
    cases.push({ name: `throttler: ${name}`, run: () => withInstance(options, check) });
  };
  const tenants = [...ORDINARY_TENANTS, ...(options.tenants ?? [])];

  add('create, init and close resolve; hasResource is a method', async (p) => lifecycleCheck(['hasResource'])(p));

  for (const resource of RESOURCE_TYPES) {
    add(`hasResource(${resource}) answers a boolean synchronously for every tenant`, async (p) => {
      for (const tenantId of tenants) {
        const what = `hasResource(${JSON.stringify(tenantId)}, ${resource})`;
        const answer: unknown = callSync(what, () => p.hasResource(tenantId, resource));
        assert.equal(typeof answer, 'boolean', `${what} must answer a boolean, got ${JSON.stringify(answer)}`);
      }
    });
  }

  add('quota (when present) answers undefined or a finite non-negative number synchronously for every resource and tenant', async (p) => {
    const quota = p.quota;
    if (quota === undefined) return; // optional (SPI 1.5.0)
    assert.equal(typeof quota, 'function', 'quota must be a method when present');
    for (const resource of RESOURCE_TYPES) {
      for (const tenantId of tenants) {
        const what = `quota(${JSON.stringify(tenantId)}, ${resource})`;
        const answer: unknown = callSync(what, () => quota.call(p, tenantId, resource));
        assert.ok(
          answer === undefined || (typeof answer === 'number' && Number.isFinite(answer) && answer >= 0),
          `${what} must answer undefined or a finite non-negative number, got ${String(answer)}`,
        );
      }
    }
  });

  (options.expectations ?? []).forEach((e) => {
    add(`expectation: ${e.resource} of ${JSON.stringify(e.tenantId)} is ${String(e.hasResource)}`, async (p) => {
      const what = `hasResource(${JSON.stringify(e.tenantId)}, ${e.resource})`;
      assert.equal(
        callSync(what, () => p.hasResource(e.tenantId, e.resource)),
        e.hasResource,
        what,
      );
    });
  });

  return cases;
}
