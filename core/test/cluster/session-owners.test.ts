import { controlSubject, rendezvous, sessionKey } from '../../src/cluster/session-owners';

/** KV keys allow only `[-/_=.a-zA-Z0-9]`. */
const KEY = /^[-/_=.a-zA-Z0-9]+$/;

describe('session registry keys', () => {
  it('are <base64url(tenant)>.<base64url(client id)>, the same client id of two tenants apart', () => {
    expect(sessionKey('acme', 'dev-1')).toBe(`${Buffer.from('acme').toString('base64url')}.${Buffer.from('dev-1').toString('base64url')}`);
    expect(sessionKey('t1', 'same')).not.toBe(sessionKey('t2', 'same'));
    // The split between tenant and client id is part of the key: no two pairs collide by concatenation.
    expect(sessionKey('ab', 'c')).not.toBe(sessionKey('a', 'bc'));
    expect(sessionKey('', '')).toBe('_._');
  });

  it('hash a pair too long for a key, and stay within the KV alphabet', () => {
    const long = sessionKey('tenant', 'x'.repeat(65_535));
    expect(long).toMatch(/^h\.[-_a-zA-Z0-9]{43}$/);
    expect(sessionKey('tenant', 'y'.repeat(65_535))).not.toBe(long);
    for (const id of ['ü/+#', 'a.b', ' ', '*', '>']) expect(sessionKey('t', id)).toMatch(KEY);
  });

  it('name the control subject of a node with the node token (a dotted id is encoded)', () => {
    expect(controlSubject('node-a')).toBe('bifro.ctl.node-a');
    expect(controlSubject('host.example')).toMatch(/^bifro\.ctl\.=[-_a-zA-Z0-9]+$/);
  });
});

describe('rendezvous hashing of orphaned sessions', () => {
  const nodes = ['n1', 'n2', 'n3', 'n4'];
  const keys = Array.from({ length: 4000 }, (_, i) => sessionKey('t', `c${i}`));

  it('gives every key to one node, the same whatever the order of the list', () => {
    for (const k of keys.slice(0, 200)) expect(rendezvous([...nodes].reverse(), k)).toBe(rendezvous(nodes, k));
    expect(rendezvous([], 'k')).toBeUndefined();
  });

  it('spreads keys evenly over the nodes', () => {
    const counts = new Map<string, number>();
    for (const k of keys) counts.set(rendezvous(nodes, k)!, (counts.get(rendezvous(nodes, k)!) ?? 0) + 1);
    for (const n of nodes) expect(counts.get(n)!).toBeGreaterThan(800);
  });

  it('moves only the keys of a node that leaves', () => {
    const without = nodes.filter((n) => n !== 'n3');
    for (const k of keys) {
      const before = rendezvous(nodes, k)!;
      const after = rendezvous(without, k)!;
      if (before !== 'n3') expect(after).toBe(before);
      else expect(without).toContain(after);
    }
  });
});
