// @ts-check
import { all, seg } from '../api.js';
import { bytes, fill, h, num, quotaBar, sortableTable } from '../dom.js';
import { errorNotice, every } from './common.js';

export const title = 'Tenants';

/** Refresh pace: every 5 s, every 30 s once the list is more than one API page (each refresh reads every page). */
const REFRESH_MS = 5000;
const LARGE_REFRESH_MS = 30_000;
const PAGE = 1000;

/**
 * The resource nearest its limit: what the quota column shows.
 * @param {Record<string, { usage: number, limit?: number }>} quota
 */
export function tightestQuota(quota) {
  /** @type {{ resource: string, usage: number, limit: number, ratio: number } | undefined} */
  let worst;
  for (const [resource, q] of Object.entries(quota)) {
    if (q.limit === undefined || q.limit <= 0) continue;
    const ratio = q.usage / q.limit;
    if (worst === undefined || ratio > worst.ratio) worst = { resource, usage: q.usage, limit: q.limit, ratio };
  }
  return worst;
}

/**
 * Every tenant the broker knows, as a sortable table refreshed every 5 s.
 * @param {HTMLElement} main
 * @param {import('../app.js').PageContext} _ctx
 */
export function render(main, _ctx) {
  const status = h('div');
  const filter = h('input', { type: 'text', id: 'tenant-filter', placeholder: 'part of a tenant id', autocomplete: 'off' });
  /** @type {any[]} */
  let rows = [];
  /** @type {any} */
  const table = sortableTable(
    [
      {
        label: 'Tenant',
        key: (t) => t.tenant,
        cell: (t) => h('a', { href: `#/tenants/${seg(t.tenant)}` }, t.tenant),
      },
      { label: 'Connections', key: (t) => t.connections, num: true, cell: (t) => num(t.connections) },
      { label: 'Sessions', key: (t) => t.sessions, num: true, cell: (t) => num(t.sessions) },
      { label: 'In / s', key: (t) => t.rates.messagesIn.perSecond, num: true, cell: (t) => num(t.rates.messagesIn.perSecond) },
      { label: 'Out / s', key: (t) => t.rates.messagesOut.perSecond, num: true, cell: (t) => num(t.rates.messagesOut.perSecond) },
      {
        label: 'Retained',
        key: (t) => t.retained.messages,
        num: true,
        cell: (t) => [num(t.retained.messages), h('span', { class: 'muted' }, ` (${bytes(t.retained.bytes)})`)],
      },
      {
        label: 'Quota (nearest its limit)',
        key: (t) => tightestQuota(t.quota)?.ratio ?? -1,
        num: true,
        cell: (t) => {
          const q = tightestQuota(t.quota);
          return q === undefined
            ? h('span', { class: 'muted' }, 'no limits')
            : h(
                'span',
                { title: `${q.resource}: ${num(q.usage)} of ${num(q.limit)}` },
                h('span', { class: 'muted' }, `${q.resource} `),
                quotaBar(q.usage, q.limit),
              );
        },
      },
    ],
    [],
    { sortBy: 1, descending: true, empty: 'No tenant has been seen since the broker started.' },
  );
  const draw = () => {
    const f = /** @type {HTMLInputElement} */ (filter).value.trim();
    table.update(f === '' ? rows : rows.filter((t) => t.tenant.includes(f)));
  };
  filter.addEventListener('input', draw);
  fill(
    main,
    h('h1', {}, 'Tenants'),
    h(
      'form',
      { class: 'row', role: 'search', onsubmit: (/** @type {Event} */ e) => e.preventDefault() },
      h('label', { for: 'tenant-filter' }, 'Filter', filter),
    ),
    status,
    h('div', { class: 'panel scroll' }, table.table),
  );
  return every(
    async () => {
      try {
        const page = await all('/api/v1/tenants', {}, 10_000);
        rows = page.items;
        fill(
          status,
          page.more ? h('p', { class: 'notice' }, 'Showing the first 10,000 tenants by id.') : null,
          rows.length > PAGE ? h('p', { class: 'muted' }, `${rows.length} tenants: refreshed every ${LARGE_REFRESH_MS / 1000} s.`) : null,
        );
        draw();
      } catch (err) {
        fill(status, errorNotice(err));
      }
    },
    () => (rows.length > PAGE ? LARGE_REFRESH_MS : REFRESH_MS),
  );
}
