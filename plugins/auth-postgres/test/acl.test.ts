import { ACL_RULES_ATTR, aclRulesAttr, type AccessAction, type AclRule } from '@bifro/spi';
import { accessControlConformance, registerConformance, sampleClient, testPluginContext } from '@bifro/spi/testing';
import plugin from '../src';
import { PostgresAcl } from '../src/postgres-acl';

const RULES: AclRule[] = [
  { permission: 'deny', action: 'retain', topic: '#' },
  { permission: 'allow', action: 'all', topic: 'devices/%u/#' },
  { permission: 'allow', action: 'subscribe', topic: 'public/#' },
  { permission: 'deny', action: 'publish', topic: 'public/#' },
];
const attrs = { [ACL_RULES_ATTR]: aclRulesAttr(RULES), role: 'device' };
const pub = (topic: string, retain = false): AccessAction => ({ type: 'publish', topic, qos: 1, retain });
const sub = (filter: string): AccessAction => ({ type: 'subscribe', filter, qos: 1 });

describe('auth-postgres acl: conformance kit', () => {
  registerConformance(
    accessControlConformance({
      create: () => plugin.acl(testPluginContext()),
      clients: [sampleClient({ attrs }), sampleClient({ attrs: { [ACL_RULES_ATTR]: 'not json' } })],
      expectations: [
        { client: { attrs }, action: { type: 'connect' }, decision: 'granted' },
        { client: { attrs }, action: pub('devices/u1/temp'), decision: 'granted' },
        { client: { attrs }, action: pub('devices/u1/temp', true), decision: 'denied' },
        { client: { attrs }, action: pub('devices/u2/temp'), decision: 'defer' },
        { client: { attrs }, action: sub('public/news'), decision: 'granted' },
        { client: { attrs }, action: pub('public/news'), decision: 'denied' },
        { client: { attrs }, action: { type: 'unsubscribe', filter: 'anything/#' }, decision: 'granted' },
        { client: { attrs: { [ACL_RULES_ATTR]: '[{"permission":"maybe"}]' } }, action: { type: 'connect' }, decision: 'denied' },
        { client: { attrs: { [ACL_RULES_ATTR]: 'not json' } }, action: sub('devices/u1/x'), decision: 'denied' },
        { client: { attrs: { [ACL_RULES_ATTR]: 'not json' } }, action: { type: 'unsubscribe', filter: 'a' }, decision: 'denied' },
        { action: pub('devices/u1/temp'), decision: 'defer' },
        { action: { type: 'connect' }, decision: 'granted' },
      ],
    }),
    { it },
  );
});

describe('auth-postgres acl: options', () => {
  const client = sampleClient({ attrs });

  it('unmatched decides what no rule matched; clients without rules always defer', () => {
    const denied = new PostgresAcl({ connect: 'granted', unmatched: 'denied' });
    expect(denied.checkPermission(client, pub('elsewhere'))).toBe('denied');
    expect(denied.checkPermission(client, pub('devices/u1/x'))).toBe('granted');
    expect(denied.checkPermission(sampleClient(), pub('elsewhere'))).toBe('defer');
    const granted = new PostgresAcl({ connect: 'granted', unmatched: 'granted' });
    expect(granted.checkPermission(client, sub('elsewhere/#'))).toBe('granted');
    expect(granted.checkPermission(client, pub('devices/u1/x', true))).toBe('denied');
  });

  it('connect: defer leaves the connect question to the next plugin', () => {
    const acl = new PostgresAcl({ connect: 'defer', unmatched: 'defer' });
    expect(acl.checkPermission(client, { type: 'connect' })).toBe('defer');
    expect(acl.checkPermission(sampleClient({ attrs: { [ACL_RULES_ATTR]: '{' } }), { type: 'connect' })).toBe('denied');
  });

  it('%u %c %t are the client identity: another user does not get alice rules', () => {
    const acl = new PostgresAcl({ connect: 'granted', unmatched: 'denied' });
    const tenantRules = { [ACL_RULES_ATTR]: aclRulesAttr([{ permission: 'allow', action: 'publish', topic: '%t/%c/up' }]) };
    expect(acl.checkPermission(sampleClient({ tenantId: 'acme', clientId: 'd1', attrs: tenantRules }), pub('acme/d1/up'))).toBe('granted');
    expect(acl.checkPermission(sampleClient({ tenantId: 'acme', clientId: 'd2', attrs: tenantRules }), pub('acme/d1/up'))).toBe('denied');
  });
});
