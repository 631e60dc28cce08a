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
 * A tenant picker for admin tokens: a text field suggesting the tenants the broker knows (the
 * suggestions are a convenience: when they fail to load, the field still takes any id). A tenant
 * token's pages work on its own tenant, so the field is hidden.
 * @param {import('../app.js').PageContext} ctx
 * @param {string} current
 */
export function tenantField(ctx, current) {
  if (!ctx.who.admin) return h('input', { type: 'hidden', name: 'tenant', value: ctx.who.tenant });
  const list = h('datalist', { id: 'known-tenants' });
  void all('/api/v1/tenants', {}, 1000)
    .then((p) =>
      fill(
        list,
        p.items.map((t) => h('option', { value: t.tenant })),
      ),
    )
    .catch(() => undefined);
  return h(
    'label',
    {},
    'Tenant',
    h('input', { type: 'text', name: 'tenant', value: current, list: 'known-tenants', required: true, autocomplete: 'off' }),
    list,
  );
}
