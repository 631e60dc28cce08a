// @ts-check
/** The admin API, called with the token the user logged in with (kept in this tab's sessionStorage only). */

const TOKEN_KEY = 'bifro.dashboard.token';

/** An answer of the API that is not 2xx, with the API's error code and, for settings, the problem per field. */
export class ApiError extends Error {
  /**
   * @param {number} status
   * @param {string} code
   * @param {string} message
   * @param {{ field: string, message: string }[]} [errors]
   */
  constructor(status, code, message, errors) {
    super(message);
    this.status = status;
    this.code = code;
    this.errors = errors ?? [];
  }
}

export function savedToken() {
  return sessionStorage.getItem(TOKEN_KEY) ?? undefined;
}

/** @param {string | undefined} token */
export function saveToken(token) {
  if (token === undefined) sessionStorage.removeItem(TOKEN_KEY);
  else sessionStorage.setItem(TOKEN_KEY, token);
}

/** Called when the API says the token is no longer valid (401). */
let onUnauthorized = () => {};
/** @param {() => void} fn */
export function whenUnauthorized(fn) {
  onUnauthorized = fn;
}

/**
 * @param {string} path under the API, e.g. `/api/v1/tenants`
 * @param {{ method?: string, body?: unknown, token?: string }} [init]
 * @returns {Promise<any>}
 */
export async function api(path, init = {}) {
  const token = init.token ?? savedToken();
  /** @type {Record<string, string>} */
  const headers = { accept: 'application/json' };
  if (token !== undefined) headers.authorization = `Bearer ${token}`;
  if (init.body !== undefined) headers['content-type'] = 'application/json';
  const res = await fetch(path, {
    method: init.method ?? 'GET',
    headers,
    body: init.body === undefined ? undefined : JSON.stringify(init.body),
    cache: 'no-store',
  });
  const text = await res.text();
  const body = text === '' ? undefined : JSON.parse(text);
  if (!res.ok) {
    if (res.status === 401 && init.token === undefined) onUnauthorized();
    throw new ApiError(res.status, body?.code ?? 'HTTP', body?.message ?? `${res.status} ${res.statusText}`, body?.errors);
  }
  return body;
}

/**
 * Every page of a paged list, up to `max` items.
 * @param {string} path
 * @param {Record<string, string | undefined>} [query]
 * @param {number} [max]
 */
export async function all(path, query = {}, max = 5000) {
  /** @type {any[]} */
  const items = [];
  let cursor;
  do {
    const q = new URLSearchParams();
    for (const [k, v] of Object.entries(query)) if (v !== undefined && v !== '') q.set(k, v);
    q.set('limit', String(Math.min(1000, max - items.length)));
    if (cursor !== undefined) q.set('cursor', cursor);
    const page = await api(`${path}?${q}`);
    items.push(...page.items);
    cursor = page.nextCursor;
  } while (cursor !== undefined && items.length < max);
  return { items, more: cursor !== undefined };
}

/** @param {string} s a path segment (tenant id, client id, topic) */
export const seg = (s) => encodeURIComponent(s);
