import * as fs from 'node:fs';
import * as path from 'node:path';
import { globToRegExp, MAX_PROBLEMS, parseAclFile, scopesFor, type RuleSet } from '../src/acl-file-format';
import { client } from './helpers';

function parsed(text: string): RuleSet {
  const r = parseAclFile(text, 'acl.conf');
  if (!r.ok) throw new Error(`expected a valid file, got: ${r.problems.join('; ')}`);
  return r.ruleSet;
}

function problems(text: string): readonly string[] {
  const r = parseAclFile(text, '/etc/bifro/acl.conf');
  if (r.ok) throw new Error('expected problems');
  return r.problems;
}

describe('acl-file format: parsing', () => {
  it('reads scopes, rules, comments, blank lines, indentation and CRLF', () => {
    const rs = parsed(
      [
        '# everyone',
        'allow subscribe $SYS/broker/#',
        '',
        'tenant acme',
        '  allow publish sensors/%u/#',
        '  user alice',
        '    deny publish admin/#',
        '  client gw-*',
        '    allow all gateways/%c/#',
        '  client gw-1',
        '    deny retain #',
        'global',
        '   deny all secret/#',
        'tenant other\r',
        '  allow all x\r',
      ].join('\n'),
    );
    expect(rs.rules).toBe(7);
    expect(rs.scopes).toBe(6);
    expect(rs.global?.main.size).toBe(2);
    const acme = rs.tenants.get('acme');
    expect(acme?.tenant?.main.size).toBe(1);
    expect(acme?.users.get('alice')?.main.size).toBe(1);
    expect(acme?.clients.get('gw-1')?.main.size).toBe(1);
    expect(acme?.clientGlobs.map((g) => g.glob)).toEqual(['gw-*']);
    expect(rs.tenants.get('other')?.tenant?.main.size).toBe(1);
  });

  it('a topic is the rest of the line (spaces inside kept); ids too', () => {
    const rs = parsed('tenant big corp\n  user jane doe\n    allow publish my topic/with spaces  \n');
    const scope = rs.tenants.get('big corp')?.users.get('jane doe');
    expect(
      scope?.main.check(client({ tenantId: 'big corp', userId: 'jane doe' }), {
        type: 'publish',
        topic: 'my topic/with spaces',
        qos: 0,
        retain: false,
      }),
    ).toBe('granted');
  });

  it('a repeated header adds to the same scope, in file order', () => {
    const rs = parsed('tenant acme\n allow publish a\ntenant other\n allow publish b\ntenant acme\n deny publish a\n allow publish c\n');
    expect(rs.tenants.get('acme')?.tenant?.main.size).toBe(3);
  });

  it('an empty file and a file of comments are valid and hold no rules', () => {
    expect(parsed('').rules).toBe(0);
    expect(parsed('# nothing\n\n   # still nothing\n').scopes).toBe(0);
  });

  const bad: Array<[text: string, message: string]> = [
    [
      'allow publish a\nfrobnicate x',
      '/etc/bifro/acl.conf:2: unknown keyword "frobnicate" (expected allow, deny, tenant, user, client or global)',
    ],
    ['\n\nallow pub a', '/etc/bifro/acl.conf:3: unknown action "pub" (expected publish, subscribe, retain or all)'],
    ['allow', '/etc/bifro/acl.conf:1: "allow" needs an action (publish, subscribe, retain or all) and a topic'],
    ['deny subscribe', '/etc/bifro/acl.conf:1: "deny subscribe" needs a topic'],
    ['allow publish a/#/b', '/etc/bifro/acl.conf:1: topic "a/#/b": "#" must be the last level (level 2 of "a/#/b")'],
    ['allow publish a+', '/etc/bifro/acl.conf:1: topic "a+": "+" and "#" must fill a whole level'],
    ['allow subscribe $share/g/a', '/etc/bifro/acl.conf:1: topic "$share/g/a": must not be a shared subscription'],
    ['user alice\n allow publish a', '/etc/bifro/acl.conf:1: "user" must follow a "tenant" line'],
    ['tenant acme\nglobal\nclient c1', '/etc/bifro/acl.conf:3: "client" must follow a "tenant" line'],
    ['tenant', '/etc/bifro/acl.conf:1: "tenant" needs a tenant id'],
    ['tenant a\nuser', '/etc/bifro/acl.conf:2: "user" needs a user id'],
    ['tenant a\nclient   ', '/etc/bifro/acl.conf:2: "client" needs a client id or glob'],
    ['global acme', '/etc/bifro/acl.conf:1: "global" takes nothing after it (got "acme")'],
    ['ALLOW publish a', '/etc/bifro/acl.conf:1: unknown keyword "ALLOW"'],
    ['allow publish a # a trailing comment', '/etc/bifro/acl.conf:1: topic "a # a trailing comment": "+" and "#" must fill a whole level'],
  ];
  it.each(bad)('reports %j with file and line', (text, message) => {
    const p = problems(text);
    expect(p[0]).toContain(message);
    expect(p[0]?.startsWith('/etc/bifro/acl.conf:')).toBe(true);
  });

  it('reports every problem (up to the bound), each with its line', () => {
    const p = problems('allow pub a\nallow publish b\nfoo\n');
    expect(p).toEqual([
      '/etc/bifro/acl.conf:1: unknown action "pub" (expected publish, subscribe, retain or all)',
      '/etc/bifro/acl.conf:3: unknown keyword "foo" (expected allow, deny, tenant, user, client or global)',
    ]);
    expect(problems('x\n'.repeat(100))).toHaveLength(MAX_PROBLEMS);
  });
});

describe('acl-file format: scopes of a client', () => {
  const rs = parsed(
    [
      'allow all g',
      'tenant acme',
      '  allow all t',
      '  user alice',
      '    allow all u',
      '  client c1',
      '    allow all c',
      '  client c?',
      '    allow all q',
      '  client *',
      '    allow all star',
      'tenant other',
      '  user alice',
      '    allow all other-u',
    ].join('\n'),
  );
  const labels = (over: Parameters<typeof client>[0]): string[] => scopesFor(rs, client(over)).map((s) => s.label);

  it('most specific first: exact client id, client globs in file order, user, tenant, global', () => {
    expect(labels({})).toEqual([
      'tenant acme client c1',
      'tenant acme client c?',
      'tenant acme client *',
      'tenant acme user alice',
      'tenant acme',
      'global',
    ]);
    expect(labels({ clientId: 'c22', userId: 'bob' })).toEqual(['tenant acme client *', 'tenant acme', 'global']);
    expect(labels({ tenantId: 'other' })).toEqual(['tenant other user alice', 'global']);
    expect(labels({ tenantId: 'nobody' })).toEqual(['global']);
  });

  it('user and client scopes belong to their tenant', () => {
    expect(labels({ tenantId: 'other', clientId: 'c1' })).not.toContain('tenant acme client c1');
  });
});

describe('acl-file format: client globs', () => {
  it.each([
    ['gw-*', 'gw-1', true],
    ['gw-*', 'gw-', true],
    ['gw-*', 'xgw-1', false],
    ['gw-?', 'gw-12', false],
    ['a.b*', 'a.bc', true],
    ['a.b*', 'axbc', false],
    ['(x)+[y]', '(x)+[y]', true],
    ['*', '', true],
  ])('%s vs %s → %s', (glob, id, matches) => {
    expect(globToRegExp(glob).test(id)).toBe(matches);
  });
});

describe('acl-file format: the README example', () => {
  it('parses as written, and its rules decide as the README says', () => {
    const readme = fs.readFileSync(path.join(__dirname, '..', 'README.md'), 'utf8');
    const section = readme.slice(readme.indexOf('## File format'));
    const example = /```\n([\s\S]*?)```/.exec(section)?.[1];
    expect(example).toBeDefined();
    const rs = parsed(example as string);
    expect(rs.rules).toBe(10);
    const scopes = scopesFor(rs, client({ userId: 'alice', clientId: 'gw-1' }));
    const decide = (topic: string, type: 'publish' | 'subscribe' = 'publish'): string => {
      const action = type === 'publish' ? ({ type, topic, qos: 0, retain: false } as const) : ({ type, filter: topic, qos: 0 } as const);
      for (const s of scopes) {
        const d = s.main.check(client({ userId: 'alice', clientId: 'gw-1' }), action);
        if (d !== 'defer') return d;
      }
      return 'defer';
    };
    expect(decide('gateways/gw-1/off')).toBe('denied');
    expect(decide('gateways/gw-1/on')).toBe('granted');
    expect(decide('users/bob/#', 'subscribe')).toBe('granted');
    expect(decide('users/bob/x')).toBe('denied');
    expect(decide('telemetry/acme/alice')).toBe('granted');
  });
});
