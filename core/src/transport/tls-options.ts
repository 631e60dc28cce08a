import { createPrivateKey, X509Certificate } from 'node:crypto';
import { readFile } from 'node:fs/promises';
import tls from 'node:tls';
import type { ClientCertificate } from '@bifro/spi';
import { BifroError, describeError } from '../base/errors';
import type { ListenerConfig } from '../base/config-types';

/** What a TLS server of a tls / wss listener is built from. */
export interface ListenerTlsOptions {
  readonly cert: Buffer;
  readonly key: Buffer;
  readonly ca?: Buffer;
  readonly requestCert: boolean;
  readonly rejectUnauthorized: boolean;
}

function tlsInvalid(config: ListenerConfig, message: string, file?: string): BifroError {
  return new BifroError('BIFRO_LISTENER_TLS_INVALID', `listener "${config.name}": ${message}`, {
    listener: config.name,
    ...(file === undefined ? {} : { file }),
  });
}

async function readPem(config: ListenerConfig, key: 'cert' | 'key' | 'ca', file: string): Promise<Buffer> {
  try {
    return await readFile(file);
  } catch (err) {
    throw tlsInvalid(config, `cannot read tls.${key} ${file} (${(err as NodeJS.ErrnoException).code ?? describeError(err)})`, file);
  }
}

/**
 * Read and check the certificate, key and CA of a tls / wss listener. Rejects with
 * BIFRO_LISTENER_TLS_INVALID naming the listener and the file at fault (unreadable, not PEM,
 * key not matching the certificate).
 */
export async function loadTlsOptions(config: ListenerConfig): Promise<ListenerTlsOptions> {
  const files = config.tls;
  if (files === undefined) throw tlsInvalid(config, `a ${config.type} listener needs tls.cert and tls.key`);
  const cert = await readPem(config, 'cert', files.cert);
  const key = await readPem(config, 'key', files.key);
  const ca = files.ca === undefined ? undefined : await readPem(config, 'ca', files.ca);
  const check = (what: 'cert' | 'key' | 'ca', file: string, parse: () => unknown): void => {
    try {
      parse();
    } catch (err) {
      throw tlsInvalid(
        config,
        `tls.${what} ${file} is not a usable PEM ${what === 'key' ? 'private key' : 'certificate'}: ${describeError(err)}`,
        file,
      );
    }
  };
  check('cert', files.cert, () => new X509Certificate(cert));
  check('key', files.key, () => createPrivateKey(key));
  if (ca !== undefined && files.ca !== undefined) check('ca', files.ca, () => new X509Certificate(ca));
  try {
    tls.createSecureContext({ cert, key, ca });
  } catch (err) {
    throw tlsInvalid(
      config,
      `tls.cert ${files.cert} and tls.key ${files.key} do not form a usable pair: ${describeError(err)}`,
      files.cert,
    );
  }
  return { cert, key, ca, requestCert: files.requestCert, rejectUnauthorized: files.rejectUnauthorized };
}

/** Options for tls.createServer / https.createServer. */
export function tlsServerOptions(options: ListenerTlsOptions, handshakeTimeoutMs: number): tls.TlsOptions {
  return {
    cert: options.cert,
    key: options.key,
    ca: options.ca,
    requestCert: options.requestCert,
    // Only meaningful with requestCert; false lets unverified certificates through with authorized = false.
    rejectUnauthorized: options.requestCert && options.rejectUnauthorized,
    handshakeTimeout: handshakeTimeoutMs,
  };
}

/** Distinguished name fields as strings; a repeated field (two OUs) is joined with ", ". */
function nameFields(name: unknown): Record<string, string> {
  const out: Record<string, string> = {};
  if (typeof name !== 'object' || name === null) return out;
  for (const [field, value] of Object.entries(name)) {
    if (typeof value === 'string') out[field] = value;
    else if (Array.isArray(value)) out[field] = value.map(String).join(', ');
  }
  return out;
}

/** The certificate the client presented on a secured socket, for the auth chain; undefined when it sent none. */
export function clientCertificateOf(socket: tls.TLSSocket): ClientCertificate | undefined {
  const peer = socket.getPeerCertificate(false) as Partial<tls.PeerCertificate> | null;
  if (peer === null || peer.raw === undefined) return undefined;
  return {
    subject: nameFields(peer.subject),
    issuer: nameFields(peer.issuer),
    fingerprint256: peer.fingerprint256 ?? '',
    serialNumber: peer.serialNumber ?? '',
    authorized: socket.authorized,
    raw: peer.raw,
  };
}
