import type { ClientBalancer, RedirectDecision } from '@bifro/spi';
import { clientBalancerConformance } from '@bifro/spi/testing';
import { expectAllPass, expectFailures } from './support/kit-runner';

const balancer: ClientBalancer = {
  needRedirect: (client) =>
    client.tenantId === 'moved' ? { type: 'redirect', permanent: true, serverReference: 'eu.example.com:1883' } : { type: 'none' },
};

describe('client balancer kit', () => {
  it('passes a correct balancer, with its expectations', async () => {
    const cases = clientBalancerConformance({
      create: () => balancer,
      expectations: [
        { client: { tenantId: 'moved' }, decision: { type: 'redirect', permanent: true, serverReference: 'eu.example.com:1883' } },
        { decision: { type: 'none' } },
      ],
    });
    expect(cases).toHaveLength(4);
    await expectAllPass(cases);
  });

  it('passes an async balancer that redirects everyone temporarily', async () => {
    await expectAllPass(
      clientBalancerConformance({
        create: () => ({ needRedirect: async () => ({ type: 'redirect', permanent: false, serverReference: 'b:1883' }) }),
      }),
    );
  });

  it('fails a redirect with an empty server reference', async () => {
    await expectFailures(
      clientBalancerConformance({ create: () => ({ needRedirect: () => ({ type: 'redirect', permanent: false, serverReference: '' }) }) }),
      'needRedirect answers none or a well-formed redirect',
    );
  });

  it('fails a redirect without a boolean permanent, an unknown type and a missing answer', async () => {
    for (const answer of [{ type: 'redirect', serverReference: 'x' }, { type: 'stay' }, undefined]) {
      await expectFailures(
        clientBalancerConformance({
          create: () => ({ needRedirect: (c) => (c.protocolVersion === 3 ? (answer as RedirectDecision) : { type: 'none' }) }),
        }),
        'needRedirect answers none or a well-formed redirect',
      );
    }
  });

  it('fails a balancer that does not make the expected decision', async () => {
    await expectFailures(
      clientBalancerConformance({
        create: () => ({ needRedirect: () => ({ type: 'none' }) }),
        expectations: [{ client: { tenantId: 'moved' }, decision: { type: 'redirect', permanent: true, serverReference: 'x' } }],
      }),
      'expectation 1',
    );
  });
});
