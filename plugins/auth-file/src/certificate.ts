import { X509Certificate } from 'node:crypto';
import type { ClientCertificate } from '@bifro/spi';
import type { CertificateOptions } from './options';
import { MAX_NAME_LENGTH, tenantNameProblem } from './password-file';

// eslint-disable-next-line no-control-regex
const CONTROL = /[\x00-\x1f\x7f]/;

/** The tenant and user a verified client certificate names, or why it names none. */
export type CertificateIdentity =
  { readonly ok: true; readonly tenantId: string; readonly userId: string } | { readonly ok: false; readonly problem: string };

const SAN_TYPE: Readonly<Record<string, string>> = { 'SAN:DNS': 'DNS', 'SAN:URI': 'URI', 'SAN:EMAIL': 'email' };

/**
 * Splits node's `subjectAltName` text (`DNS:a.example, URI:spiffe://acme/x, email:"odd, value"`)
 * into [type, value] pairs; values node quoted (JSON strings) are unquoted.
 */
export function parseSubjectAltName(text: string): Array<[string, string]> {
  const out: Array<[string, string]> = [];
  let i = 0;
  while (i < text.length) {
    const colon = text.indexOf(':', i);
    if (colon < 0) break;
    const type = text.slice(i, colon).trim();
    let j = colon + 1;
    let value: string;
    if (text[j] === '"') {
      let k = j + 1;
      while (k < text.length && text[k] !== '"') k += text[k] === '\\' ? 2 : 1;
      try {
        value = JSON.parse(text.slice(j, k + 1)) as string;
      } catch {
        value = text.slice(j + 1, k);
      }
      j = k + 1;
      const comma = text.indexOf(', ', j);
      i = comma < 0 ? text.length : comma + 2;
    } else {
      const comma = text.indexOf(', ', j);
      value = text.slice(j, comma < 0 ? undefined : comma);
      i = comma < 0 ? text.length : comma + 2;
    }
    out.push([type, value]);
  }
  return out;
}

/** The identity of a certificate under the `certificate` option. An unverified certificate never has one. */
export function certificateIdentity(cert: ClientCertificate, options: CertificateOptions): CertificateIdentity {
  if (cert.authorized !== true) return { ok: false, problem: 'the client certificate is not verified (authorized: false)' };
  let userId: string | undefined;
  if (options.user === 'CN') {
    userId = cert.subject.CN;
    if (userId === undefined || userId === '') return { ok: false, problem: 'the client certificate has no subject CN' };
  } else {
    const type = SAN_TYPE[options.user]!;
    let san: string | undefined;
    try {
      san = new X509Certificate(Buffer.from(cert.raw)).subjectAltName;
    } catch (err) {
      return { ok: false, problem: `the client certificate cannot be parsed: ${(err as Error).message}` };
    }
    userId = parseSubjectAltName(san ?? '').find(([t]) => t === type)?.[1];
    if (userId === undefined || userId === '')
      return { ok: false, problem: `the client certificate has no ${options.user} subject alternative name` };
  }
  // A certificate's user needs no line of the file, so ':' (URIs) is fine; control characters are not.
  const userProblem = userId.length > MAX_NAME_LENGTH || CONTROL.test(userId) ? 'too long, or control characters' : undefined;
  if (userProblem !== undefined) return { ok: false, problem: `the certificate's user ${JSON.stringify(userId)}: ${userProblem}` };
  let tenantId: string | undefined;
  if ('fixed' in options.tenant) tenantId = options.tenant.fixed;
  else {
    tenantId = cert.subject[options.tenant.field];
    if (tenantId === undefined || tenantId === '')
      return { ok: false, problem: `the client certificate has no subject ${options.tenant.field}` };
    const problem = tenantNameProblem(tenantId);
    if (problem !== undefined) return { ok: false, problem: `the certificate's tenant ${JSON.stringify(tenantId)}: ${problem}` };
  }
  return { ok: true, tenantId, userId };
}
