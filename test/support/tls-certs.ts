import { execFileSync } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';

/** A key pair with its certificate, as file paths and PEM contents. */
export interface CertFiles {
  readonly cert: string;
  readonly key: string;
  readonly certPem: Buffer;
  readonly keyPem: Buffer;
}

/** Throwaway PKI for one test file: made with the openssl CLI (EC P-256, valid two days). */
export interface TestCerts {
  readonly dir: string;
  /** The CA that signed `server` and `client`. */
  readonly ca: CertFiles;
  /** For 127.0.0.1 and localhost (subjectAltName). */
  readonly server: CertFiles;
  /** CN=device-17, O=Acme; signed by `ca`. */
  readonly client: CertFiles;
  /** Another CA, unknown to the broker. */
  readonly otherCa: CertFiles;
  /** CN=intruder; signed by `otherCa`. */
  readonly rogueClient: CertFiles;
  remove(): void;
}

const EC = ['-newkey', 'ec', '-pkeyopt', 'ec_paramgen_curve:prime256v1', '-nodes'];

function openssl(dir: string, args: string[]): void {
  execFileSync('openssl', args, { cwd: dir, stdio: ['ignore', 'ignore', 'pipe'] });
}

function files(dir: string, name: string): CertFiles {
  const cert = path.join(dir, `${name}.crt`);
  const key = path.join(dir, `${name}.key`);
  return { cert, key, certPem: readFileSync(cert), keyPem: readFileSync(key) };
}

function makeCa(dir: string, name: string, cn: string): CertFiles {
  openssl(dir, [
    'req',
    '-x509',
    ...EC,
    '-keyout',
    `${name}.key`,
    '-out',
    `${name}.crt`,
    '-days',
    '2',
    '-subj',
    `/CN=${cn}`,
    '-addext',
    'basicConstraints=critical,CA:TRUE',
    '-addext',
    'keyUsage=critical,keyCertSign,cRLSign',
  ]);
  return files(dir, name);
}

function makeLeaf(dir: string, name: string, subject: string, extensions: string, ca: string, serial: string): CertFiles {
  writeFileSync(path.join(dir, `${name}.ext`), extensions);
  openssl(dir, ['req', ...EC, '-keyout', `${name}.key`, '-out', `${name}.csr`, '-subj', subject]);
  openssl(dir, [
    'x509',
    '-req',
    '-in',
    `${name}.csr`,
    '-CA',
    `${ca}.crt`,
    '-CAkey',
    `${ca}.key`,
    '-set_serial',
    serial,
    '-days',
    '2',
    '-extfile',
    `${name}.ext`,
    '-out',
    `${name}.crt`,
  ]);
  return files(dir, name);
}

/** Generate the PKI into a fresh temporary directory. Call once per test file (beforeAll); `remove()` in afterAll. */
export function createTestCerts(): TestCerts {
  const dir = mkdtempSync(path.join(os.tmpdir(), 'bifro-certs-'));
  const ca = makeCa(dir, 'ca', 'Bifro Test CA');
  const otherCa = makeCa(dir, 'other-ca', 'Other CA');
  const server = makeLeaf(
    dir,
    'server',
    '/CN=localhost',
    'subjectAltName=IP:127.0.0.1,DNS:localhost\nextendedKeyUsage=serverAuth\n',
    'ca',
    '0x1001',
  );
  const client = makeLeaf(dir, 'client', '/O=Acme/CN=device-17', 'extendedKeyUsage=clientAuth\n', 'ca', '0x2002');
  const rogueClient = makeLeaf(dir, 'rogue', '/CN=intruder', 'extendedKeyUsage=clientAuth\n', 'other-ca', '0x3003');
  return { dir, ca, server, client, otherCa, rogueClient, remove: () => rmSync(dir, { recursive: true, force: true }) };
}
