import type { SubscriptionOptions } from '@bifro/spi';

import { ClusterRouter } from '../../src/routing/cluster-router';
import { LocalRouter } from '../../src/routing/local-router';
import type { Route } from '../../src/routing/router';
import { isSharedFilter } from '../../src/routing/topic';

const options: SubscriptionOptions = { qos: 1, noLocal: false, retainAsPublished: false, retainHandling: 0 };
const route = (clientId: string, filter: string): Route<string> => ({ subscriber: clientId, clientId, filter, options });

describe('ClusterRouter (the routes a node announces)', () => {
  let router: ClusterRouter<string>;
  let changes: string[];
  beforeEach(() => {
    router = new ClusterRouter<string>(new LocalRouter<string>());
    changes = [];
    router.listen((tenant, filter, members) =>
      changes.push(`${members > 0 ? '+' : '-'}${tenant}:${filter}${isSharedFilter(filter) ? `=${members}` : ''}`),
    );
  });

  it('announces a (tenant, filter) at its first subscriber and withdraws it after its last', () => {
    router.addRoute('t1', route('c1', 'a/+'));
    router.addRoute('t1', route('c2', 'a/+'));
    // The same client and filter again replaces its route: still one subscriber.
    router.addRoute('t1', route('c1', 'a/+'));
    router.addRoute('t2', route('c1', 'a/+'));
    expect(changes).toEqual(['+t1:a/+', '+t2:a/+']);
    expect(router.removeRoute('t1', 'c1', 'a/+')).toBe(true);
    expect(router.removeRoute('t1', 'c1', 'a/+')).toBe(false);
    expect(changes).toEqual(['+t1:a/+', '+t2:a/+']);
    router.removeRoute('t1', 'c2', 'a/+');
    expect(changes).toEqual(['+t1:a/+', '+t2:a/+', '-t1:a/+']);
    expect([...router.current()]).toEqual([['t2', 'a/+', 1]]);
  });

  it('withdraws every filter of an ended session, and keeps $SYS node-local, shared groups on $SYS too', () => {
    router.addRoute('t1', route('c1', 'x/#'));
    router.addRoute('t1', route('c1', 'y'));
    router.addRoute('t1', route('c1', '$SYS/#'));
    router.addRoute('t1', route('c1', '$share/g/$SYS/x'), { maxGroupMembers: 5 });
    router.addRoute('t1', route('c2', 'y'));
    expect(changes).toEqual(['+t1:x/#', '+t1:y']);
    expect(router.removeAll('t1', 'c1')).toBe(4);
    expect(changes).toEqual(['+t1:x/#', '+t1:y', '-t1:x/#']);
    expect(router.routesOf('t1', 'c2').map((r) => r.filter)).toEqual(['y']);
    expect(router.match('t1', 'y').direct.map((d) => d.clientId)).toEqual(['c2']);
  });

  it('announces each shared group (kind, group, filter) with its local member count, until its last member goes', () => {
    router.addRoute('t1', route('c1', '$share/g/z'), { maxGroupMembers: 5 });
    router.addRoute('t1', route('c2', '$share/g/z'), { maxGroupMembers: 5 });
    // Replaced: still two members.
    router.addRoute('t1', route('c2', '$share/g/z'), { maxGroupMembers: 5 });
    router.addRoute('t1', route('c1', '$oshare/g/z'), { maxGroupMembers: 5 });
    router.addRoute('t2', route('c1', '$share/g/z'), { maxGroupMembers: 5 });
    expect(changes).toEqual(['+t1:$share/g/z=1', '+t1:$share/g/z=2', '+t1:$oshare/g/z=1', '+t2:$share/g/z=1']);
    expect(new Set(router.current())).toEqual(
      new Set([
        ['t1', '$share/g/z', 2],
        ['t1', '$oshare/g/z', 1],
        ['t2', '$share/g/z', 1],
      ]),
    );
    changes.length = 0;
    router.removeRoute('t1', 'c2', '$share/g/z');
    expect(router.removeAll('t1', 'c1')).toBe(2);
    expect(changes.sort()).toEqual(['+t1:$share/g/z=1', '-t1:$oshare/g/z=0', '-t1:$share/g/z=0']);
    expect([...router.current()]).toEqual([['t2', '$share/g/z', 1]]);
  });

  it('announces nothing for a refused route', () => {
    expect(router.addRoute('t1', route('c1', 'a/#/b')).rejected).toBe('invalid-filter');
    expect(changes).toEqual([]);
    expect(router.tenantCount).toBe(0);
  });
});
