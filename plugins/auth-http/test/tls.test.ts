import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { createTestCerts, type TestCerts } from '../../../test/support/tls-certs';
import { closeAll, connect, make } from './helpers';
import { startService, type AuthService } from './service';

jest.setTimeout(20000);

let certs: TestCerts;
let service: AuthService;
let configDir: string;

beforeAll(async () => {
  certs = createTestCerts();
  service = await startService({
    https: { cert: certs.server.certPem, key: certs.server.keyPem },
    handler: () => ({ json: { result: 'allow', tenant: 'secure', user: 'u' } }),
  });
  configDir = mkdtempSync(path.join(os.tmpdir(), 'bifro-auth-http-tls-'));
  writeFileSync(path.join(configDir, 'ca.pem'), certs.ca.certPem);
  writeFileSync(path.join(configDir, 'not-pem.txt'), 'hello');
});

afterEach(() => closeAll());

afterAll(async () => {
  await service.close();
  certs.remove();
  rmSync(configDir, { recursive: true, force: true });
});

const OK = { type: 'ok', tenantId: 'secure', userId: 'u' };

describe('auth-http: TLS to the service', () => {
  it('trusts a service whose certificate chains to tls.ca (a path relative to the config folder)', async () => {
    const m = await make({ url: service.origin, tls: { ca: 'ca.pem' } }, {}, configDir);
    expect(await m.provider.authenticate(connect('a', 'b'))).toMatchObject(OK);
    expect(service.requests.length).toBeGreaterThan(0);
  });

  it('takes PEM text in tls.ca too', async () => {
    const m = await make({ url: service.origin, tls: { ca: certs.ca.certPem.toString() } });
    expect(await m.provider.authenticate(connect('a', 'b'))).toMatchObject(OK);
  });

  it('refuses a service whose certificate does not chain to tls.ca (fail closed)', async () => {
    const m = await make({ url: service.origin, tls: { ca: certs.otherCa.cert } });
    expect(await m.provider.authenticate(connect('a', 'b'))).toMatchObject({ type: 'reject', reason: 'error' });
    expect(m.warnings()[0]).toMatch(/^BIFRO_AUTH_HTTP_SERVICE_FAILED: .*TLS failure/);
  });

  it('refuses a service with a certificate for another name (servername)', async () => {
    const m = await make({ url: service.origin, tls: { ca: certs.ca.cert, servername: 'auth.example.com' } });
    expect(await m.provider.authenticate(connect('a', 'b'))).toMatchObject({ type: 'reject', reason: 'error' });
    expect(m.warnings()[0]).toMatch(/TLS failure/);
  });

  it('without tls.ca the system CAs apply: the test CA is not trusted', async () => {
    const m = await make({ url: service.origin });
    expect(await m.provider.authenticate(connect('a', 'b'))).toMatchObject({ type: 'reject', reason: 'error' });
  });

  it('rejectUnauthorized false accepts any certificate', async () => {
    const m = await make({ url: service.origin, tls: { rejectUnauthorized: false } });
    expect(await m.provider.authenticate(connect('a', 'b'))).toMatchObject(OK);
  });

  it('presents a client certificate (cert + key) to a service that requires one', async () => {
    const mtls = await startService({
      https: { cert: certs.server.certPem, key: certs.server.keyPem, clientCa: certs.ca.certPem },
      handler: () => ({ json: { result: 'allow', tenant: 'secure', user: 'u' } }),
    });
    try {
      const without = await make({ url: mtls.origin, tls: { ca: certs.ca.cert } });
      expect(await without.provider.authenticate(connect('a', 'b'))).toMatchObject({ type: 'reject', reason: 'error' });
      const rogue = await make({ url: mtls.origin, tls: { ca: certs.ca.cert, cert: certs.rogueClient.cert, key: certs.rogueClient.key } });
      expect(await rogue.provider.authenticate(connect('a', 'b'))).toMatchObject({ type: 'reject', reason: 'error' });
      expect(mtls.requests).toHaveLength(0);
      const m = await make({ url: mtls.origin, tls: { ca: certs.ca.cert, cert: certs.client.cert, key: certs.client.key } });
      expect(await m.provider.authenticate(connect('a', 'b'))).toMatchObject(OK);
      expect(mtls.requests).toHaveLength(1);
    } finally {
      closeAll();
      await mtls.close();
    }
  });

  it('fails the load on an unreadable or non-PEM file, naming it', async () => {
    await expect(make({ url: service.origin, tls: { ca: 'missing.pem' } }, {}, configDir)).rejects.toThrow(
      new RegExp(
        `^BIFRO_AUTH_HTTP_TLS_INVALID: @bifro/plugin-auth-http: options.tls.ca: cannot read ${path.join(configDir, 'missing.pem')}`,
      ),
    );
    await expect(make({ url: service.origin, tls: { ca: 'not-pem.txt' } }, {}, configDir)).rejects.toThrow(
      /options.tls.ca: .*not-pem.txt is not PEM/,
    );
    await expect(make({ url: service.origin, tls: { cert: certs.client.cert, key: certs.server.key } })).rejects.toThrow(
      /^BIFRO_AUTH_HTTP_TLS_INVALID: .*cannot be used/,
    );
  });
});
