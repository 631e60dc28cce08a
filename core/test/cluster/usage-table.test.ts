import { parseUsage, usageKey, UsageTable } from '../../src/cluster/usage';
import { TenantUsage } from '../../src/tenancy/tenant-usage';

/** A watched bucket entry, as the NATS client hands it over. */
function put(key: string, value: unknown): { key: string; operation: 'PUT'; value: Uint8Array } {
  return { key, operation: 'PUT', value: Buffer.from(typeof value === 'string' ? value : JSON.stringify(value)) };
}
function del(key: string): { key: string; operation: 'DEL'; value: Uint8Array } {
  return { key, operation: 'DEL', value: new Uint8Array(0) };
}
function record(node: string, tenant: string, usage: Record<string, unknown>): ReturnType<typeof put> {
  return put(usageKey(node, tenant), { node, tenant, usage });
}

describe('the other nodes’ usage, summed for the quota checks', () => {
  let live: Set<string>;
  let table: UsageTable;
  let usage: TenantUsage;
  beforeEach(() => {
    live = new Set(['b', 'c']);
    usage = new TenantUsage(() => 0);
    table = new UsageTable(
      'a',
      (n) => live.has(n),
      (t, sums) => usage.remoteChanged(t, sums),
    );
    usage.addRemote(table.sums);
  });

  it('adds every live node’s values to this node’s own, and follows updates and deletes', () => {
    usage.add('t', 'TotalConnections', 1);
    table.apply(record('b', 't', { TotalConnections: 3, TotalConnectPerSecond: 0.5 }));
    table.apply(record('c', 't', { TotalConnections: 2 }));
    expect(usage.get('t', 'TotalConnections')).toBe(6);
    expect(usage.get('t', 'TotalConnectPerSecond')).toBe(0.5);
    // Tenants known only elsewhere count too, without a local state being made.
    table.apply(record('b', 'elsewhere', { TotalTransientSubscriptions: 7 }));
    expect(usage.get('elsewhere', 'TotalTransientSubscriptions')).toBe(7);
    expect(usage.usedElsewhere('elsewhere')).toBe(true);
    expect(usage.peek('elsewhere')).toBeUndefined();
    // A local state made later reads the same sums.
    usage.add('elsewhere', 'TotalTransientSubscriptions', 1);
    expect(usage.get('elsewhere', 'TotalTransientSubscriptions')).toBe(8);

    table.apply(record('b', 't', { TotalConnections: 1 }));
    expect(usage.get('t', 'TotalConnections')).toBe(4);
    expect(usage.get('t', 'TotalConnectPerSecond')).toBe(0);
    table.apply(del(usageKey('c', 't')));
    expect(usage.get('t', 'TotalConnections')).toBe(2);
    table.apply(del(usageKey('b', 't')));
    expect(usage.get('t', 'TotalConnections')).toBe(1);
    expect(table.sums.has('t')).toBe(false);
  });

  it('stops counting a node the moment it leaves, and counts it again when it is back', () => {
    table.apply(record('b', 't', { TotalConnections: 3 }));
    table.apply(record('c', 't', { TotalConnections: 2 }));
    live.delete('b');
    table.nodeLeft('b');
    expect(usage.get('t', 'TotalConnections')).toBe(2);
    // What it writes meanwhile is kept, not counted.
    table.apply(record('b', 't', { TotalConnections: 4 }));
    expect(usage.get('t', 'TotalConnections')).toBe(2);
    live.add('b');
    table.checkAlive();
    expect(usage.get('t', 'TotalConnections')).toBe(6);
    // A node seen by the poll as gone drops out too.
    live.delete('c');
    table.checkAlive();
    expect(usage.get('t', 'TotalConnections')).toBe(4);
  });

  it('counts a node’s values once it joins the live list', () => {
    table.apply(record('d', 't', { TotalConnections: 5 }));
    expect(usage.get('t', 'TotalConnections')).toBe(0);
    live.add('d');
    table.checkAlive();
    expect(usage.get('t', 'TotalConnections')).toBe(5);
  });

  it('ignores its own keys (its previous run’s) and hostile values, keeping what was there', () => {
    table.apply(record('a', 't', { TotalConnections: 100 }));
    table.apply(record('b', 't', { TotalConnections: 3 }));
    const key = usageKey('b', 't');
    for (const bad of [
      'not json',
      'null',
      '[]',
      { node: 'b', tenant: 't' },
      { node: 'b', tenant: 't', usage: [] },
      { node: 'b', tenant: 't', usage: { TotalConnections: -1 } },
      { node: 'b', tenant: 't', usage: { TotalConnections: '9' } },
      '{"node": "b", "tenant": "t", "usage": {"TotalConnections": 1e400}}', // Infinity
      // Speaking for another key: another node's, or another tenant's.
      { node: 'c', tenant: 't', usage: { TotalConnections: 9 } },
      { node: 'b', tenant: 'u', usage: { TotalConnections: 9 } },
      { node: 'b', tenant: 't', usage: { TotalConnections: 9 }, pad: 'x'.repeat(5000) },
    ])
      table.apply(put(key, bad));
    expect(table.ignored).toBe(11);
    expect(usage.get('t', 'TotalConnections')).toBe(3);
    // A resource this version does not know (a newer node's) is skipped, the rest is read.
    table.apply(record('b', 't', { TotalConnections: 2, TotalSomethingNew: 5 }));
    expect(usage.get('t', 'TotalConnections')).toBe(2);
    // A delete of a key never seen changes nothing.
    table.apply(del(usageKey('c', 'nobody')));
    expect(table.size).toBe(1);
  });

  it('parses records whose key is hashed (long tenant ids) and that of a node id that is no plain token', () => {
    const tenant = 't'.repeat(300);
    const key = usageKey('host.example-1883', tenant);
    expect(key).toMatch(/^=[-_a-zA-Z0-9]+\.h\.[-_a-zA-Z0-9]{43}$/);
    const parsed = parseUsage(key, Buffer.from(JSON.stringify({ node: 'host.example-1883', tenant, usage: { TotalConnections: 1 } })));
    expect(parsed?.tenant).toBe(tenant);
    expect(parsed?.values[0]).toBe(1);
  });

  it('standalone, a usage read is the node’s own', () => {
    const alone = new TenantUsage(() => 0);
    alone.add('t', 'TotalConnections', 2);
    expect(alone.clusterWide).toBe(false);
    expect(alone.get('t', 'TotalConnections')).toBe(2);
    expect(alone.usedElsewhere('t')).toBe(false);
  });
});
