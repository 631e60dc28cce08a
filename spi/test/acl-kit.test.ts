import type { AccessAction, AccessControl, AccessDecision, ClientInfo } from '@bifro/spi';
import { accessControlConformance } from '@bifro/spi/testing';
import { expectAllPass, expectFailures } from './support/kit-runner';

/** A correct ACL: `sys/` is read-only, other tenants' admins get everything, the rest defers. */
const acl: AccessControl = {
  checkPermission(client: ClientInfo, action: AccessAction): AccessDecision {
    if (client.attrs.role === 'admin') return 'granted';
    if (action.type === 'publish' && action.topic.startsWith('sys/')) return 'denied';
    return 'defer';
  },
};

describe('access control kit', () => {
  it('passes a correct ACL, with its expectations', async () => {
    const cases = accessControlConformance({
      create: () => acl,
      clients: [
        {
          tenantId: 'x',
          userId: 'root',
          clientId: 'c',
          protocolVersion: 5,
          remoteAddress: '::1',
          remotePort: 1,
          listener: 'tcp',
          attrs: { role: 'admin' },
        },
      ],
      expectations: [
        { action: { type: 'publish', topic: 'sys/x', qos: 0, retain: false }, decision: 'denied' },
        { client: { attrs: { role: 'admin' } }, action: { type: 'publish', topic: 'sys/x', qos: 0, retain: false }, decision: 'granted' },
        { action: { type: 'subscribe', filter: 'sys/#', qos: 1 }, decision: 'defer' },
      ],
    });
    expect(cases).toHaveLength(8);
    await expectAllPass(cases);
  });

  it('passes an async ACL answering error', async () => {
    await expectAllPass(accessControlConformance({ create: () => ({ checkPermission: async (): Promise<AccessDecision> => 'error' }) }));
  });

  it('fails an ACL answering an unknown decision for one action type', async () => {
    await expectFailures(
      accessControlConformance({
        create: () => ({ checkPermission: (_c, a) => (a.type === 'subscribe' ? ('allow' as AccessDecision) : 'granted') }),
      }),
      'every subscribe action',
    );
  });

  it('fails an ACL that throws on $SYS topics or on v3 clients', async () => {
    await expectFailures(
      accessControlConformance({
        create: () => ({
          checkPermission: (_c, a) => {
            if (a.type === 'publish' && a.topic.startsWith('$')) throw new Error('unexpected $');
            return 'granted';
          },
        }),
      }),
      'every publish action',
    );
    await expectFailures(
      accessControlConformance({
        create: () => ({
          checkPermission: async (c): Promise<AccessDecision> => {
            if (c.protocolVersion === 3) throw new Error('v3 unsupported');
            return 'granted';
          },
        }),
      }),
      'every connect action',
      'every unsubscribe action',
    );
  });

  it('fails an ACL that does not make the expected decision', async () => {
    await expectFailures(
      accessControlConformance({
        create: () => ({ checkPermission: () => 'granted' }),
        expectations: [{ action: { type: 'publish', topic: 'sys/x', qos: 0, retain: false }, decision: 'denied' }],
      }),
      'expectation 1',
    );
  });
});
