import assert from 'node:assert/strict';
import type { BanKind, BanRecord, BanStore, Storage } from '../storage';
import { assertSameData } from './contract-checks';
import type { AddDurabilityCase } from './storage-durability-cases';
import { FIXTURE_TIME, type AddStorageCase } from './storage-fixtures';

/**
 * Whether a case runs against `storage.bans` (optional, SPI 1.3.0): `true` requires it, `false`
 * leaves the cases out, absent runs them when the storage under test has the member.
 */
export type BanExpectation = boolean | undefined;

/** One ban of every kind with every optional field set, and one with none. */
export function sampleBans(): BanRecord[] {
  return [
    {
      kind: 'clientId',
      tenantId: 't1',
      value: 'c1',
      reason: 'spam ü€',
      createdAt: FIXTURE_TIME,
      until: FIXTURE_TIME + 60_000,
      by: 'admin',
    },
    { kind: 'user', tenantId: 't1', value: 'alice', createdAt: FIXTURE_TIME },
    { kind: 'tenant', tenantId: 't9', value: 't9', reason: 'unpaid', createdAt: FIXTURE_TIME + 1 },
    { kind: 'address', value: '10.0.0.0/8', createdAt: FIXTURE_TIME, by: 'ops' },
    { kind: 'address', tenantId: 't1', value: '2001:db8::/32', createdAt: FIXTURE_TIME, until: FIXTURE_TIME + 1 },
  ];
}

/** A stable identity of a ban for comparing lists whose order the SPI leaves open. */
function identity(b: Pick<BanRecord, 'kind' | 'tenantId' | 'value'>): string {
  return JSON.stringify([b.kind, b.tenantId ?? null, b.value]);
}

function sorted(bans: readonly BanRecord[]): BanRecord[] {
  return [...bans].sort((a, b) => (identity(a) < identity(b) ? -1 : identity(a) > identity(b) ? 1 : 0));
}

/** `storage.bans`, or undefined when the case does not apply (see {@link BanExpectation}). */
function bansOf(s: Storage, expect: BanExpectation): BanStore | undefined {
  const bans = s.bans;
  if (bans === undefined) {
    assert.notEqual(expect, true, 'storage.bans is required (the kit was told bans: true)');
    return undefined;
  }
  for (const m of ['put', 'delete', 'list'] as const) assert.equal(typeof bans[m], 'function', `storage.bans.${m} must be a function`);
  return bans;
}

/** The ban store cases of the storage kit (SPI 1.3.0). */
export function banCases(add: AddStorageCase, expect: BanExpectation): void {
  if (expect === false) return;
  const withBans = (name: string, check: (bans: BanStore) => Promise<void>): void =>
    add(`bans: ${name}`, async (s) => {
      const bans = bansOf(s, expect);
      if (bans !== undefined) await check(bans);
    });

  withBans('an empty store lists nothing; put then list round-trips every field, absent ones stay absent', async (bans) => {
    assertSameData(await bans.list(), [], 'a new storage holds no bans');
    for (const b of sampleBans()) await bans.put(b);
    const listed = await bans.list();
    assertSameData(sorted(listed), sorted(sampleBans()));
    const plain = listed.find((b) => b.kind === 'user');
    assert.ok(plain !== undefined, 'the user ban must be listed');
    for (const field of ['reason', 'until', 'by'] as const)
      assert.equal(plain[field], undefined, `an absent ${field} must stay absent (got ${String(plain[field])})`);
    const global = listed.find((b) => b.kind === 'address' && b.value === '10.0.0.0/8');
    assert.equal(global?.tenantId, undefined, 'an address ban for every tenant must come back without tenantId');
  });

  withBans('put replaces the ban with the same (kind, tenantId, value) and nothing else', async (bans) => {
    await bans.put({ kind: 'clientId', tenantId: 't1', value: 'c1', reason: 'first', createdAt: FIXTURE_TIME, until: FIXTURE_TIME + 1000 });
    const replacement: BanRecord = { kind: 'clientId', tenantId: 't1', value: 'c1', createdAt: FIXTURE_TIME + 5, by: 'second' };
    await bans.put(replacement);
    assertSameData(await bans.list(), [replacement], 'the replacement, without the first one’s reason and until');
  });

  withBans('kind, tenant and value each tell bans apart; an address ban for all tenants differs from one for a tenant', async (bans) => {
    const kinds: BanKind[] = ['clientId', 'user'];
    const records: BanRecord[] = [];
    for (const kind of kinds)
      for (const tenantId of ['t1', 't2'])
        for (const value of ['x', 'X', 'x ']) records.push({ kind, tenantId, value, createdAt: FIXTURE_TIME });
    records.push({ kind: 'address', value: '127.0.0.1', createdAt: FIXTURE_TIME, reason: 'all' });
    records.push({ kind: 'address', tenantId: 't1', value: '127.0.0.1', createdAt: FIXTURE_TIME, reason: 't1 only' });
    for (const r of records) await bans.put(r);
    assertSameData(sorted(await bans.list()), sorted(records), `${records.length} distinct bans`);
  });

  withBans('delete removes one ban and resolves true; an unknown one resolves false', async (bans) => {
    for (const b of sampleBans()) await bans.put(b);
    assert.equal(await bans.delete('address', undefined, '10.0.0.0/8'), true, 'deleting a stored ban');
    assert.equal(await bans.delete('address', undefined, '10.0.0.0/8'), false, 'deleting it again');
    assert.equal(await bans.delete('address', 't2', '2001:db8::/32'), false, 'another tenant’s address ban is another ban');
    assert.equal(await bans.delete('address', undefined, '2001:db8::/32'), false, 'a tenant’s address ban is not the one for all tenants');
    assert.equal(await bans.delete('user', 't1', 'c1'), false, 'the same value under another kind is another ban');
    assert.equal(await bans.delete('tenant', 't9', 't9'), true, 'deleting the tenant ban');
    const left = sampleBans().filter((b) => b.kind !== 'tenant' && b.value !== '10.0.0.0/8');
    assertSameData(sorted(await bans.list()), sorted(left), 'the other bans stay');
  });

  withBans('list includes ended bans (pruning them is the broker’s work)', async (bans) => {
    const ended: BanRecord = { kind: 'clientId', tenantId: 't1', value: 'old', createdAt: 1, until: 2 };
    await bans.put(ended);
    assertSameData(await bans.list(), [ended]);
  });

  withBans('values with any characters round-trip (non-BMP, separators, long)', async (bans) => {
    const odd: BanRecord[] = [
      { kind: 'clientId', tenantId: 'tenant/ü', value: 'a/b\u0001c😀', createdAt: FIXTURE_TIME },
      { kind: 'user', tenantId: 'tenant/ü', value: 'x'.repeat(5000), createdAt: FIXTURE_TIME, reason: '' },
      { kind: 'address', tenantId: '😀', value: '::ffff:127.0.0.1', createdAt: FIXTURE_TIME },
    ];
    for (const b of odd) await bans.put(b);
    assertSameData(sorted(await bans.list()), sorted(odd));
    assert.equal(await bans.delete('clientId', 'tenant/ü', 'a/b\u0001c😀'), true);
  });

  withBans('concurrent puts and deletes all take effect', async (bans) => {
    const records = Array.from({ length: 50 }, (_, i): BanRecord => ({
      kind: 'clientId',
      tenantId: 't1',
      value: `c${i}`,
      createdAt: FIXTURE_TIME,
    }));
    await Promise.all(records.map((r) => bans.put(r)));
    const deleted = await Promise.all(records.filter((_, i) => i % 2 === 0).map((r) => bans.delete(r.kind, r.tenantId, r.value)));
    assert.ok(
      deleted.every((d) => d),
      'every delete of a stored ban resolves true',
    );
    assertSameData(sorted(await bans.list()), sorted(records.filter((_, i) => i % 2 === 1)));
  });
}

/** The ban case that needs `reopen`: bans survive a close and reopen. */
export function banDurabilityCases(add: AddDurabilityCase, expect: BanExpectation): void {
  if (expect === false) return;
  add(
    'durability: bans survive close and reopen, lifted ones stay lifted',
    async (s) => {
      const bans = bansOf(s, expect);
      if (bans === undefined) return;
      for (const b of sampleBans()) await bans.put(b);
      await bans.put({ kind: 'clientId', tenantId: 't1', value: 'gone', createdAt: FIXTURE_TIME });
      await bans.delete('clientId', 't1', 'gone');
    },
    async (s) => {
      const bans = bansOf(s, expect);
      if (bans === undefined) return;
      assertSameData(sorted(await bans.list()), sorted(sampleBans()), 'bans after reopen');
    },
  );
}
