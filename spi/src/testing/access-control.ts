import assert from 'node:assert/strict';
import type { AccessAction, AccessControl, AccessDecision } from '../acl';
import type { ClientInfo } from '../common';
import type { ConformanceCase, InstanceFactory } from './conformance-case';
import { call, lifecycleCheck, withInstance } from './contract-checks';
import { ordinaryActions, ordinaryClients, sampleClient } from './fixtures';

/** Every {@link AccessDecision}. */
export const ACCESS_DECISIONS: readonly AccessDecision[] = ['granted', 'denied', 'defer', 'error'];

/** A decision the plugin under test must make. */
export interface AccessExpectation {
  /** Merged over a plain client (tenant `t1`, user `u1`). */
  readonly client?: Partial<ClientInfo>;
  readonly action: AccessAction;
  readonly decision: AccessDecision;
}

/** Options of {@link accessControlConformance}. */
export interface AccessControlConformanceOptions extends InstanceFactory<AccessControl> {
  /** More clients to ask about every ordinary action. */
  readonly clients?: readonly ClientInfo[];
  /** The plugin's own rules, checked one by one. */
  readonly expectations?: readonly AccessExpectation[];
}

/** Asserts that `value` is one of the four {@link AccessDecision}s. */
export function assertAccessDecision(value: unknown, what: string): asserts value is AccessDecision {
  assert.ok(
    ACCESS_DECISIONS.includes(value as AccessDecision),
    `${what} must answer one of ${ACCESS_DECISIONS.join(', ')}, got ${JSON.stringify(value)}`,
  );
}

function describeAction(a: AccessAction): string {
  switch (a.type) {
    case 'connect':
      return 'connect';
    case 'publish':
      return `publish(${a.topic}, qos ${a.qos}, retain ${String(a.retain)})`;
    case 'subscribe':
      return `subscribe(${a.filter}, qos ${a.qos})`;
    case 'unsubscribe':
      return `unsubscribe(${a.filter})`;
  }
}

/**
 * The conformance kit of {@link AccessControl}: lifecycle, and one of the four decisions
 * (`granted`, `denied`, `defer`, `error`) without throwing for every action type asked by varied
 * clients; plus the plugin's own expected decisions.
 *
 * @example
 * ```ts
 * registerConformance(
 *   accessControlConformance({
 *     create: () => new TopicPrefixAcl(),
 *     expectations: [{ action: { type: 'publish', topic: 'sys/x', qos: 0, retain: false }, decision: 'denied' }],
 *   }),
 *   { it },
 * );
 * ```
 */
export function accessControlConformance(options: AccessControlConformanceOptions): ConformanceCase[] {
  const cases: ConformanceCase[] = [];
  const add = (name: string, check: (p: AccessControl, timeoutMs: number) => Promise<void>): void => {
    cases.push({ name: `acl: ${name}`, run: () => withInstance(options, check) });
  };
  const clients = [...ordinaryClients(), ...(options.clients ?? [])];

  add('create, init and close resolve; checkPermission is a method', async (p) => lifecycleCheck(['checkPermission'])(p));

  const actions = ordinaryActions();
  for (const type of ['connect', 'publish', 'subscribe', 'unsubscribe'] as const) {
    const list: readonly AccessAction[] = actions[type];
    add(`checkPermission answers a known decision for every ${type} action`, async (p, t) => {
      for (const client of clients) {
        for (const action of list) {
          const what = `checkPermission(${client.tenantId}/${client.clientId}, ${describeAction(action)})`;
          assertAccessDecision(await call(what, t, () => p.checkPermission(client, action)), what);
        }
      }
    });
  }

  const expectations = options.expectations ?? [];
  expectations.forEach((e, i) => {
    add(`expectation ${i + 1}: ${describeAction(e.action)} is ${e.decision}`, async (p, t) => {
      const client = sampleClient(e.client);
      const what = `checkPermission(${client.tenantId}/${client.clientId}, ${describeAction(e.action)})`;
      const decision = await call(what, t, () => p.checkPermission(client, e.action));
      assertAccessDecision(decision, what);
      assert.equal(decision, e.decision, what);
    });
  });

  return cases;
}
