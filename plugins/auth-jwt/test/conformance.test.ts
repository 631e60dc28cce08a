import { generateKeyPairSync } from 'node:crypto';
import * as fs from 'node:fs';
import * as path from 'node:path';
import { ACL_RULES_ATTR, aclRulesAttr, type AuthProvider } from '@bifro/spi';
import { accessControlConformance, authProviderConformance, registerConformance, testPluginContext } from '@bifro/spi/testing';
import type { JWK } from 'jose' with { 'resolution-mode': 'import' };
import plugin from '../src';
import { claims, JwksServer, makeTempDir, SECRET, signSync, tamper } from './helpers';

// The kits read their requests when they are built: the tokens are signed synchronously here.
const inAnHour = Math.floor(Date.now() / 1000) + 3600;
const hsToken = signSync(SECRET, claims({ sub: 'alice', tenant: 'acme', exp: inAnHour }));
const es = generateKeyPairSync('ec', { namedCurve: 'P-256' });
const esJwk: JWK = { ...(es.publicKey.export({ format: 'jwk' }) as JWK), kid: 'conformance-1', alg: 'ES256' };
const esToken = signSync(es.privateKey, claims({ sub: 'dev-1', tenant: 'globex', exp: inAnHour }), { kid: 'conformance-1' });
const keyDir = makeTempDir();
fs.writeFileSync(path.join(keyDir, 'jwt.pem'), es.publicKey.export({ type: 'spki', format: 'pem' }));
let jwksServer: JwksServer | undefined;

beforeAll(async () => {
  jwksServer = await JwksServer.start([esJwk]);
});

afterAll(async () => {
  await jwksServer?.stop();
  fs.rmSync(keyDir, { recursive: true, force: true });
});

function create(options: () => Record<string, unknown>): () => Promise<AuthProvider> {
  return async () => plugin.auth(testPluginContext({ options: options(), configDir: keyDir }));
}

const auth = {
  secret: create(() => ({ secret: SECRET })),
  jwksUrl: create(() => ({ jwksUrl: jwksServer!.url })),
  publicKeyFile: create(() => ({ publicKeyFile: 'jwt.pem' })),
};

describe('auth-jwt: auth conformance (secret)', () => {
  registerConformance(
    authProviderConformance({
      create: auth.secret,
      validRequest: { password: Buffer.from(hsToken) },
      expectedIdentity: { tenantId: 'acme', userId: 'alice' },
      invalidRequest: { password: Buffer.from(tamper(hsToken)) },
      expectedRejectReason: 'badCredentials',
      extendedAuthStartData: { JWT: Buffer.from(hsToken) },
    }),
    { it },
  );
});

describe.each([
  ['jwksUrl', auth.jwksUrl],
  ['publicKeyFile', auth.publicKeyFile],
] as const)('auth-jwt: auth conformance (%s)', (_label, factory) => {
  registerConformance(
    authProviderConformance({
      create: factory,
      validRequest: { password: Buffer.from(esToken) },
      expectedIdentity: { tenantId: 'globex', userId: 'dev-1' },
      invalidRequest: { password: Buffer.from(tamper(esToken)) },
      expectedRejectReason: 'badCredentials',
      extendedAuthStartData: { JWT: Buffer.from(esToken) },
    }),
    { it },
  );
});

const RULES = aclRulesAttr([
  { permission: 'allow', action: 'publish', topic: 'devices/%u/#' },
  { permission: 'deny', action: 'subscribe', topic: 'secret/#' },
]);
const withRules = { attrs: { [ACL_RULES_ATTR]: RULES } };

describe('auth-jwt: acl conformance (chain)', () => {
  registerConformance(
    accessControlConformance({
      create: () => plugin.acl(testPluginContext()),
      expectations: [
        { client: withRules, action: { type: 'publish', topic: 'devices/u1/t', qos: 1, retain: false }, decision: 'granted' },
        { client: withRules, action: { type: 'publish', topic: 'devices/u2/t', qos: 1, retain: false }, decision: 'defer' },
        { client: withRules, action: { type: 'subscribe', filter: 'secret/a', qos: 0 }, decision: 'denied' },
        { client: withRules, action: { type: 'connect' }, decision: 'defer' },
        { action: { type: 'publish', topic: 'devices/u1/t', qos: 0, retain: false }, decision: 'defer' },
        { client: { attrs: { [ACL_RULES_ATTR]: 'garbage' } }, action: { type: 'connect' }, decision: 'denied' },
      ],
    }),
    { it },
  );
});

describe('auth-jwt: acl conformance (standalone)', () => {
  registerConformance(
    accessControlConformance({
      create: () => plugin.acl(testPluginContext({ options: { standalone: true } })),
      expectations: [
        { client: withRules, action: { type: 'publish', topic: 'devices/u1/t', qos: 1, retain: false }, decision: 'granted' },
        { client: withRules, action: { type: 'publish', topic: 'devices/u2/t', qos: 1, retain: false }, decision: 'denied' },
        { client: withRules, action: { type: 'connect' }, decision: 'granted' },
        { client: withRules, action: { type: 'unsubscribe', filter: 'x' }, decision: 'granted' },
        { action: { type: 'subscribe', filter: '#', qos: 0 }, decision: 'denied' },
      ],
    }),
    { it },
  );
});
