import { nodeToken, routeKey } from '../../src/cluster/routes';

/** KV keys allow only `[-/_=.a-zA-Z0-9]`; a route key is three tokens, the node's first. */
const KEY = /^[-/_=.a-zA-Z0-9]+$/;

describe('route keys of bifro_routes', () => {
  it('are <node>.<base64url(tenant)>.<base64url(filter)>, `_` for an empty tenant', () => {
    expect(routeKey('node-a', 'acme', 'a/+/#')).toBe(
      `node-a.${Buffer.from('acme').toString('base64url')}.${Buffer.from('a/+/#').toString('base64url')}`,
    );
    expect(routeKey('node-a', '', 'x').split('.')[1]).toBe('_');
  });

  it('encode a node id that is no plain token, so one node prefix never covers another', () => {
    expect(nodeToken('host.example-1883')).toMatch(/^=[-_a-zA-Z0-9]+$/);
    expect(routeKey('host.example-1883', 't', 'f').split('.')).toHaveLength(3);
  });

  it('hash what would be too long, and stay within the KV alphabet', () => {
    const long = routeKey('n1', 'tenant', `${'level/'.repeat(100)}#`);
    expect(long).toMatch(/^n1\.h\.[-_a-zA-Z0-9]{43}$/);
    expect(routeKey('n1', 'tenant', `${'level/'.repeat(100)}+`)).not.toBe(long);
    for (const k of [long, routeKey('ü node', 'tënant', 'ä/ö/#'), routeKey('n', ' ', '/')]) expect(k).toMatch(KEY);
  });
});
