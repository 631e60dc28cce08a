import {
  ACL_RULES_ATTR,
  ATTACHED_ACL_RULES_CACHE_SIZE,
  aclRulesAttr,
  attachedAclRules,
  compileAclRules,
  parseAclRules,
  type AccessAction,
  type AclRule,
  type ClientInfo,
} from '@bifro/spi';

const client = (over: Partial<ClientInfo> = {}): ClientInfo => ({
  tenantId: 'acme',
  userId: 'alice',
  clientId: 'c1',
  protocolVersion: 5,
  remoteAddress: '127.0.0.1',
  remotePort: 1,
  listener: 'tcp',
  attrs: {},
  ...over,
});

const pub = (topic: string, retain = false): AccessAction => ({ type: 'publish', topic, qos: 1, retain });
const sub = (filter: string): AccessAction => ({ type: 'subscribe', filter, qos: 1 });
const allow = (action: AclRule['action'], topic: string): AclRule => ({ permission: 'allow', action, topic });
const deny = (action: AclRule['action'], topic: string): AclRule => ({ permission: 'deny', action, topic });

describe('acl rules: publish matching', () => {
  const cases: Array<[pattern: string, topic: string, matches: boolean]> = [
    ['a/b', 'a/b', true],
    ['a/b', 'a/c', false],
    ['a/b', 'a/b/c', false],
    ['a/b', 'a', false],
    ['a/+', 'a/b', true],
    ['a/+', 'a/', true],
    ['a/+', 'a', false],
    ['a/+', 'a/b/c', false],
    ['a/#', 'a', true],
    ['a/#', 'a/b/c', true],
    ['a/#', 'ab', false],
    ['#', 'x/y', true],
    ['+/+', 'x/y', true],
    ['+', '/', false],
    ['+/+', '/', true],
    ['/+', '/x', true],
    ['#', '$SYS/x', false],
    ['+/x', '$SYS/x', false],
    ['$SYS/#', '$SYS/x', true],
    ['$SYS/+', '$SYS/x', true],
    ['a/+/c', 'a/b/c', true],
    ['a/+/c', 'a/b/d', false],
    ['sensors', 'sensor', false],
  ];
  it.each(cases)('pattern %s vs topic %s → %s', (pattern, topic, matches) => {
    const rules = compileAclRules([allow('publish', pattern)]);
    expect(rules.check(client(), pub(topic))).toBe(matches ? 'granted' : 'defer');
  });
});

describe('acl rules: order and actions', () => {
  it('the first rule that matches decides', () => {
    const rules = compileAclRules([deny('publish', 'a/secret'), allow('publish', 'a/#'), deny('publish', 'a/late')]);
    expect(rules.check(client(), pub('a/secret'))).toBe('denied');
    expect(rules.check(client(), pub('a/x'))).toBe('granted');
    expect(rules.check(client(), pub('a/late'))).toBe('granted');
    expect(rules.check(client(), pub('b'))).toBe('defer');
    expect(rules.size).toBe(3);
  });

  it('keeps the order across the index buckets (literal first level, wildcard first level, substituted)', () => {
    const rules = compileAclRules([
      allow('publish', 'x/1'),
      deny('publish', '+/1'),
      allow('publish', 'x/2'),
      deny('publish', '%u/2'),
      allow('publish', 'alice/2'),
      allow('publish', 'x/#'),
    ]);
    expect(rules.check(client(), pub('x/1'))).toBe('granted');
    expect(rules.check(client(), pub('y/1'))).toBe('denied');
    expect(rules.check(client(), pub('x/2'))).toBe('granted');
    expect(rules.check(client(), pub('alice/2'))).toBe('denied');
    expect(rules.check(client({ userId: 'bob' }), pub('alice/2'))).toBe('granted');
    expect(rules.check(client(), pub('x/3'))).toBe('granted');
  });

  it('publish rules do not answer subscribe, subscribe rules do not answer publish, all answers both', () => {
    const rules = compileAclRules([allow('publish', 'p/#'), allow('subscribe', 's/#'), allow('all', 'a/#')]);
    expect(rules.check(client(), sub('p/x'))).toBe('defer');
    expect(rules.check(client(), pub('s/x'))).toBe('defer');
    expect(rules.check(client(), pub('p/x'))).toBe('granted');
    expect(rules.check(client(), sub('s/x'))).toBe('granted');
    expect(rules.check(client(), pub('a/x'))).toBe('granted');
    expect(rules.check(client(), pub('a/x', true))).toBe('granted');
    expect(rules.check(client(), sub('a/x'))).toBe('granted');
  });

  it('connect and unsubscribe defer', () => {
    const rules = compileAclRules([allow('all', '#'), deny('all', '#')]);
    expect(rules.check(client(), { type: 'connect' })).toBe('defer');
    expect(rules.check(client(), { type: 'unsubscribe', filter: '#' })).toBe('defer');
  });

  it('no rules: everything defers', () => {
    const rules = compileAclRules([]);
    expect(rules.size).toBe(0);
    expect(rules.check(client(), pub('a'))).toBe('defer');
    expect(rules.check(client(), sub('#'))).toBe('defer');
  });
});

describe('acl rules: retain', () => {
  it('deny retain forbids retaining and leaves the publish allowed', () => {
    const rules = compileAclRules([deny('retain', '#'), allow('all', 'sensors/#')]);
    expect(rules.check(client(), pub('sensors/t'))).toBe('granted');
    expect(rules.check(client(), pub('sensors/t', true))).toBe('denied');
  });

  it('a retained publish needs both questions granted; a retain rule does not answer a plain publish', () => {
    const rules = compileAclRules([allow('publish', 'p/#'), allow('retain', 'p/keep/#'), allow('retain', 'r/#')]);
    expect(rules.check(client(), pub('p/x', true))).toBe('defer');
    expect(rules.check(client(), pub('p/keep/x', true))).toBe('granted');
    expect(rules.check(client(), pub('r/x'))).toBe('defer');
    expect(rules.check(client(), pub('r/x', true))).toBe('defer');
  });

  it('a denied publish is denied whatever the retain rules say', () => {
    const rules = compileAclRules([allow('retain', '#'), deny('publish', 'x')]);
    expect(rules.check(client(), pub('x', true))).toBe('denied');
  });

  it('allow retain before deny retain narrows the ban', () => {
    const rules = compileAclRules([allow('retain', 'status/#'), deny('retain', '#'), allow('publish', '#')]);
    expect(rules.check(client(), pub('status/a', true))).toBe('granted');
    expect(rules.check(client(), pub('other', true))).toBe('denied');
    expect(rules.check(client(), pub('other'))).toBe('granted');
  });
});

describe('acl rules: subscribe', () => {
  const covers: Array<[pattern: string, filter: string, covered: boolean]> = [
    ['a/#', 'a/+/b', true],
    ['a/#', 'a', true],
    ['a/#', 'a/#', true],
    ['a/+', 'a/#', false],
    ['a/+', 'a/+', true],
    ['a/+', 'a/b', true],
    ['a/b', 'a/+', false],
    ['a/+/c', 'a/+/c', true],
    ['a/+/c', 'a/+/+', false],
    ['#', '#', true],
    ['#', '+/x', true],
    ['#', '$SYS/#', false],
    ['+/#', '$SYS/x', false],
    ['$SYS/#', '$SYS/broker/+', true],
    ['a/+/#', 'a/#', false],
    ['a/+/#', 'a/b/#', true],
    ['a', 'a/#', false],
  ];
  it.each(covers)('allow %s covers %s → %s', (pattern, filter, covered) => {
    const rules = compileAclRules([allow('subscribe', pattern)]);
    expect(rules.check(client(), sub(filter))).toBe(covered ? 'granted' : 'defer');
  });

  const overlaps: Array<[pattern: string, filter: string, overlap: boolean]> = [
    ['a/secret', 'a/+', true],
    ['a/secret', '#', true],
    ['a/secret', '+/secret', true],
    ['a/secret', 'a/#', true],
    ['a/secret', 'a/public', false],
    ['a/secret', 'a/secret/x', false],
    ['a/secret/#', 'a/secret', true],
    ['a/secret/#', 'a/+/x', true],
    ['a/+', 'a', false],
    ['a/+', 'a/#', true],
    ['a', 'a/#', true],
    ['+/x', 'a/+', true],
    ['+/x', 'a/y', false],
    ['#', '$SYS/#', false],
    ['$SYS/#', '#', false],
    ['$SYS/#', '+/x', false],
    ['$SYS/x', '$SYS/+', true],
  ];
  it.each(overlaps)('deny %s overlaps %s → %s', (pattern, filter, overlap) => {
    const rules = compileAclRules([deny('subscribe', pattern), allow('subscribe', '#'), allow('subscribe', '$SYS/#')]);
    expect(rules.check(client(), sub(filter))).toBe(overlap ? 'denied' : 'granted');
  });

  it('a deny cannot be dodged with a wider filter', () => {
    const rules = compileAclRules([deny('subscribe', 'admin/#'), allow('subscribe', '#')]);
    for (const f of ['#', '+/+', '+/#', 'admin/+', 'admin']) expect(rules.check(client(), sub(f))).toBe('denied');
    expect(rules.check(client(), sub('public/#'))).toBe('granted');
  });

  it('$share and $oshare filters are checked on their inner filter', () => {
    const rules = compileAclRules([deny('subscribe', 'secret/#'), allow('subscribe', 'jobs/#')]);
    expect(rules.check(client(), sub('$share/g1/jobs/+'))).toBe('granted');
    expect(rules.check(client(), sub('$oshare/g1/jobs/a'))).toBe('granted');
    expect(rules.check(client(), sub('$share/g1/secret/x'))).toBe('denied');
    expect(rules.check(client(), sub('$share/g1/#'))).toBe('denied');
    expect(rules.check(client(), sub('$share/jobs/other'))).toBe('defer');
  });

  it('$-topics are not reached by leading wildcards on publish or subscribe', () => {
    const rules = compileAclRules([allow('all', '#'), allow('all', '+/#')]);
    expect(rules.check(client(), pub('$SYS/x'))).toBe('defer');
    expect(rules.check(client(), sub('$SYS/#'))).toBe('defer');
    expect(rules.check(client(), pub('x/y'))).toBe('granted');
  });
});

describe('acl rules: substitution', () => {
  it('replaces %t %u %c by the tenant, user and client id', () => {
    const rules = compileAclRules([
      allow('publish', 't/%t/u/%u/c/%c'),
      allow('subscribe', 'devices/%c/#'),
      allow('publish', 'pre-%u-post/x'),
    ]);
    expect(rules.check(client(), pub('t/acme/u/alice/c/c1'))).toBe('granted');
    expect(rules.check(client({ userId: 'bob' }), pub('t/acme/u/alice/c/c1'))).toBe('defer');
    expect(rules.check(client({ tenantId: 'other' }), pub('t/acme/u/alice/c/c1'))).toBe('defer');
    expect(rules.check(client(), sub('devices/c1/+'))).toBe('granted');
    expect(rules.check(client(), sub('devices/c2/+'))).toBe('defer');
    expect(rules.check(client(), pub('pre-alice-post/x'))).toBe('granted');
  });

  it('any other % is literal text', () => {
    const rules = compileAclRules([allow('publish', '100%/%x/%')]);
    expect(rules.check(client(), pub('100%/%x/%'))).toBe('granted');
  });

  it('a substituted + or # is literal and never widens the pattern', () => {
    const rules = compileAclRules([allow('all', 'sensors/%u/#'), allow('publish', 'inbox/%c')]);
    const plus = client({ userId: '+', clientId: '#' });
    expect(rules.check(plus, pub('sensors/bob/x'))).toBe('defer');
    expect(rules.check(plus, sub('sensors/+/#'))).toBe('defer');
    expect(rules.check(plus, sub('sensors/bob/#'))).toBe('defer');
    expect(rules.check(plus, pub('inbox/anything'))).toBe('defer');
    expect(rules.check(client({ userId: 'a+b' }), pub('sensors/a+b/x'))).toBe('defer');
    // deny rules with a wildcard value deny nothing either: the topics they name cannot exist
    const withDeny = compileAclRules([deny('publish', 'private/%u'), allow('publish', 'private/#')]);
    expect(withDeny.check(plus, pub('private/bob'))).toBe('granted');
  });

  it('a value with / matches nothing: a client id or user id cannot reach into another subtree', () => {
    // The acl-file README's own pattern: each device its own subtree, the rest of devices/ denied.
    const rules = compileAclRules([allow('all', 'clients/%c/#'), deny('all', 'clients/#')]);
    const telemetry = client({ clientId: 'sensor1/telemetry' });
    expect(rules.check(telemetry, pub('clients/sensor1/telemetry/temp'))).toBe('denied');
    expect(rules.check(telemetry, sub('clients/sensor1/telemetry/temp'))).toBe('denied');
    expect(rules.check(telemetry, sub('clients/sensor1/telemetry/#'))).toBe('denied');
    const cmd = client({ clientId: 'sensor1/cmd' });
    expect(rules.check(cmd, pub('clients/sensor1/cmd'))).toBe('denied');
    expect(rules.check(cmd, pub('clients/sensor1/cmd/reboot'))).toBe('denied');
    expect(rules.check(client({ clientId: 'sensor1' }), pub('clients/sensor1/cmd/reboot'))).toBe('granted');
    // %u and %t alike, in a whole level or inside one, anywhere in the pattern
    const more = compileAclRules([allow('publish', 'users/%u/#'), allow('publish', '%t/x'), allow('publish', 'a/pre-%u')]);
    expect(more.check(client({ userId: 'a/b' }), pub('users/a/b/x'))).toBe('defer');
    expect(more.check(client({ userId: 'a/b' }), pub('a/pre-a/b'))).toBe('defer');
    expect(more.check(client({ tenantId: 'acme/x' }), pub('acme/x/x'))).toBe('defer');
    expect(more.check(client({ userId: '/' }), pub('users///x'))).toBe('defer');
  });

  it('a value with / skips deny rules too, so the next rule decides', () => {
    const rules = compileAclRules([deny('subscribe', 'private/%u/#'), allow('subscribe', 'private/+/public')]);
    expect(rules.check(client({ userId: 'a/b' }), sub('private/a/public'))).toBe('granted');
    expect(rules.check(client({ userId: 'a/b' }), sub('private/a/b/x'))).toBe('defer');
  });

  it('an empty value or one with U+0000 matches nothing', () => {
    const rules = compileAclRules([allow('all', 'users/%u/#'), allow('publish', 'dev-%c'), allow('all', '%u/#')]);
    const empty = client({ userId: '', clientId: '' });
    expect(rules.check(empty, pub('users//x'))).toBe('defer');
    expect(rules.check(empty, sub('users//#'))).toBe('defer');
    expect(rules.check(empty, pub('dev-'))).toBe('defer');
    expect(rules.check(empty, pub('/x'))).toBe('defer');
    expect(rules.check(empty, sub('/#'))).toBe('defer');
    const nul = client({ userId: 'a\u0000b' });
    expect(rules.check(nul, pub('users/a\u0000b/x'))).toBe('defer');
    expect(rules.check(client(), pub('users/alice/x'))).toBe('granted');
  });

  it('the rules attached to a session follow the same substitution', () => {
    const attrs = { [ACL_RULES_ATTR]: aclRulesAttr([allow('all', 'devices/%c/#'), deny('all', 'devices/#')]) };
    const c = client({ clientId: 'pump/cmd', attrs });
    expect(attachedAclRules(c)?.check(c, pub('devices/pump/cmd/start'))).toBe('denied');
    const own = client({ clientId: 'pump', attrs });
    expect(attachedAclRules(own)?.check(own, pub('devices/pump/cmd/start'))).toBe('granted');
  });

  it('a substituted value cannot make the first level a $-topic', () => {
    const rules = compileAclRules([allow('all', '%u/#'), allow('all', '$%u/#')]);
    expect(rules.check(client({ userId: '$SYS' }), pub('$SYS/broker'))).toBe('defer');
    expect(rules.check(client({ userId: '$SYS' }), sub('$SYS/#'))).toBe('defer');
    expect(rules.check(client({ userId: 'alice' }), pub('alice/x'))).toBe('granted');
    expect(rules.check(client({ userId: 'x' }), pub('$x/y'))).toBe('granted');
  });
});

describe('acl rules: parseAclRules', () => {
  it('returns the rules, fields copied', () => {
    const input = [
      { permission: 'allow', action: 'publish', topic: 'a/#' },
      { permission: 'deny', action: 'all', topic: '+/%u' },
    ];
    const rules = parseAclRules(input, 'here');
    expect(rules).toEqual(input);
    expect(rules[0]).not.toBe(input[0]);
  });

  const bad: Array<[value: unknown, message: string]> = [
    ['nope', 'src: must be an array of rules (got "nope")'],
    [{}, 'src: must be an array of rules (got an object)'],
    [[null], 'src[0]: must be an object'],
    [[{ permission: 'allow', action: 'publish', topic: 'a' }, 'x'], 'src[1]: must be an object'],
    [[{ permission: 'maybe', action: 'publish', topic: 'a' }], 'src[0].permission: must be "allow" or "deny" (got "maybe")'],
    [[{ action: 'publish', topic: 'a' }], 'src[0].permission: must be "allow" or "deny"'],
    [[{ permission: 'allow', action: 'pub', topic: 'a' }], 'src[0].action: must be one of publish, subscribe, retain, all (got "pub")'],
    [[{ permission: 'allow', action: 'publish', topic: 3 }], 'src[0].topic: must be a string (got number 3)'],
    [[{ permission: 'allow', action: 'publish', topic: '' }], 'src[0].topic: must not be empty'],
    [[{ permission: 'allow', action: 'publish', topic: '#/a' }], 'src[0].topic: "#" must be the last level'],
    [[{ permission: 'allow', action: 'publish', topic: 'a/b+' }], 'src[0].topic: "+" and "#" must fill a whole level'],
    [[{ permission: 'allow', action: 'publish', topic: 'a#' }], 'src[0].topic: "+" and "#" must fill a whole level'],
    [[{ permission: 'allow', action: 'publish', topic: 'a\u0000' }], 'src[0].topic: must not contain U+0000'],
    [[{ permission: 'allow', action: 'publish', topic: 'x'.repeat(65536) }], 'src[0].topic: must be at most 65535 bytes'],
    [[{ permission: 'allow', action: 'subscribe', topic: '$share/g/a' }], 'src[0].topic: must not be a shared subscription'],
    [[{ permission: 'allow', action: 'publish', topic: 'a', acton: 'x' }], 'src[0].acton: unknown field'],
  ];
  it.each(bad)('rejects %j', (value, message) => {
    expect(() => parseAclRules(value, 'src')).toThrow(message);
  });

  it('compileAclRules ignores other fields of typed rules, and check can be passed around', () => {
    const row = { id: 7, permission: 'allow', action: 'publish', topic: 'a' } as const;
    const { check, size } = compileAclRules([row]);
    expect(size).toBe(1);
    expect(check(client(), pub('a'))).toBe('granted');
  });

  it('compileAclRules checks the rules it is given', () => {
    expect(() => compileAclRules([{ permission: 'allow', action: 'publish', topic: 'a/#/b' }])).toThrow(
      'compileAclRules[0].topic: "#" must be the last level',
    );
  });
});

describe('acl rules: attached rules', () => {
  const rules = [deny('publish', 'a/secret'), allow('all', 'a/#')];

  it('aclRulesAttr and attachedAclRules round-trip, and the client without the attribute gets undefined', () => {
    const text = aclRulesAttr(rules);
    expect(JSON.parse(text)).toEqual(rules);
    const c = client({ attrs: { [ACL_RULES_ATTR]: text } });
    const compiled = attachedAclRules(c);
    expect(compiled?.size).toBe(2);
    expect(compiled?.check(c, pub('a/x'))).toBe('granted');
    expect(compiled?.check(c, pub('a/secret'))).toBe('denied');
    expect(attachedAclRules(client())).toBeUndefined();
  });

  it('a malformed attribute denies everything, connect included', () => {
    for (const text of ['not json', '{"permission":"allow"}', '[{"permission":"allow","action":"x","topic":"a"}]', '']) {
      const c = client({ attrs: { [ACL_RULES_ATTR]: text } });
      const compiled = attachedAclRules(c);
      expect(compiled).toBeDefined();
      for (const a of [pub('a'), sub('a'), { type: 'connect' } as const, { type: 'unsubscribe', filter: 'a' } as const])
        expect(compiled?.check(c, a)).toBe('denied');
    }
  });

  it('caches by attribute text, bounded', () => {
    const text = aclRulesAttr([allow('publish', 'cache/first')]);
    const c = client({ attrs: { [ACL_RULES_ATTR]: text } });
    const first = attachedAclRules(c);
    expect(attachedAclRules(client({ attrs: { [ACL_RULES_ATTR]: text } }))).toBe(first);
    for (let i = 0; i < ATTACHED_ACL_RULES_CACHE_SIZE - 1; i++)
      attachedAclRules(client({ attrs: { [ACL_RULES_ATTR]: aclRulesAttr([allow('publish', `cache/${i}`)]) } }));
    // still within the bound: the same compiled object
    expect(attachedAclRules(c)).toBe(first);
    // the hit refreshed `first`; now fill the whole cache with others: it goes out
    for (let i = 0; i < ATTACHED_ACL_RULES_CACHE_SIZE; i++)
      attachedAclRules(client({ attrs: { [ACL_RULES_ATTR]: aclRulesAttr([allow('publish', `other/${i}`)]) } }));
    const again = attachedAclRules(c);
    expect(again).not.toBe(first);
    expect(again?.check(c, pub('cache/first'))).toBe('granted');
  });
});

describe('acl rules: many rules', () => {
  it('checks 10,000 rules through the first-level index (prints the time per check)', () => {
    const list: AclRule[] = [];
    for (let i = 0; i < 10_000; i++) list.push(i % 2 === 0 ? allow('all', `dev${i}/+/state`) : deny('all', `dev${i}/#`));
    list.push(allow('publish', '+/%u/#'));
    const rules = compileAclRules(list);
    const c = client();
    expect(rules.check(c, pub('dev9998/x/state'))).toBe('granted');
    expect(rules.check(c, pub('dev9999/x/state'))).toBe('denied');
    expect(rules.check(c, pub('nobody/alice/x'))).toBe('granted');
    expect(rules.check(c, pub('nobody/bob/x'))).toBe('defer');
    expect(rules.check(c, sub('dev4/+/state'))).toBe('granted');
    expect(rules.check(c, sub('+/x/state'))).toBe('denied');
    const topics = ['dev9998/x/state', 'dev17/x', 'nobody/alice/x', 'unknown/y'];
    const actions = topics.map((t) => pub(t));
    const measure = (compiled: ReturnType<typeof compileAclRules>): { ns: number; granted: number } => {
      const n = 200_000;
      let granted = 0;
      const t0 = process.hrtime.bigint();
      for (let i = 0; i < n; i++) if (compiled.check(c, actions[i & 3] as AccessAction) === 'granted') granted++;
      return { ns: Number(process.hrtime.bigint() - t0) / n, granted };
    };
    const small = compileAclRules([...list.slice(9_990), allow('publish', 'dev9998/+/state')]);
    measure(rules); // warm up
    const many = measure(rules);
    const few = measure(small);
    expect(many.granted).toBe(100_000);
    expect(few.granted).toBe(100_000);
    process.stdout.write(`acl-rules: publish check ${many.ns.toFixed(0)} ns on 10,001 rules, ${few.ns.toFixed(0)} ns on 12 rules\n`);
  });
});
