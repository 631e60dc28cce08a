// @ts-check
import { all, ApiError } from '../api.js';
import { fill, h } from '../dom.js';

/**
 * A notice that says what went wrong, in the API's words.
 * @param {unknown} err
 */
export function errorNotice(err) {
  const text = err instanceof ApiError ? `${err.message} (${err.code}, HTTP ${err.status})` : String(err);
  return h('p', { class: 'notice error', role: 'alert' }, text);
}

/**
 * Runs `fn` now and again `ms` after each run ends, while the page is shown; returns the stop function.
 * @param {() => Promise<void>} fn
 * @param {number | (() => number)} ms a pause, or a function giving the next one
 */
export function every(fn, ms) {
  let stopped = false;
  /** @type {ReturnType<typeof setTimeout> | undefined} */
  let timer;
  const tick = async () => {
    // A hidden tab asks nothing (and catches up when shown again).
    if (!document.hidden) await fn();
    if (!stopped) timer = setTimeout(tick, typeof ms === 'number' ? ms : ms());
  };
  void tick();
  return () => {
    stopped = true;
    clearTimeout(timer);
  };
}

/**
 * A tile: one figure and what it is.
 * @param {string} label
 */
export function tile(label) {
  const value = h('div', { class: 'value' }, '—');
  return { element: h('div', { class: 'panel tile' }, value, h('div', { class: 'label' }, label)), value };
}

/**
 * The tenant a tenant-scoped page works on: the token's own, or the `tenant` query parameter.
 * @param {import('../app.js').PageContext} ctx
 */
export function tenantOf(ctx) {
  return ctx.who.tenant ?? ctx.query.get('tenant') ?? '';
}

/**
 * The tenant picker of a tenant-scoped page (sessions, retained). A tenant token works on its own
 * tenant: no picker, a hidden field. An admin picks among the tenants the broker knows; a page
 * opened without a tenant is given the busiest one (most connections), so it opens on data rather
 * than on an empty form. Should the list fail to load, a text field takes any tenant id instead.
 * @param {import('../app.js').PageContext} ctx
 * @param {string} current the tenant in the URL, or ''
 * @param {(tenant: string | undefined, picked: boolean) => void} pick called when the user picks a
 *   tenant (`picked`), or with the busiest one when `current` is '' (`undefined`: no tenant yet)
 */
export function tenantField(ctx, current, pick) {
  if (!ctx.who.admin) return h('input', { type: 'hidden', name: 'tenant', value: ctx.who.tenant });
  const select = /** @type {HTMLSelectElement} */ (
    h(
      'select',
      { name: 'tenant', id: 'tenant-picker', required: true, onchange: () => pick(select.value, true) },
      h('option', { value: current }, current || 'Loading tenants…'),
    )
  );
  const label = h('label', {}, 'Tenant', select);
  // The busiest tenant is given only while the page is still the one asked for.
  const asked = location.hash;
  void all('/api/v1/tenants', {}, MAX_PICKER_TENANTS)
    .then(({ items }) => {
      /** @type {string[]} */
      const ids = items.map((/** @type {any} */ t) => t.tenant);
      // A link to a tenant not seen since the start still opens on it.
      if (current !== '' && !ids.includes(current)) ids.unshift(current);
      if (ids.length === 0) {
        fill(select, h('option', { value: '' }, 'no tenant seen yet'));
        select.disabled = true;
      } else {
        fill(
          select,
          ids.map((id) => h('option', { value: id }, id)),
        );
        select.value = current;
      }
      if (current === '' && location.hash === asked) pick(busiest(items), false);
    })
    .catch(() => {
      const input = h('input', { type: 'text', name: 'tenant', value: current, required: true, autocomplete: 'off' });
      fill(label, 'Tenant', input);
    });
  return label;
}

/** The picker lists the first tenants by id, as many as one page of the API gives. */
const MAX_PICKER_TENANTS = 1000;

/**
 * The tenant with the most connections, the first by id among equals.
 * @param {{ tenant: string, connections: number }[]} items
 */
function busiest(items) {
  let best = items[0];
  for (const t of items) if (t.connections > best.connections) best = t;
  return best?.tenant;
}
