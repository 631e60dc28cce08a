import * as fs from 'node:fs';
import * as path from 'node:path';
import type { AuthProvider } from '@bifro/spi';
import { authProviderConformance, registerConformance, testPluginContext } from '@bifro/spi/testing';
import plugin from '../src';
import { ScramClient } from '../src/scram';
import { entryLine, makeTempDir, removeTempDir } from './helpers';

/** Folder of each provider under test, removed afterwards. */
const dirs = new WeakMap<AuthProvider, string>();
let TEXT: string;

beforeAll(async () => {
  TEXT = [
    '# conformance users',
    await entryLine({ tenant: 'acme', user: 'alice', password: 's3cret', scram: true, attrs: { role: 'admin' } }),
    await entryLine({ user: 'dev', password: 'dev-pw' }),
  ].join('\n');
});

async function create(options: Record<string, unknown> = {}): Promise<AuthProvider> {
  const dir = makeTempDir();
  fs.writeFileSync(path.join(dir, 'passwd'), TEXT);
  const provider = await plugin.auth(testPluginContext({ configDir: dir, options: { file: 'passwd', ...options } }));
  dirs.set(provider, dir);
  return provider;
}

function destroy(provider: AuthProvider): void {
  const dir = dirs.get(provider);
  if (dir !== undefined) removeTempDir(dir);
}

describe('auth-file: auth provider conformance kit', () => {
  registerConformance(
    authProviderConformance({
      create: () => create(),
      destroy,
      validRequest: { username: 'acme/alice', password: Buffer.from('s3cret') },
      expectedIdentity: { tenantId: 'acme', userId: 'alice' },
      invalidRequest: { username: 'acme/alice', password: Buffer.from('wrong') },
      expectedRejectReason: 'badCredentials',
      extraRequests: [
        {
          label: 'a mosquitto-style bare user',
          request: {
            protocolVersion: 4,
            clientId: 'c',
            username: 'dev',
            password: Buffer.from('dev-pw'),
            remoteAddress: '127.0.0.1',
            remotePort: 1,
            listener: 'tcp',
          },
        },
        {
          label: 'an unverified client certificate',
          request: {
            protocolVersion: 4,
            clientId: 'c',
            remoteAddress: '127.0.0.1',
            remotePort: 1,
            listener: 'tls',
            clientCertificate: {
              subject: { CN: 'x' },
              issuer: {},
              fingerprint256: '',
              serialNumber: '01',
              authorized: false,
              raw: new Uint8Array(),
            },
          },
        },
      ],
      extendedAuthStartData: {
        'SCRAM-SHA-256': Buffer.from(new ScramClient('SCRAM-SHA-256', 'acme/alice', 's3cret').first),
        'SCRAM-SHA-512': Buffer.from(new ScramClient('SCRAM-SHA-512', 'acme/alice', 's3cret').first),
      },
    }),
    { it },
  );
});

describe('auth-file: conformance with unknownUser: reject and certificate identity on', () => {
  registerConformance(
    authProviderConformance({
      create: () => create({ unknownUser: 'reject', certificate: { user: 'CN', tenant: 'O' } }),
      destroy,
      validRequest: { username: 'dev', password: Buffer.from('dev-pw') },
      expectedIdentity: { tenantId: 'default', userId: 'dev' },
      invalidRequest: { username: 'nobody', password: Buffer.from('x') },
      expectedRejectReason: 'badCredentials',
    }),
    { it },
  );
});
