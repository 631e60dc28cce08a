import { ACL_RULES_ATTR, aclRulesAttr, type AccessAction, type AclRule } from '@bifro/spi';
import { sampleClient, testPluginContext } from '@bifro/spi/testing';
import plugin, { HttpAcl, parseAclOptions } from '../src';
import { closeAll, connect, make } from './helpers';
import { startService, userTable } from './service';

const RULES: AclRule[] = [
  { permission: 'deny', action: 'retain', topic: '#' },
  { permission: 'deny', action: 'all', topic: '%t/secret/#' },
  { permission: 'allow', action: 'publish', topic: '%t/%u/#' },
  { permission: 'allow', action: 'subscribe', topic: '%t/+/status' },
];

const pub = (topic: string, retain = false): AccessAction => ({ type: 'publish', topic, qos: 1, retain });
const sub = (filter: string): AccessAction => ({ type: 'subscribe', filter, qos: 1 });
const client = (rules?: readonly AclRule[] | string) =>
  sampleClient({
    tenantId: 'acme',
    userId: 'alice',
    attrs: rules === undefined ? { role: 'x' } : { [ACL_RULES_ATTR]: typeof rules === 'string' ? rules : aclRulesAttr(rules) },
  });

afterEach(() => closeAll());

describe('auth-http: acl from the rules the auth answer attached', () => {
  const acl = new HttpAcl(parseAclOptions({}));

  it('answers from the rules, synchronously', () => {
    const c = client(RULES);
    expect(acl.checkPermission(c, pub('acme/alice/t'))).toBe('granted');
    expect(acl.checkPermission(c, pub('acme/bob/t'))).toBe('defer');
    expect(acl.checkPermission(c, pub('acme/secret/x'))).toBe('denied');
    expect(acl.checkPermission(c, pub('acme/alice/t', true))).toBe('denied');
    expect(acl.checkPermission(c, sub('acme/bob/status'))).toBe('granted');
    expect(acl.checkPermission(c, sub('acme/+/status'))).toBe('denied'); // could match acme/secret/status
    expect(acl.checkPermission(c, sub('acme/#'))).toBe('denied'); // overlaps the deny of acme/secret/#
    expect(acl.checkPermission(c, sub('other/x'))).toBe('defer');
    expect(acl.checkPermission(c, { type: 'unsubscribe', filter: 'acme/x' })).toBe('granted');
    expect(acl.checkPermission(client(), { type: 'unsubscribe', filter: 'acme/x' })).toBe('defer'); // no rules: withoutRules
  });

  it('connect is granted by default, deferred with connect: defer', () => {
    expect(acl.checkPermission(client(RULES), { type: 'connect' })).toBe('granted');
    expect(acl.checkPermission(client(), { type: 'connect' })).toBe('granted');
    const deferring = new HttpAcl(parseAclOptions({ connect: 'defer' }));
    expect(deferring.checkPermission(client(RULES), { type: 'connect' })).toBe('defer');
  });

  it('a client without rules: withoutRules (defer by default)', () => {
    expect(acl.checkPermission(client(), pub('a/b'))).toBe('defer');
    expect(new HttpAcl(parseAclOptions({ withoutRules: 'grant' })).checkPermission(client(), pub('a/b'))).toBe('granted');
    expect(new HttpAcl(parseAclOptions({ withoutRules: 'deny' })).checkPermission(client(), sub('a/b'))).toBe('denied');
  });

  it('rules that match nothing: unmatched (defer by default)', () => {
    const strict = new HttpAcl(parseAclOptions({ unmatched: 'deny' }));
    expect(strict.checkPermission(client(RULES), pub('acme/bob/t'))).toBe('denied');
    expect(strict.checkPermission(client(RULES), pub('acme/alice/t'))).toBe('granted');
    const lax = new HttpAcl(parseAclOptions({ unmatched: 'grant' }));
    expect(lax.checkPermission(client(RULES), pub('acme/bob/t'))).toBe('granted');
    expect(lax.checkPermission(client(RULES), pub('acme/secret/t'))).toBe('denied');
  });

  it('malformed attached rules deny everything, connect included (fail closed)', () => {
    for (const bad of ['not json', '[{"permission":"allow"}]', '{}']) {
      for (const action of [pub('acme/alice/t'), sub('x'), { type: 'connect' } as const, { type: 'unsubscribe', filter: 'x' } as const]) {
        expect(acl.checkPermission(client(bad), action)).toBe('denied');
      }
    }
  });

  it('the factory builds it from the acl entry options', () => {
    const made = plugin.acl!(testPluginContext({ options: { unmatched: 'deny' } }));
    expect(made).toBeInstanceOf(HttpAcl);
  });

  it('end to end in memory: the attrs of an allow answer drive the acl, without asking the service again', async () => {
    const service = await startService({
      handler: userTable({ alice: { password: 'pw', tenant: 'acme', acl: RULES } }),
    });
    try {
      const { provider } = await make({ url: service.origin });
      const result = await provider.authenticate(connect('alice', 'pw'));
      if (result.type !== 'ok') throw new Error(`expected ok, got ${JSON.stringify(result)}`);
      const c = sampleClient({ tenantId: result.tenantId, userId: result.userId, attrs: result.attrs ?? {} });
      const asked = service.requests.length;
      for (let i = 0; i < 1000; i++) expect(acl.checkPermission(c, pub(`acme/alice/${i}`))).toBe('granted');
      expect(acl.checkPermission(c, pub('acme/secret/1'))).toBe('denied');
      expect(service.requests.length).toBe(asked);
    } finally {
      closeAll();
      await service.close();
    }
  });
});
