import type { SubscriptionOptions } from '@bifro/spi';

import { LocalRouter } from '../../src/routing/local-router';
import type { DistSubscription } from '../../src/routing/tenant-dist';

const options: SubscriptionOptions = { qos: 1, noLocal: false, retainAsPublished: false, retainHandling: 0 };
const sub = (clientId: string, filter: string): DistSubscription<string> => ({ subscriber: clientId, clientId, filter, options });

describe('LocalRouter', () => {
  it('keeps tenants apart: same client id and filter in two tenants are unrelated', () => {
    const dist = new LocalRouter<string>();
    dist.addRoute('acme', sub('c1', 'a/#'));
    dist.addRoute('globex', sub('c1', 'a/#'));
    dist.addRoute('globex', sub('c2', '$share/g/a/+'));
    expect(dist.match('acme', 'a/b').direct.map((d) => d.clientId)).toEqual(['c1']);
    expect(dist.match('acme', 'a/b').groups).toHaveLength(0);
    expect(dist.match('globex', 'a/b').groups).toHaveLength(1);
    expect(dist.match('initech', 'a/b')).toEqual({ direct: [], groups: [] });
    expect(dist.tenantCount).toBe(2);

    expect(dist.removeAll('acme', 'c1')).toBe(1);
    expect(dist.match('acme', 'a/b').direct).toHaveLength(0);
    expect(dist.match('globex', 'a/b').direct.map((d) => d.clientId)).toEqual(['c1']);
  });

  it('drops a tenant index once its last subscription is gone', () => {
    const dist = new LocalRouter<string>();
    dist.addRoute('acme', sub('c1', 'a'));
    dist.addRoute('acme', sub('c2', 'b'));
    expect(dist.removeRoute('acme', 'c1', 'a')).toBe(true);
    expect(dist.peek('acme')).toBeDefined();
    expect(dist.removeRoute('acme', 'c2', 'b')).toBe(true);
    expect(dist.peek('acme')).toBeUndefined();
    expect(dist.tenantCount).toBe(0);
    expect(dist.removeRoute('acme', 'c2', 'b')).toBe(false);
    expect(dist.removeAll('acme', 'c2')).toBe(0);
  });

  it('leaves no empty index behind after a refused first subscription or a match', () => {
    const dist = new LocalRouter<string>();
    expect(dist.addRoute('acme', sub('c1', '$share//a'))).toEqual({ rejected: 'invalid-filter' });
    dist.match('other', 'a');
    expect(dist.tenantCount).toBe(0);
  });

  it('hands out one index per tenant and drops it only when empty', () => {
    const dist = new LocalRouter<string>();
    const acme = dist.tenant('acme');
    expect(dist.tenant('acme')).toBe(acme);
    expect([...dist.tenantIds()]).toEqual(['acme']);
    acme.subscribe(sub('c1', 'a'));
    expect(dist.dropIfEmpty('acme')).toBe(false);
    acme.unsubscribe('c1', 'a');
    expect(dist.dropIfEmpty('acme')).toBe(true);
    expect(dist.dropIfEmpty('acme')).toBe(false);
  });

  it('passes the cache options to every tenant', () => {
    const dist = new LocalRouter<string>({ cacheSize: 0 });
    dist.addRoute('acme', sub('c1', 'a'));
    dist.match('acme', 'a');
    expect(dist.tenant('acme').cachedTopicCount).toBe(0);
  });
});
