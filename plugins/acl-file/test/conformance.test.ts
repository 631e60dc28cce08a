import * as fs from 'node:fs';
import * as path from 'node:path';
import type { AccessControl } from '@bifro/spi';
import { accessControlConformance, registerConformance, testPluginContext } from '@bifro/spi/testing';
import plugin from '../src';
import { makeTempDir, removeTempDir } from './helpers';

const ACL = `
deny all t1/secret/#
tenant t1
  deny retain #
  allow all %u/#
  user u1
    allow subscribe shared/+
  client client-1
    deny publish u1/locked
`;

const dirs = new WeakMap<AccessControl, string>();

async function create(options: Record<string, unknown> = {}): Promise<AccessControl> {
  const dir = makeTempDir();
  fs.writeFileSync(path.join(dir, 'acl.conf'), ACL);
  const acl = await plugin.acl(testPluginContext({ configDir: dir, options: { pollMs: 50, ...options } }));
  dirs.set(acl, dir);
  return acl;
}

function destroy(acl: AccessControl): void {
  const dir = dirs.get(acl);
  if (dir !== undefined) removeTempDir(dir);
}

describe('acl-file: access control conformance kit', () => {
  registerConformance(
    accessControlConformance({
      create: () => create(),
      destroy,
      expectations: [
        { action: { type: 'connect' }, decision: 'granted' },
        { action: { type: 'publish', topic: 'u1/temp', qos: 1, retain: false }, decision: 'granted' },
        { action: { type: 'publish', topic: 'u1/temp', qos: 1, retain: true }, decision: 'denied' },
        { action: { type: 'publish', topic: 'u1/locked', qos: 0, retain: false }, decision: 'denied' },
        { client: { clientId: 'other' }, action: { type: 'publish', topic: 'u1/locked', qos: 0, retain: false }, decision: 'granted' },
        { client: { userId: 'u2' }, action: { type: 'publish', topic: 'u1/temp', qos: 0, retain: false }, decision: 'defer' },
        { action: { type: 'subscribe', filter: 'shared/x', qos: 0 }, decision: 'granted' },
        { action: { type: 'subscribe', filter: 'shared/#', qos: 0 }, decision: 'defer' },
        { action: { type: 'subscribe', filter: '$share/g/u1/#', qos: 0 }, decision: 'granted' },
        { client: { tenantId: 't2' }, action: { type: 'subscribe', filter: 't1/secret/x', qos: 0 }, decision: 'denied' },
        { client: { tenantId: 't2' }, action: { type: 'subscribe', filter: 'u1/#', qos: 0 }, decision: 'defer' },
        { action: { type: 'unsubscribe', filter: '#' }, decision: 'granted' },
      ],
    }),
    { it },
  );
});

describe('acl-file: conformance with otherwise deny and connect defer', () => {
  registerConformance(
    accessControlConformance({
      create: () => create({ otherwise: 'deny', connect: 'defer', unsubscribe: 'defer' }),
      destroy,
      expectations: [
        { action: { type: 'connect' }, decision: 'defer' },
        { action: { type: 'unsubscribe', filter: 'a' }, decision: 'defer' },
        { client: { userId: 'u2' }, action: { type: 'publish', topic: 'u1/temp', qos: 0, retain: false }, decision: 'denied' },
        { action: { type: 'publish', topic: 'u1/temp', qos: 0, retain: false }, decision: 'granted' },
      ],
    }),
    { it },
  );
});
