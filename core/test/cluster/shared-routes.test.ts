import { createLogger } from '../../src/base/logger';
import type { LocalGroup } from '../../src/cluster/cluster-view';
import { nodeWeight, routeKey, RouteTable, type RemoteGroup, type RouteRecord } from '../../src/cluster/routes';
import { servedHere } from '../../src/routing/shared-group';
import { TopicTrie } from '../../src/routing/topic-trie';

const SELF = 'self';
const self = { id: SELF, weight: nodeWeight(SELF) };

function put(record: RouteRecord): { key: string; operation: 'PUT'; json: <T>() => T } {
  return { key: routeKey(record.node, record.tenant, record.filter), operation: 'PUT', json: <T>() => record as T };
}

function del(node: string, tenant: string, filter: string): { key: string; operation: 'DEL'; json: <T>() => T } {
  return { key: routeKey(node, tenant, filter), operation: 'DEL', json: <T>() => ({}) as T };
}

/** A local group with `online` connected and `offline` disconnected members. */
function local(shareKind: 'share' | 'oshare', online: number, offline = 0): LocalGroup {
  const members = [
    ...Array.from({ length: online }, () => ({ subscriber: { connected: true } })),
    ...Array.from({ length: offline }, () => ({ subscriber: { connected: false } })),
  ];
  return { shareKind, group: 'g', topicFilter: 's/+', members };
}

describe('shared groups in the route table, and the node picked per message', () => {
  let table: RouteTable;
  let dead: Set<string>;
  const alive = (node: string): boolean => !dead.has(node);
  beforeEach(() => {
    table = new RouteTable(SELF, () => new TopicTrie<string>(), createLogger({ level: 'silent' }));
    dead = new Set();
  });

  const groupsOf = (tenant: string, topic: string): RemoteGroup[] => {
    const out: RemoteGroup[] = [];
    table.groupsFor(tenant, topic, (g) => out.push(g));
    return out;
  };

  it('keys a group by its filter as sent, and keeps its member count per node, apart from plain routes and tenants', () => {
    expect(routeKey('n2', 't1', '$share/g/s/+')).toBe(
      `n2.${Buffer.from('t1').toString('base64url')}.${Buffer.from('$share/g/s/+').toString('base64url')}`,
    );
    table.apply(put({ node: 'n2', tenant: 't1', filter: '$share/g/s/+', members: 2 }));
    table.apply(put({ node: 'n3', tenant: 't1', filter: '$share/g/s/+', members: 1 }));
    table.apply(put({ node: 'n3', tenant: 't1', filter: '$oshare/g/s/+', members: 1 }));
    table.apply(put({ node: 'n2', tenant: 't1', filter: '$share/g/s/+', members: 5 }));
    table.apply(put({ node: 'n2', tenant: 't2', filter: 's/#' }));
    // Refused: a shared filter without a count, a plain one with one, its own records.
    table.apply(put({ node: 'n4', tenant: 't1', filter: '$share/h/s/+' }));
    table.apply(put({ node: 'n4', tenant: 't1', filter: 's/x', members: 1 }));
    table.apply(put({ node: SELF, tenant: 't1', filter: '$share/g/s/+', members: 1 }));
    expect(table.size).toBe(4);
    const groups = groupsOf('t1', 's/1');
    expect(groups.map((g) => `${g.shareKind}/${g.group}/${g.topicFilter}`).sort()).toEqual(['oshare/g/s/+', 'share/g/s/+']);
    const share = groups.find((g) => g.shareKind === 'share')!;
    expect([...share.nodes].map(([n, v]) => [n, v.members])).toEqual([
      ['n2', 5],
      ['n3', 1],
    ]);
    expect(groupsOf('t1', 'other')).toEqual([]);
    expect(groupsOf('t2', 's/1')).toEqual([]);
    expect(table.hasGroups('t2')).toBe(false);
    const nodes: string[] = [];
    table.nodesFor('t1', 's/1', (n) => nodes.push(n));
    expect(nodes).toEqual([]);

    table.apply(del('n2', 't1', '$share/g/s/+'));
    table.apply(del('n3', 't1', '$share/g/s/+'));
    expect(groupsOf('t1', 's/1').map((g) => g.shareKind)).toEqual(['oshare']);
    table.apply(del('n3', 't1', '$oshare/g/s/+'));
    expect(table.hasGroups('t1')).toBe(false);
    expect(table.has('t1')).toBe(false);
    expect(table.size).toBe(1);
  });

  it('$share: weighted round robin by member count over the live nodes, this one left out while none of its members is connected', () => {
    table.apply(put({ node: 'n2', tenant: 't', filter: '$share/g/s/+', members: 2 }));
    table.apply(put({ node: 'n3', tenant: 't', filter: '$share/g/s/+', members: 1 }));
    const [g] = groupsOf('t', 's/1');
    const tally = (here: LocalGroup | undefined, n: number): Record<string, number> => {
      const out: Record<string, number> = {};
      for (let i = 0; i < n; i++) {
        const node = g!.pick(self, here, alive, `p${i}`, 's/1')!;
        out[node] = (out[node] ?? 0) + 1;
      }
      return out;
    };
    expect(tally(local('share', 1), 400)).toEqual({ self: 100, n2: 200, n3: 100 });
    expect(tally(local('share', 0, 3), 300)).toEqual({ n2: 200, n3: 100 });
    dead.add('n2');
    expect(tally(local('share', 1), 10)).toEqual({ self: 5, n3: 5 });
    dead.add('n3');
    // Nobody else: its offline members still get it (queued), as a standalone broker does.
    expect(tally(local('share', 0, 1), 3)).toEqual({ self: 3 });
    expect(g!.pick(self, undefined, alive, 'p', 's/1')).toBeUndefined();
  });

  it('$oshare: one node per (publisher, topic), stable while the nodes with members stay, and only a leaving node moves its keys', () => {
    table.apply(put({ node: 'n2', tenant: 't', filter: '$oshare/g/s/+', members: 1 }));
    table.apply(put({ node: 'n3', tenant: 't', filter: '$oshare/g/s/+', members: 4 }));
    const [g] = groupsOf('t', 's/1');
    const here = local('oshare', 1);
    const keys = Array.from({ length: 300 }, (_, i) => [`pub-${i}`, `s/${i % 7}`] as const);
    const before = keys.map(([p, t]) => g!.pick(self, here, alive, p, t));
    // Asked again, in another order: the same answers.
    expect([...keys].reverse().map(([p, t]) => g!.pick(self, here, alive, p, t))).toEqual([...before].reverse());
    for (const n of ['self', 'n2', 'n3']) expect(before.filter((b) => b === n).length).toBeGreaterThan(50);
    // A member count change on a node is no membership change of the node set.
    table.apply(put({ node: 'n3', tenant: 't', filter: '$oshare/g/s/+', members: 1 }));
    expect(keys.map(([p, t]) => g!.pick(self, here, alive, p, t))).toEqual(before);
    dead.add('n2');
    const after = keys.map(([p, t]) => g!.pick(self, here, alive, p, t));
    keys.forEach((_, i) => {
      if (before[i] !== 'n2') expect(after[i]).toBe(before[i]);
      else expect(after[i]).not.toBe('n2');
    });
    // Without local members this node is no candidate.
    expect(keys.some(([p, t]) => g!.pick(self, undefined, alive, p, t) === SELF)).toBe(false);
  });

  it('serves a forwarded message only to the local groups its sender named', () => {
    const groups = [
      { shareKind: 'share' as const, group: 'g', topicFilter: 's/+' },
      { shareKind: 'oshare' as const, group: 'g', topicFilter: 's/+' },
      { shareKind: 'share' as const, group: 'h', topicFilter: 's/+' },
    ];
    expect(servedHere(groups, undefined)).toEqual([true, true, true]);
    expect(servedHere(groups, [])).toEqual([false, false, false]);
    expect(servedHere(groups, [{ shareKind: 'oshare', group: 'g', topicFilter: 's/+' }])).toEqual([false, true, false]);
  });
});
