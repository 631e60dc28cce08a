import assert from 'node:assert/strict';
import type { Storage } from '../storage';
import type { ConformanceCase, InstanceFactory } from './conformance-case';
import { DEFAULT_CALL_TIMEOUT_MS } from './conformance-case';
import { call, withInstance } from './contract-checks';
import { banCases, banDurabilityCases } from './storage-ban-cases';
import { durabilityCases, type AddDurabilityCase } from './storage-durability-cases';
import type { AddStorageCase } from './storage-fixtures';
import { inboxCases } from './storage-inbox-cases';
import { inflightCases } from './storage-inflight-cases';
import { retainedCases } from './storage-retained-cases';
import { sessionCases } from './storage-session-cases';

/** Options of {@link storageConformance}. */
export interface StorageConformanceOptions extends InstanceFactory<Storage> {
  /** The `durable` flag the backend must report; unchecked when absent. */
  readonly durable?: boolean;
  /**
   * Opens the backend again over the data of `previous`, which the kit has closed. When given,
   * the durability cases run: what was written before the close must be there after the reopen.
   * `destroy` is then called with the reopened instance only.
   */
  readonly reopen?: (previous: Storage) => Promise<Storage>;
  /** Milliseconds one case may take in all, so a hanging call fails the case; default 30 × `callTimeoutMs`, at most 60 s. */
  readonly caseTimeoutMs?: number;
  /**
   * The optional ban store (`storage.bans`, SPI 1.3.0): `true` requires it and runs its cases,
   * `false` leaves them out; absent runs them when the storage under test has `bans`.
   */
  readonly bans?: boolean;
}

const STORES = {
  sessions: ['get', 'put', 'delete', 'list'],
  inbox: ['append', 'read', 'commit', 'count'],
  inflight: ['put', 'remove', 'list', 'addIncoming', 'removeIncoming', 'listIncoming'],
  retained: ['put', 'delete', 'get', 'match', 'totals', 'list'],
} as const;

/**
 * The conformance kit of {@link Storage}: every first-party and third-party backend must pass
 * it. Each case gets a fresh, empty storage from `create`. It covers the session store (round
 * trip, replace, delete with the session's inbox and inflight state, tenant isolation, paging
 * within and across tenants with `sessionListKey`), the inbox (order, seq growth, read/commit
 * cursors, exact counts, both drop policies, isolation, concurrent appends), the inflight store
 * (order, replace, remove, incoming QoS 2 ids), the retained store (round trip, every wildcard
 * rule including `$` topics, expiry, limits, totals in UTF-8 bytes, paging by topic) and, for
 * all stores, exact round trips of binary data and copy-on-store; when the storage has the
 * optional ban store (SPI 1.3.0), its round trip, replace, identity by (kind, tenantId, value) and
 * delete. With `reopen`, durability cases check that everything survives a close and reopen.
 *
 * Conventions the kit fixes where the SPI leaves room: inbox seqs are positive, so `read(…, 0, n)`
 * reads from the start; with `dropOldest: true` every given message counts as appended and
 * `dropped` counts evicted entries (old or from the same batch); with `dropOldest: false` the
 * first messages of a batch that fit are kept and the rest counted as dropped.
 *
 * @example
 * ```ts
 * import { registerConformance, storageConformance } from '@bifro/spi/testing';
 *
 * describe('level storage conformance', () => {
 *   registerConformance(
 *     storageConformance({
 *       create: async () => new LevelStorage(await fs.promises.mkdtemp(path.join(os.tmpdir(), 'bifro-'))),
 *       reopen: async (previous) => new LevelStorage((previous as LevelStorage).dir),
 *       destroy: async (s) => fs.promises.rm((s as LevelStorage).dir, { recursive: true, force: true }),
 *       durable: true,
 *     }),
 *     { it },
 *   );
 * });
 * ```
 */
export function storageConformance(options: StorageConformanceOptions): ConformanceCase[] {
  const cases: ConformanceCase[] = [];
  const callTimeout = options.callTimeoutMs ?? DEFAULT_CALL_TIMEOUT_MS;
  const caseTimeout = options.caseTimeoutMs ?? Math.min(60_000, callTimeout * 30);
  const add: AddStorageCase = (name, check) => {
    cases.push({
      name: `storage/${name}`,
      run: () => withInstance(options, (s) => call(`case "${name}"`, caseTimeout, () => check(s))),
    });
  };

  add('lifecycle: create, init and close resolve; durable is a boolean and the four stores have their methods', async (s) => {
    assert.equal(typeof s.durable, 'boolean', 'durable must be a boolean');
    if (options.durable !== undefined) assert.equal(s.durable, options.durable, 'durable');
    for (const [store, methods] of Object.entries(STORES)) {
      const object: unknown = (s as unknown as Record<string, unknown>)[store];
      assert.ok(typeof object === 'object' && object !== null, `storage.${store} must be an object`);
      for (const m of methods)
        assert.equal(typeof (object as Record<string, unknown>)[m], 'function', `storage.${store}.${m} must be a function`);
    }
  });

  sessionCases(add);
  inboxCases(add);
  inflightCases(add);
  retainedCases(add);
  banCases(add, options.bans);

  const reopen = options.reopen;
  if (reopen !== undefined) {
    const addDurability: AddDurabilityCase = (name, write, verify) => {
      cases.push({
        name: `storage/${name}`,
        run: async () => {
          let current = await call('create()', callTimeout, options.create);
          let closed = false;
          try {
            if (current.init) await call('init()', callTimeout, () => current.init?.());
            await call(`case "${name}" (write)`, caseTimeout, () => write(current));
            if (current.close) await call('close()', callTimeout, () => current.close?.());
            closed = true;
            current = await call('reopen()', callTimeout, () => reopen(current));
            closed = false;
            if (current.init) await call('init() after reopen', callTimeout, () => current.init?.());
            await call(`case "${name}" (verify)`, caseTimeout, () => verify(current));
          } finally {
            try {
              if (!closed && current.close) await call('close()', callTimeout, () => current.close?.());
            } finally {
              if (options.destroy) await call('destroy()', callTimeout, () => options.destroy?.(current));
            }
          }
        },
      });
    };
    durabilityCases(addDurability);
    banDurabilityCases(addDurability, options.bans);
  }

  return cases;
}
