import type { InjectOptions, LightMyRequestResponse } from 'fastify';
import { tokenHash } from '../../core/src/api/api-auth';
import type { RunningApi } from '../../core/src/api/api-server';
import { startTestBroker, type TestBroker, type TestBrokerOptions } from './test-broker';

/** The tokens every API test broker accepts: an admin token and one token per test tenant. */
export const API_TOKENS = {
  admin: 'admin-secret-token-0123456789',
  /** Scoped to tenant `t1`. */
  t1: 't1-secret-token-0123456789',
  /** Scoped to tenant `t2`. */
  t2: 't2-secret-token-0123456789',
} as const;

/** The `api:` section of a test broker: 127.0.0.1, an ephemeral port, the {@link API_TOKENS}. */
export function apiYaml(extra = ''): string {
  return [
    'api:',
    '  host: 127.0.0.1',
    '  port: 0',
    '  tokens:',
    `    - { name: admin, hash: "${tokenHash(API_TOKENS.admin)}" }`,
    `    - { name: t1-ops, hash: "${tokenHash(API_TOKENS.t1)}", tenant: t1 }`,
    `    - { name: t2-ops, hash: "${tokenHash(API_TOKENS.t2)}", tenant: t2 }`,
    ...(extra === '' ? [] : [extra]),
  ].join('\n');
}

/** A test broker with the admin API on, and ways to call it. */
export interface ApiBroker extends TestBroker {
  readonly api: RunningApi;
  /** fastify inject (no socket) with `token` as bearer unless `token: null`. */
  inject(opts: InjectOptions & { token?: string | null }): Promise<LightMyRequestResponse>;
  /** A real HTTP request to the listening API; the JSON body parsed when there is one. */
  http(
    method: string,
    path: string,
    opts?: { token?: string | null; body?: unknown },
  ): Promise<{ status: number; body: unknown; text: string; headers: Headers }>;
}

/**
 * Start a broker (see startTestBroker) with the admin API. `yaml` is added to the config after
 * the `api` section; `apiExtra` are more lines inside `api:` (indented by two spaces).
 */
export async function startApiBroker(yaml = '', opts: TestBrokerOptions & { apiExtra?: string } = {}): Promise<ApiBroker> {
  const tb = await startTestBroker(`${apiYaml(opts.apiExtra ?? '')}\n${yaml}`, opts);
  const api = tb.broker.api;
  if (api === undefined) throw new Error('the admin API did not start');
  const auth = (token: string | null | undefined): Record<string, string> =>
    token === null ? {} : { authorization: `Bearer ${token ?? API_TOKENS.admin}` };
  return {
    ...tb,
    api,
    inject({ token, headers, ...rest }) {
      return api.app.inject({ ...rest, headers: { ...auth(token), ...(headers ?? {}) } });
    },
    async http(method, path, { token, body } = {}) {
      const res = await fetch(`${api.url}${path}`, {
        method,
        headers: { ...auth(token), ...(body !== undefined ? { 'content-type': 'application/json' } : {}) },
        body: body === undefined ? undefined : JSON.stringify(body),
      });
      const text = await res.text();
      let parsed: unknown;
      try {
        parsed = text === '' ? undefined : JSON.parse(text);
      } catch {
        parsed = undefined;
      }
      return { status: res.status, body: parsed, text, headers: res.headers };
    },
  };
}
