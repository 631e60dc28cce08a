// @ts-check
import { api, ApiError, saveToken, savedToken, whenUnauthorized } from './api.js';
import { fill, h } from './dom.js';
import * as overview from './pages/overview.js';
import * as tenants from './pages/tenants.js';
import * as tenant from './pages/tenant.js';
import * as sessions from './pages/sessions.js';
import * as retained from './pages/retained.js';
import * as plugins from './pages/plugins.js';

/**
 * @typedef {{ name: string, admin: boolean, tenant?: string }} Who
 * @typedef {{ who: Who, parts: string[], query: URLSearchParams, go: (hash: string) => void }} PageContext
 * @typedef {{ title: string, render: (main: HTMLElement, ctx: PageContext) => (() => void) | void }} Page
 */

/** @type {Record<string, Page & { adminOnly?: boolean }>} */
const PAGES = {
  overview,
  tenants,
  sessions,
  retained,
  plugins: { ...plugins, adminOnly: true },
};

const main = /** @type {HTMLElement} */ (document.getElementById('main'));
const nav = /** @type {HTMLElement} */ (document.getElementById('nav'));
const whoEl = /** @type {HTMLElement} */ (document.getElementById('who'));
const logout = /** @type {HTMLButtonElement} */ (document.getElementById('logout'));

/** @type {Who | undefined} */
let who;
/** @type {(() => void) | void} */
let cleanup;
/** The first page keeps the browser's focus (a first Tab reaches the skip link); later ones move it to the content. */
let moved = false;

function go(/** @type {string} */ hash) {
  if (location.hash === hash) route();
  else location.hash = hash;
}

function route() {
  if (typeof cleanup === 'function') cleanup();
  cleanup = undefined;
  if (who === undefined) return showLogin();
  const [path, q] = location.hash.replace(/^#\/?/, '').split('?');
  const parts = (path || 'overview').split('/').map(decodeURIComponent);
  let page = PAGES[parts[0]] ?? PAGES.overview;
  if (parts[0] === 'tenants' && parts.length > 1) page = tenant;
  for (const a of nav.querySelectorAll('a')) {
    if (a.dataset.page === parts[0]) a.setAttribute('aria-current', 'page');
    else a.removeAttribute('aria-current');
  }
  document.title = `${page.title} · Bifro`;
  main.replaceChildren();
  if ('adminOnly' in page && page.adminOnly && !who.admin) {
    fill(main, h('h1', {}, page.title), h('p', { class: 'notice' }, 'This page needs an admin token.'));
    return;
  }
  cleanup = page.render(main, { who, parts, query: new URLSearchParams(q ?? ''), go });
  if (moved) main.focus({ preventScroll: true });
  moved = true;
}

function showNav() {
  if (who === undefined) return;
  const links = Object.entries(PAGES)
    .filter(([, p]) => !p.adminOnly || who?.admin)
    .map(([id, p]) => h('a', { href: `#/${id}`, 'data-page': id }, p.title));
  fill(nav, links);
  nav.hidden = false;
  logout.hidden = false;
  fill(whoEl, who.admin ? `${who.name} · admin` : `${who.name} · tenant ${who.tenant}`);
}

function showLogin(/** @type {string} */ message = '') {
  nav.hidden = true;
  logout.hidden = true;
  fill(whoEl);
  document.title = 'Log in · Bifro';
  const input = h('input', { type: 'password', id: 'token', name: 'token', autocomplete: 'current-password', required: true });
  const status = h('p', { class: message ? 'notice error' : '', role: 'alert' }, message);
  const form = h(
    'form',
    { class: 'panel login', onsubmit: (/** @type {Event} */ e) => void submit(e) },
    h('h1', {}, 'Bifro dashboard'),
    h('p', { class: 'muted' }, 'Paste an admin API token (', h('code', {}, 'bifro token create'), '). The token stays in this tab.'),
    h('label', { for: 'token' }, 'API token', input),
    h('p', {}, h('button', { type: 'submit' }, 'Log in')),
    status,
  );
  async function submit(/** @type {Event} */ e) {
    e.preventDefault();
    const token = /** @type {HTMLInputElement} */ (input).value.trim();
    try {
      who = await api('/api/v1/whoami', { token });
      saveToken(token);
      showNav();
      route();
    } catch (err) {
      fill(status, err instanceof ApiError && err.status === 401 ? 'That token is not valid.' : `Could not log in: ${String(err)}`);
      status.className = 'notice error';
    }
  }
  fill(main, form);
  input.focus();
}

whenUnauthorized(() => {
  who = undefined;
  saveToken(undefined);
  if (typeof cleanup === 'function') cleanup();
  cleanup = undefined;
  showLogin('The token is no longer accepted; log in again.');
});

logout.addEventListener('click', () => {
  saveToken(undefined);
  who = undefined;
  route();
});
// The skip link moves focus without touching the hash, which is the router's.
document.querySelector('.skip')?.addEventListener('click', (e) => {
  e.preventDefault();
  main.focus();
});
window.addEventListener('hashchange', route);
// Plots take their colours from the theme: draw the page again when the system switches it.
matchMedia('(prefers-color-scheme: dark)').addEventListener('change', () => route());

async function boot() {
  const token = savedToken();
  if (token !== undefined) {
    try {
      who = await api('/api/v1/whoami', { token });
      showNav();
    } catch {
      saveToken(undefined);
    }
  }
  route();
}
void boot();
