// @ts-check
import { api, seg } from '../api.js';
import { fill, h, time } from '../dom.js';
import { errorNotice, tenantField, tenantOf } from './common.js';

export const title = 'Retained';

/** Longest payload preview shown in the table. */
const PREVIEW = 120;

/**
 * Browse a tenant's retained messages by topic filter; clear one.
 * @param {HTMLElement} main
 * @param {import('../app.js').PageContext} ctx
 */
export function render(main, ctx) {
  const tenant = tenantOf(ctx);
  const filter = ctx.query.get('filter') ?? '#';
  const results = h('div');
  const form = h(
    'form',
    { class: 'row', role: 'search', onsubmit: (/** @type {Event} */ e) => search(e) },
    tenantField(ctx, tenant, (t, picked) => open(t, picked)),
    h('label', {}, 'Topic filter', h('input', { type: 'text', name: 'filter', value: filter, autocomplete: 'off', required: true })),
    h('button', { type: 'submit' }, 'Browse'),
  );
  fill(main, h('h1', {}, 'Retained messages'), form, results);

  /** @param {Event} e */
  function search(e) {
    e.preventDefault();
    const data = new FormData(/** @type {HTMLFormElement} */ (form));
    const q = new URLSearchParams({ tenant: String(data.get('tenant') ?? ''), filter: String(data.get('filter') ?? '#') });
    ctx.go(`#/retained?${q}`);
  }
  /**
   * A tenant picked (a new history entry) or given as the busiest (in place of the URL without one).
   * @param {string | undefined} t
   * @param {boolean} picked
   */
  function open(t, picked) {
    if (t === undefined) {
      fill(results, h('p', { class: 'muted' }, 'No tenant has connected since the broker started.'));
      return;
    }
    const hash = `#/retained?${new URLSearchParams({ tenant: t, filter })}`;
    if (picked) ctx.go(hash);
    else location.replace(hash);
  }
  if (tenant === '') {
    fill(results, h('p', { class: 'muted' }, 'Loading tenants…'));
    return;
  }
  const tbody = h('tbody');
  const more = h('p');
  const status = h('div', { role: 'status' });
  fill(
    results,
    status,
    h(
      'div',
      { class: 'panel scroll' },
      h(
        'table',
        { id: 'retained-table' },
        h(
          'thead',
          {},
          h(
            'tr',
            {},
            ['Topic', 'Payload', 'QoS', 'Published', 'Expires', ''].map((c) => h('th', { scope: 'col' }, c)),
          ),
        ),
        tbody,
      ),
    ),
    more,
  );
  const base = `/api/v1/tenants/${seg(tenant)}/retained`;

  /** @param {string | undefined} cursor */
  async function load(cursor) {
    try {
      const q = new URLSearchParams({ filter, limit: '100', ...(cursor ? { cursor } : {}) });
      const page = await api(`${base}?${q}`);
      if (cursor === undefined && page.items.length === 0)
        fill(tbody, h('tr', {}, h('td', { colspan: 6, class: 'muted' }, `No retained message matches ${filter}.`)));
      for (const m of page.items) tbody.append(row(m));
      fill(
        more,
        page.nextCursor ? h('button', { type: 'button', class: 'quiet', onclick: () => void load(page.nextCursor) }, 'Show more') : null,
      );
    } catch (err) {
      fill(status, errorNotice(err));
    }
  }

  /** @param {any} m */
  function row(m) {
    const text = m.payload === undefined ? `${atob(m.payloadBase64).length} bytes, binary` : m.payload;
    const preview = text.length > PREVIEW ? `${text.slice(0, PREVIEW)}…` : text;
    const tr = h(
      'tr',
      {},
      h('td', { class: 'mono' }, m.topic),
      h('td', { class: m.payload === undefined ? 'muted' : 'mono' }, preview),
      h('td', {}, String(m.qos)),
      h('td', {}, time(m.publishedAt)),
      h('td', {}, m.expiresAt ? time(m.expiresAt) : 'never'),
      h(
        'td',
        {},
        h(
          'button',
          {
            type: 'button',
            class: 'danger',
            'aria-label': `Clear ${m.topic}`,
            onclick: () => void clear(m.topic, tr),
          },
          'Clear',
        ),
      ),
    );
    return tr;
  }

  /**
   * @param {string} topic
   * @param {HTMLElement} tr
   */
  async function clear(topic, tr) {
    if (!confirm(`Clear the retained message of ${topic}?`)) return;
    try {
      await api(`${base}/${seg(topic)}`, { method: 'DELETE' });
      tr.remove();
      fill(status, h('p', { class: 'notice ok' }, `Cleared ${topic}.`));
    } catch (err) {
      fill(status, errorNotice(err));
    }
  }
  void load(undefined);
}
