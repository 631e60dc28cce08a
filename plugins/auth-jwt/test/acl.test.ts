import { ACL_RULES_ATTR, aclRulesAttr, type AccessAction, type AclRule } from '@bifro/spi';
import { sampleClient, testPluginContext } from '@bifro/spi/testing';
import plugin from '../src';
import { JwtAcl } from '../src/jwt-acl';
import { claims, cleanup, provider, SECRET, sign, withPassword } from './helpers';

afterEach(cleanup);

const RULES: AclRule[] = [
  { permission: 'deny', action: 'retain', topic: 'devices/%u/config' },
  { permission: 'allow', action: 'all', topic: 'devices/%u/#' },
  { permission: 'allow', action: 'subscribe', topic: 'broadcast/#' },
  { permission: 'deny', action: 'all', topic: 'admin/#' },
];

const pub = (topic: string, retain = false): AccessAction => ({ type: 'publish', topic, qos: 1, retain });
const sub = (filter: string): AccessAction => ({ type: 'subscribe', filter, qos: 1 });

function acl(options: Record<string, unknown> = {}): JwtAcl {
  const made = plugin.acl(testPluginContext({ options }));
  if (!(made instanceof JwtAcl)) throw new Error('the acl factory must return a JwtAcl');
  return made;
}

const alice = sampleClient({ tenantId: 'acme', userId: 'alice', attrs: { [ACL_RULES_ATTR]: aclRulesAttr(RULES) } });

describe('auth-jwt acl: in a chain (default)', () => {
  const a = acl();

  it('grants and denies what the token rules say, with %u substituted', () => {
    expect(a.checkPermission(alice, pub('devices/alice/temp'))).toBe('granted');
    expect(a.checkPermission(alice, sub('devices/alice/+'))).toBe('granted');
    expect(a.checkPermission(alice, sub('broadcast/news'))).toBe('granted');
    expect(a.checkPermission(alice, pub('admin/reboot'))).toBe('denied');
    expect(a.checkPermission(alice, sub('admin/#'))).toBe('denied');
    expect(a.checkPermission(alice, pub('devices/alice/config', true))).toBe('denied');
    expect(a.checkPermission(alice, pub('devices/alice/config', false))).toBe('granted');
  });

  it('defers what no rule matches, connect, unsubscribe, and clients without token rules', () => {
    expect(a.checkPermission(alice, pub('devices/bob/temp'))).toBe('defer');
    expect(a.checkPermission(alice, pub('broadcast/news'))).toBe('defer');
    expect(a.checkPermission(alice, { type: 'connect' })).toBe('defer');
    expect(a.checkPermission(alice, { type: 'unsubscribe', filter: 'devices/alice/#' })).toBe('defer');
    expect(a.checkPermission(sampleClient(), pub('devices/u1/temp'))).toBe('defer');
  });

  it('a malformed rules attribute denies everything (fail closed)', () => {
    const broken = sampleClient({ attrs: { [ACL_RULES_ATTR]: '{not json' } });
    expect(a.checkPermission(broken, { type: 'connect' })).toBe('denied');
    expect(a.checkPermission(broken, pub('devices/u1/x'))).toBe('denied');
    const wrong = sampleClient({ attrs: { [ACL_RULES_ATTR]: JSON.stringify([{ permission: 'allow', action: 'all', topic: 'a/#/b' }]) } });
    expect(a.checkPermission(wrong, sub('a/x'))).toBe('denied');
  });

  it('answers synchronously (a plain string, never a promise)', () => {
    expect(typeof a.checkPermission(alice, pub('devices/alice/t'))).toBe('string');
  });
});

describe('auth-jwt acl: standalone', () => {
  const a = acl({ standalone: true });

  it('grants connect and unsubscribe, denies what no rule allows, for clients with or without rules', () => {
    expect(a.checkPermission(alice, { type: 'connect' })).toBe('granted');
    expect(a.checkPermission(alice, { type: 'unsubscribe', filter: 'x/#' })).toBe('granted');
    expect(a.checkPermission(alice, pub('devices/alice/t'))).toBe('granted');
    expect(a.checkPermission(alice, pub('devices/bob/t'))).toBe('denied');
    expect(a.checkPermission(alice, sub('#'))).toBe('denied');
    const plain = sampleClient();
    expect(a.checkPermission(plain, { type: 'connect' })).toBe('granted');
    expect(a.checkPermission(plain, pub('anything'))).toBe('denied');
  });
});

describe('auth-jwt: token to decision, end to end in memory', () => {
  it('the acl claim of a verified token drives the acl kind', async () => {
    const { auth } = await provider({ secret: SECRET });
    const token = await sign(
      SECRET,
      'HS256',
      claims({ sub: 'dev-9', acl: [{ permission: 'allow', action: 'publish', topic: 'tele/%t/%u' }] }),
    );
    const r = await auth.authenticate(withPassword(token));
    if (r.type !== 'ok') throw new Error(JSON.stringify(r));
    const client = sampleClient({ tenantId: r.tenantId, userId: r.userId, attrs: r.attrs ?? {} });
    const a = acl({ standalone: true });
    expect(a.checkPermission(client, pub('tele/acme/dev-9'))).toBe('granted');
    expect(a.checkPermission(client, pub('tele/acme/dev-8'))).toBe('denied');
  });
});
