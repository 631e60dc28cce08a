import assert from 'node:assert/strict';
import type { AuthProvider, AuthRejectReason, AuthRequest, AuthResult, ExtendedAuthRequest, ExtendedAuthResult } from '../auth';
import type { ConformanceCase, InstanceFactory } from './conformance-case';
import {
  assertNonEmptyString,
  assertOptionalBytes,
  assertStringRecord,
  assertUserProperties,
  call,
  lifecycleCheck,
  withInstance,
} from './contract-checks';
import { ordinaryAuthRequests, sampleAuthRequest } from './fixtures';

/** Every {@link AuthRejectReason}. */
export const AUTH_REJECT_REASONS: readonly AuthRejectReason[] = ['badCredentials', 'notAuthorized', 'banned', 'badAuthMethod', 'error'];

/** Options of {@link authProviderConformance}. */
export interface AuthProviderConformanceOptions extends InstanceFactory<AuthProvider> {
  /** Fields of a CONNECT the provider must accept (merged over a plain request). */
  readonly validRequest?: Partial<AuthRequest>;
  /** Tenant and user the valid request must be accepted as. */
  readonly expectedIdentity?: { readonly tenantId?: string; readonly userId?: string };
  /** Fields of a CONNECT the provider must refuse. */
  readonly invalidRequest?: Partial<AuthRequest>;
  /** Reason the invalid request must be refused with (any reason when absent). */
  readonly expectedRejectReason?: AuthRejectReason;
  /** More requests the provider must answer with a well-formed result, by label. */
  readonly extraRequests?: ReadonlyArray<{ readonly label: string; readonly request: AuthRequest }>;
  /** Authentication Data for the `start` step of each declared method (none when absent). */
  readonly extendedAuthStartData?: Readonly<Record<string, Uint8Array>>;
}

/** Asserts a well-formed {@link AuthResult}. */
export function assertAuthResult(result: unknown, what: string): asserts result is AuthResult {
  assert.ok(typeof result === 'object' && result !== null, `${what} must return an object, got ${String(result)}`);
  const r = result as Record<string, unknown>;
  switch (r.type) {
    case 'ok':
      assertNonEmptyString(r.tenantId, `${what}: ok.tenantId`);
      assertNonEmptyString(r.userId, `${what}: ok.userId`);
      assertStringRecord(r.attrs, `${what}: ok.attrs`);
      assert.ok(r.responseInfo === undefined || typeof r.responseInfo === 'string', `${what}: ok.responseInfo must be a string`);
      assertUserProperties(r.userProperties, `${what}: ok.userProperties`);
      return;
    case 'reject':
      assert.ok(
        AUTH_REJECT_REASONS.includes(r.reason as AuthRejectReason),
        `${what}: reject.reason ${String(r.reason)} is not one of ${AUTH_REJECT_REASONS.join(', ')}`,
      );
      assert.ok(r.text === undefined || typeof r.text === 'string', `${what}: reject.text must be a string`);
      return;
    case 'defer':
      return;
    default:
      assert.fail(`${what}: result type ${String(r.type)} is not ok, reject or defer`);
  }
}

/** Asserts a well-formed {@link ExtendedAuthResult}. */
export function assertExtendedAuthResult(result: unknown, what: string): asserts result is ExtendedAuthResult {
  assert.ok(typeof result === 'object' && result !== null, `${what} must return an object, got ${String(result)}`);
  const r = result as Record<string, unknown>;
  switch (r.type) {
    case 'success':
      assertNonEmptyString(r.tenantId, `${what}: success.tenantId`);
      assertNonEmptyString(r.userId, `${what}: success.userId`);
      assertStringRecord(r.attrs, `${what}: success.attrs`);
      assertUserProperties(r.userProperties, `${what}: success.userProperties`);
      assertOptionalBytes(r.data, `${what}: success.data`);
      return;
    case 'continue':
      assertOptionalBytes(r.data, `${what}: continue.data`);
      return;
    case 'failed':
      assert.ok(
        AUTH_REJECT_REASONS.includes(r.reason as AuthRejectReason),
        `${what}: failed.reason ${String(r.reason)} is not a known reason`,
      );
      assert.ok(r.text === undefined || typeof r.text === 'string', `${what}: failed.text must be a string`);
      return;
    case 'defer':
      return;
    default:
      assert.fail(`${what}: result type ${String(r.type)} is not success, continue, failed or defer`);
  }
}

function extendedRequest(method: string, data: Uint8Array | undefined): ExtendedAuthRequest {
  return { ...sampleAuthRequest({ protocolVersion: 5, username: 'alice' }), phase: 'start', method, data, state: new Map() };
}

/**
 * The conformance kit of {@link AuthProvider}: lifecycle, well-formed results (ok with non-empty
 * tenant and user, reject with a known reason, or defer) for ordinary and odd CONNECTs without
 * throwing, `authMethods`/`extendedAuth` consistency, and the plugin's own valid/invalid
 * requests when given.
 *
 * @example
 * ```ts
 * registerConformance(
 *   authProviderConformance({
 *     create: () => new PasswordFileAuth(file),
 *     validRequest: { username: 'acme/alice', password: Buffer.from('secret') },
 *     expectedIdentity: { tenantId: 'acme', userId: 'alice' },
 *     invalidRequest: { username: 'acme/alice', password: Buffer.from('wrong') },
 *     expectedRejectReason: 'badCredentials',
 *   }),
 *   { it },
 * );
 * ```
 */
export function authProviderConformance(options: AuthProviderConformanceOptions): ConformanceCase[] {
  const cases: ConformanceCase[] = [];
  const add = (name: string, check: (p: AuthProvider, timeoutMs: number) => Promise<void>): void => {
    cases.push({ name: `auth: ${name}`, run: () => withInstance(options, check) });
  };

  add('create, init and close resolve; authenticate is a method', async (p) => lifecycleCheck(['authenticate'])(p));

  for (const { label, request } of [...ordinaryAuthRequests(), ...(options.extraRequests ?? [])]) {
    add(`authenticate answers without throwing: ${label}`, async (p, t) => {
      const result = await call(`authenticate(${label})`, t, () => p.authenticate(request));
      assertAuthResult(result, `authenticate(${label})`);
    });
  }

  add('authMethods, when present, are non-empty distinct strings and come with extendedAuth', async (p) => {
    const methods: unknown = p.authMethods;
    if (methods === undefined) return;
    assert.ok(Array.isArray(methods), 'authMethods must be an array');
    for (const m of methods as unknown[]) assertNonEmptyString(m, 'each authMethods entry');
    assert.equal(new Set(methods).size, methods.length, 'authMethods must not repeat a method');
    if (methods.length > 0) assert.equal(typeof p.extendedAuth, 'function', 'a provider declaring authMethods must implement extendedAuth');
  });

  add('extendedAuth answers the start step of every declared method with a well-formed result', async (p, t) => {
    const extendedAuth = p.extendedAuth?.bind(p);
    if (extendedAuth === undefined) return;
    for (const method of p.authMethods ?? []) {
      const req = extendedRequest(method, options.extendedAuthStartData?.[method]);
      const result = await call(`extendedAuth(start, ${method})`, t, () => extendedAuth(req));
      assertExtendedAuthResult(result, `extendedAuth(start, ${method})`);
    }
  });

  add('extendedAuth does not accept or continue an undeclared method', async (p, t) => {
    const extendedAuth = p.extendedAuth?.bind(p);
    if (extendedAuth === undefined) return;
    const method = 'UNDECLARED-METHOD-bifro-conformance';
    const result = await call(`extendedAuth(start, ${method})`, t, () => extendedAuth(extendedRequest(method, Uint8Array.from([1, 2]))));
    assertExtendedAuthResult(result, `extendedAuth(start, ${method})`);
    assert.ok(
      result.type === 'defer' || result.type === 'failed',
      `extendedAuth for a method not in authMethods must defer or fail, it answered ${result.type}`,
    );
  });

  if (options.validRequest !== undefined) {
    const request = sampleAuthRequest(options.validRequest);
    add('accepts the valid request', async (p, t) => {
      const result = await call('authenticate(valid request)', t, () => p.authenticate(request));
      assertAuthResult(result, 'authenticate(valid request)');
      assert.equal(result.type, 'ok', `the valid request must be accepted, got ${JSON.stringify(result)}`);
      if (result.type !== 'ok') return;
      if (options.expectedIdentity?.tenantId !== undefined)
        assert.equal(result.tenantId, options.expectedIdentity.tenantId, 'tenantId of the valid request');
      if (options.expectedIdentity?.userId !== undefined)
        assert.equal(result.userId, options.expectedIdentity.userId, 'userId of the valid request');
    });
  }

  if (options.invalidRequest !== undefined) {
    const request = sampleAuthRequest(options.invalidRequest);
    add('rejects the invalid request', async (p, t) => {
      const result = await call('authenticate(invalid request)', t, () => p.authenticate(request));
      assertAuthResult(result, 'authenticate(invalid request)');
      assert.equal(result.type, 'reject', `the invalid request must be rejected, got ${JSON.stringify(result)}`);
      if (result.type === 'reject' && options.expectedRejectReason !== undefined) {
        assert.equal(result.reason, options.expectedRejectReason, 'reason of the rejection');
      }
    });
  }

  return cases;
}
