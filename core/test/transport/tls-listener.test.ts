import { X509Certificate } from 'node:crypto';
import { writeFileSync } from 'node:fs';
import path from 'node:path';
import tls from 'node:tls';
import { BifroError } from '../../src/base/errors';
import type { ListenerConfig } from '../../src/base/config-types';
import { bindListener } from '../../src/transport/listeners';
import { proxyV1Tcp4 } from '../../../test/support/proxy-headers';
import { createTestCerts, type CertFiles, type TestCerts } from '../../../test/support/tls-certs';
import { closedWithin, listenerConfig, startHarness, startProxyRelay, tcpConnect, type Harness } from './harness';

let certs: TestCerts;
beforeAll(() => {
  certs = createTestCerts();
});
afterAll(() => certs.remove());

function tlsListener(tlsOverrides: Partial<NonNullable<ListenerConfig['tls']>> = {}, rest: Partial<ListenerConfig> = {}): ListenerConfig {
  return listenerConfig({
    type: 'tls',
    tls: {
      cert: certs.server.cert,
      key: certs.server.key,
      ca: certs.ca.cert,
      requestCert: false,
      rejectUnauthorized: true,
      ...tlsOverrides,
    },
    ...rest,
  });
}

/** Connect over TLS trusting the test CA; resolves with the socket once it is usable or closed. */
function tlsConnect(port: number, identity?: CertFiles, socket?: import('node:net').Socket): Promise<tls.TLSSocket> {
  return new Promise((resolve) => {
    const client = tls.connect({
      host: '127.0.0.1',
      port,
      socket,
      ca: certs.ca.certPem,
      cert: identity?.certPem,
      key: identity?.keyPem,
      servername: 'localhost',
    });
    client.on('error', () => undefined);
    client.once('secureConnect', () => resolve(client));
    client.once('close', () => resolve(client));
  });
}

describe('tls listener without client certificates', () => {
  let h: Harness;
  beforeAll(async () => {
    h = await startHarness(tlsListener(), { handshakeTimeoutMs: 1500 });
  });
  afterAll(() => h.close());

  it('accepts a client that verifies the server certificate (SAN 127.0.0.1); bytes flow both ways', async () => {
    const client = await tlsConnect(h.listener.port);
    expect(client.authorized).toBe(true);
    const a = await h.nextAccepted();
    expect(a.origin).toEqual({
      listener: 'test-tls',
      remoteAddress: '127.0.0.1',
      remotePort: client.localPort,
      clientCertificate: undefined,
    });
    client.write('hello');
    expect((await a.waitBytes(5)).toString()).toBe('hello');
    const echoed = new Promise<string>((resolve) => client.once('data', (d: Buffer) => resolve(d.toString())));
    a.stream.write('world');
    expect(await echoed).toBe('world');
    client.destroy();
    await a.closed;
  });

  it('closes a connection that never starts its handshake, and counts it', async () => {
    const raw = await tcpConnect(h.listener.port);
    expect(await closedWithin(raw, 3000)).toBe(true);
    expect(h.listener.stats.handshakeTimeouts + h.listener.stats.tlsHandshakeFailures).toBeGreaterThan(0);
  });

  it('survives garbage instead of a ClientHello', async () => {
    const before = h.listener.stats.tlsHandshakeFailures;
    const raw = await tcpConnect(h.listener.port);
    raw.write('GET / HTTP/1.1\r\n\r\n');
    expect(await closedWithin(raw, 3000)).toBe(true);
    // At least this one (the previous test's timed-out handshake may be counted as a failure late).
    expect(h.listener.stats.tlsHandshakeFailures).toBeGreaterThanOrEqual(before + 1);
    const client = await tlsConnect(h.listener.port);
    expect(client.authorized).toBe(true);
    client.destroy();
  });
});

describe('tls listener requesting client certificates (rejectUnauthorized)', () => {
  let h: Harness;
  beforeAll(async () => {
    h = await startHarness(tlsListener({ requestCert: true, rejectUnauthorized: true }));
  });
  afterAll(() => h.close());

  it('maps the client certificate into the origin', async () => {
    const client = await tlsConnect(h.listener.port, certs.client);
    const a = await h.nextAccepted();
    const x509 = new X509Certificate(certs.client.certPem);
    expect(a.origin.clientCertificate).toEqual({
      subject: { O: 'Acme', CN: 'device-17' },
      issuer: { CN: 'Bifro Test CA' },
      fingerprint256: x509.fingerprint256,
      serialNumber: '2002',
      authorized: true,
      raw: x509.raw,
    });
    client.destroy();
  });

  it('refuses a certificate from another CA', async () => {
    const accepted = h.accepted.length;
    const client = await tlsConnect(h.listener.port, certs.rogueClient);
    expect(await closedWithin(client, 3000)).toBe(true);
    expect(h.accepted.length).toBe(accepted);
    expect(h.listener.stats.tlsHandshakeFailures).toBeGreaterThan(0);
  });

  it('refuses a client without a certificate', async () => {
    const accepted = h.accepted.length;
    const client = await tlsConnect(h.listener.port);
    expect(await closedWithin(client, 3000)).toBe(true);
    expect(h.accepted.length).toBe(accepted);
  });
});

describe('tls listener requesting client certificates without rejecting', () => {
  let h: Harness;
  beforeAll(async () => {
    h = await startHarness(tlsListener({ requestCert: true, rejectUnauthorized: false }));
  });
  afterAll(() => h.close());

  it('lets an unverified certificate through with authorized = false', async () => {
    const client = await tlsConnect(h.listener.port, certs.rogueClient);
    const a = await h.nextAccepted();
    expect(a.origin.clientCertificate).toMatchObject({ subject: { CN: 'intruder' }, issuer: { CN: 'Other CA' }, authorized: false });
    client.destroy();
  });

  it('lets a client without a certificate through with none in the origin', async () => {
    const client = await tlsConnect(h.listener.port);
    const a = await h.nextAccepted();
    expect(a.origin.clientCertificate).toBeUndefined();
    client.destroy();
  });
});

describe('tls listener with PROXY protocol', () => {
  let h: Harness;
  beforeAll(async () => {
    h = await startHarness(tlsListener({ requestCert: true, rejectUnauthorized: true }, { proxyProtocol: true }));
  });
  afterAll(() => h.close());

  it('reads the header before the handshake; the origin has the header address and the certificate', async () => {
    const raw = await tcpConnect(h.listener.port);
    // Written before the ClientHello: the two may share a segment, which the listener must handle.
    raw.write(proxyV1Tcp4('192.0.2.50', 41000, '10.0.0.1', 8883));
    const client = await tlsConnect(h.listener.port, certs.client, raw);
    expect(client.authorized).toBe(true);
    const a = await h.nextAccepted();
    expect(a.origin).toMatchObject({ remoteAddress: '192.0.2.50', remotePort: 41000, clientCertificate: { subject: { CN: 'device-17' } } });
    client.write('x');
    expect((await a.waitBytes(1)).toString()).toBe('x');
    client.destroy();
  });

  it('handles the header and the ClientHello arriving in one segment', async () => {
    const relay = await startProxyRelay(h.listener.port, proxyV1Tcp4('192.0.2.51', 41001, '10.0.0.1', 8883));
    const client = await tlsConnect(relay.port, certs.client);
    expect(client.authorized).toBe(true);
    const a = await h.nextAccepted();
    expect(a.origin).toMatchObject({ remoteAddress: '192.0.2.51', remotePort: 41001, clientCertificate: { authorized: true } });
    client.destroy();
    await relay.close();
  });

  it('refuses a TLS client that sends no header', async () => {
    const before = h.listener.stats.proxyHeaderFailures;
    const client = await tlsConnect(h.listener.port, certs.client);
    expect(await closedWithin(client, 3000)).toBe(true);
    expect(h.listener.stats.proxyHeaderFailures).toBe(before + 1);
  });
});

describe('tls files', () => {
  it.each([
    ['an unreadable certificate', () => ({ cert: path.join(certs.dir, 'missing.crt') }), 'missing.crt', /cannot read tls.cert/],
    ['a certificate that is not PEM', () => ({ cert: writeJunk('junk.crt') }), 'junk.crt', /tls.cert .* is not a usable PEM certificate/],
    ['a key that is not PEM', () => ({ key: writeJunk('junk.key') }), 'junk.key', /tls.key .* is not a usable PEM private key/],
    ['a CA that is not PEM', () => ({ ca: writeJunk('junk-ca.crt') }), 'junk-ca.crt', /tls.ca/],
    ['a key of another certificate', () => ({ key: certs.client.key }), 'server.crt', /do not form a usable pair/],
  ])('refuse %s at bind with BIFRO_LISTENER_TLS_INVALID naming listener and file', async (_name, files, file, message) => {
    const err = await bindListener(tlsListener(files()), () => undefined).catch((e: unknown) => e);
    expect(err).toBeInstanceOf(BifroError);
    expect((err as BifroError).code).toBe('BIFRO_LISTENER_TLS_INVALID');
    expect((err as BifroError).message).toContain('listener "test-tls"');
    expect((err as BifroError).message).toContain(file);
    expect((err as BifroError).message).toMatch(message);
  });
});

function writeJunk(name: string): string {
  const file = path.join(certs.dir, name);
  writeFileSync(file, 'not a pem file\n');
  return file;
}
