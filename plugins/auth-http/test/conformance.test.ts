import { ACL_RULES_ATTR, aclRulesAttr, type AuthProvider } from '@bifro/spi';
import { accessControlConformance, authProviderConformance, registerConformance, testPluginContext } from '@bifro/spi/testing';
import plugin from '../src';
import { startService, userTable, type AuthService } from './service';

jest.setTimeout(20000);

let service: AuthService;

beforeAll(async () => {
  service = await startService({ handler: userTable({ alice: { password: 's3cret', tenant: 'acme' } }) });
});

afterAll(async () => {
  await service.close();
});

const create =
  (options: Record<string, unknown> = {}) =>
  (): Promise<AuthProvider> =>
    Promise.resolve(plugin.auth!(testPluginContext({ options: { url: `${service.origin}/auth`, ...options } })));

describe('auth-http: auth conformance kit (a real local service)', () => {
  registerConformance(
    authProviderConformance({
      create: create(),
      validRequest: { username: 'alice', password: Buffer.from('s3cret') },
      expectedIdentity: { tenantId: 'acme', userId: 'alice' },
      invalidRequest: { username: 'alice', password: Buffer.from('wrong') },
      expectedRejectReason: 'badCredentials',
    }),
    { it },
  );
});

describe('auth-http: auth conformance kit, service down (fail closed)', () => {
  registerConformance(
    authProviderConformance({
      create: () => Promise.resolve(plugin.auth!(testPluginContext({ options: { url: 'http://127.0.0.1:1/', timeoutMs: 500 } }))),
      invalidRequest: { username: 'alice', password: Buffer.from('s3cret') },
      expectedRejectReason: 'error',
    }),
    { it },
  );
});

const RULES = aclRulesAttr([
  { permission: 'deny', action: 'all', topic: 'sys/#' },
  { permission: 'allow', action: 'all', topic: '%t/%u/#' },
]);

describe('auth-http: acl conformance kit', () => {
  registerConformance(
    accessControlConformance({
      create: () => plugin.acl!(testPluginContext({ options: {} })),
      clients: [
        {
          tenantId: 't1',
          userId: 'u1',
          clientId: 'c',
          protocolVersion: 5,
          remoteAddress: '::1',
          remotePort: 1,
          listener: 'tcp',
          attrs: { [ACL_RULES_ATTR]: RULES },
        },
      ],
      expectations: [
        { action: { type: 'connect' }, decision: 'granted' },
        { action: { type: 'publish', topic: 't1/u1/x', qos: 0, retain: false }, decision: 'defer' },
        {
          client: { attrs: { [ACL_RULES_ATTR]: RULES } },
          action: { type: 'publish', topic: 't1/u1/x', qos: 0, retain: false },
          decision: 'granted',
        },
        {
          client: { attrs: { [ACL_RULES_ATTR]: RULES } },
          action: { type: 'publish', topic: 't1/u2/x', qos: 0, retain: false },
          decision: 'defer',
        },
        { client: { attrs: { [ACL_RULES_ATTR]: RULES } }, action: { type: 'subscribe', filter: 'sys/#', qos: 0 }, decision: 'denied' },
        { client: { attrs: { [ACL_RULES_ATTR]: 'garbage' } }, action: { type: 'connect' }, decision: 'denied' },
      ],
    }),
    { it },
  );
});

describe('auth-http: acl conformance kit, strict options', () => {
  registerConformance(
    accessControlConformance({
      create: () => plugin.acl!(testPluginContext({ options: { connect: 'defer', withoutRules: 'deny', unmatched: 'deny' } })),
      expectations: [
        { action: { type: 'connect' }, decision: 'defer' },
        { action: { type: 'subscribe', filter: 'a', qos: 0 }, decision: 'denied' },
        {
          client: { attrs: { [ACL_RULES_ATTR]: RULES } },
          action: { type: 'publish', topic: 'x', qos: 0, retain: false },
          decision: 'denied',
        },
      ],
    }),
    { it },
  );
});
