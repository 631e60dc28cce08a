import assert from 'node:assert/strict';
import type { ClientBalancer, RedirectDecision } from '../balancer';
import type { ClientInfo } from '../common';
import type { ConformanceCase, InstanceFactory } from './conformance-case';
import { assertNonEmptyString, call, lifecycleCheck, withInstance } from './contract-checks';
import { ordinaryClients, sampleClient } from './fixtures';

/** A decision the balancer under test must make. */
export interface RedirectExpectation {
  /** Merged over a plain client (tenant `t1`, user `u1`). */
  readonly client?: Partial<ClientInfo>;
  readonly decision: RedirectDecision;
}

/** Options of {@link clientBalancerConformance}. */
export interface ClientBalancerConformanceOptions extends InstanceFactory<ClientBalancer> {
  /** More clients to ask about. */
  readonly clients?: readonly ClientInfo[];
  /** The balancer's own decisions, checked one by one. */
  readonly expectations?: readonly RedirectExpectation[];
}

/** Asserts a well-formed {@link RedirectDecision}. */
export function assertRedirectDecision(value: unknown, what: string): asserts value is RedirectDecision {
  assert.ok(typeof value === 'object' && value !== null, `${what} must return an object, got ${String(value)}`);
  const d = value as Record<string, unknown>;
  if (d.type === 'none') return;
  assert.equal(d.type, 'redirect', `${what}: type must be none or redirect, got ${String(d.type)}`);
  assert.equal(typeof d.permanent, 'boolean', `${what}: redirect.permanent must be a boolean`);
  assertNonEmptyString(d.serverReference, `${what}: redirect.serverReference`);
}

/**
 * The conformance kit of {@link ClientBalancer}: lifecycle, and `none` or a redirect with a
 * boolean `permanent` and a non-empty `serverReference`, without throwing, for varied clients;
 * plus the balancer's own expected decisions.
 *
 * @example
 * ```ts
 * registerConformance(
 *   clientBalancerConformance({
 *     create: () => new TenantMovedBalancer({ moved: { to: 'eu.example.com' } }),
 *     expectations: [{ client: { tenantId: 'moved' }, decision: { type: 'redirect', permanent: true, serverReference: 'eu.example.com' } }],
 *   }),
 *   { it },
 * );
 * ```
 */
export function clientBalancerConformance(options: ClientBalancerConformanceOptions): ConformanceCase[] {
  const cases: ConformanceCase[] = [];
  const add = (name: string, check: (p: ClientBalancer, timeoutMs: number) => Promise<void>): void => {
    cases.push({ name: `balancer: ${name}`, run: () => withInstance(options, check) });
  };

  add('create, init and close resolve; needRedirect is a method', async (p) => lifecycleCheck(['needRedirect'])(p));

  add('needRedirect answers none or a well-formed redirect for every client', async (p, t) => {
    for (const client of [...ordinaryClients(), ...(options.clients ?? [])]) {
      const what = `needRedirect(${client.tenantId}/${client.clientId}, v${client.protocolVersion})`;
      assertRedirectDecision(await call(what, t, () => p.needRedirect(client)), what);
    }
  });

  (options.expectations ?? []).forEach((e, i) => {
    add(`expectation ${i + 1}: ${e.decision.type}`, async (p, t) => {
      const client = sampleClient(e.client);
      const what = `needRedirect(${client.tenantId}/${client.clientId})`;
      const decision = await call(what, t, () => p.needRedirect(client));
      assertRedirectDecision(decision, what);
      assert.deepStrictEqual({ ...decision }, { ...e.decision }, what);
    });
  });

  return cases;
}
