import type { SubscriptionOptions } from '@bifro/spi';

import { LocalRouter } from '../../src/routing/local-router';
import type { Route, Router } from '../../src/routing/router';

const options: SubscriptionOptions = { qos: 1, noLocal: false, retainAsPublished: false, retainHandling: 0 };
const route = (clientId: string, filter: string, o: Partial<SubscriptionOptions> = {}): Route<string> => ({
  subscriber: clientId,
  clientId,
  filter,
  options: { ...options, ...o },
});

/** The engine, the handlers and the session registry see only `Router`: exercise the default through it. */
describe('Router (LocalRouter through the interface)', () => {
  let router: Router<string>;
  beforeEach(() => {
    router = new LocalRouter<string>();
  });

  it('matches a tenant + topic into direct deliveries aggregated per client and one entry per shared group', () => {
    router.addRoute('acme', route('c1', 'a/+', { qos: 0, subscriptionId: 1 }));
    router.addRoute('acme', route('c1', 'a/#', { qos: 2, subscriptionId: 2 }));
    router.addRoute('acme', route('c2', 'a/b', { noLocal: true }));
    router.addRoute('acme', route('m1', '$share/g/a/#'), { maxGroupMembers: 2 });
    router.addRoute('acme', route('m2', '$share/g/a/#'), { maxGroupMembers: 2 });
    expect(router.addRoute('acme', route('m3', '$share/g/a/#'), { maxGroupMembers: 2 })).toEqual({ rejected: 'group-full' });

    const set = router.match('acme', 'a/b');
    const c1 = set.direct.find((d) => d.clientId === 'c1')!;
    expect(c1.qos).toBe(2);
    expect([...c1.subscriptionIds].sort()).toEqual([1, 2]);
    expect(set.direct.find((d) => d.clientId === 'c2')!.localAllowed).toBeUndefined();
    expect(set.groups).toHaveLength(1);
    expect(set.groups[0]!.members.map((m) => m.clientId).sort()).toEqual(['m1', 'm2']);
    expect(['m1', 'm2']).toContain(set.groups[0]!.pick('p', 'a/b', () => true)!.clientId);
    // Cached: the same frozen set until a route that can match changes.
    expect(router.match('acme', 'a/b')).toBe(set);
    router.addRoute('acme', route('c3', 'a/b'));
    expect(router.match('acme', 'a/b')).not.toBe(set);
    expect(router.match('acme', 'a/b').direct).toHaveLength(3);
  });

  it('replaces a route with the same client id and filter as sent', () => {
    expect(router.addRoute('acme', route('c1', 'a'))).toEqual({ replaced: false });
    expect(router.addRoute('acme', route('c1', 'a', { qos: 2 }))).toEqual({ replaced: true });
    expect(router.routesOf('acme', 'c1').map((r) => r.options.qos)).toEqual([2]);
    expect(router.routesOf('acme', 'nobody')).toEqual([]);
    expect(router.routesOf('initech', 'c1')).toEqual([]);
  });

  it('keeps tenants apart and drops a tenant with its last route', () => {
    router.addRoute('acme', route('c1', 'a/#'));
    router.addRoute('globex', route('c1', 'a/#'));
    router.addRoute('globex', route('c1', 'b'));
    expect(router.tenantCount).toBe(2);
    expect([...router.tenantIds()].sort()).toEqual(['acme', 'globex']);

    expect(router.removeRoute('acme', 'c1', 'a/#')).toBe(true);
    expect(router.match('acme', 'a/b').direct).toHaveLength(0);
    expect(router.match('globex', 'a/b').direct).toHaveLength(1);
    expect(router.tenantCount).toBe(1);

    expect(router.removeAll('globex', 'c1')).toBe(2);
    expect(router.tenantCount).toBe(0);
    expect(router.removeRoute('globex', 'c1', 'b')).toBe(false);
    expect(router.removeAll('globex', 'c1')).toBe(0);
    expect(router.dropIfEmpty('globex')).toBe(false);
  });

  it('refuses malformed routes without leaving an index behind, and matching creates none', () => {
    expect(router.addRoute('acme', route('c1', '$share//a'))).toEqual({ rejected: 'invalid-filter' });
    expect(router.addRoute('acme', route('c1', 'a/#/b'))).toEqual({ rejected: 'invalid-filter' });
    expect(router.match('acme', 'a').direct).toHaveLength(0);
    expect(router.tenantCount).toBe(0);
  });
});
