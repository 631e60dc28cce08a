// @ts-check
import { api, ApiError, seg } from '../api.js';
import { CONNECTIONS_PLOT, liveChart, MESSAGES_PLOT, pollHistory } from '../charts.js';
import { bytes, fill, h, num, quotaBar } from '../dom.js';
import { errorNotice, every, tile } from './common.js';

export const title = 'Tenant';

/**
 * One tenant: its live plot, figures, quotas and effective settings (editable with an admin token
 * when the settings plugin is writable).
 * @param {HTMLElement} main
 * @param {import('../app.js').PageContext} ctx
 */
export function render(main, ctx) {
  const id = ctx.parts.slice(1).join('/');
  const base = `/api/v1/tenants/${seg(id)}`;
  const status = h('div');
  const tiles = {
    connections: tile('connections'),
    sessions: tile('sessions'),
    subscriptions: tile('subscriptions'),
    retained: tile('retained messages'),
    memory: tile('queued in memory'),
  };
  const messages = liveChart(MESSAGES_PLOT);
  messages.element.id = 'chart-tenant-messages';
  const connections = liveChart(CONNECTIONS_PLOT);
  const quotas = h('div', { class: 'panel scroll' });
  const settings = h('div', { id: 'settings' });
  fill(
    main,
    h('h1', {}, 'Tenant ', h('span', { class: 'mono' }, id)),
    h(
      'p',
      {},
      h('a', { href: `#/sessions?tenant=${seg(id)}` }, 'Sessions'),
      ' · ',
      h('a', { href: `#/retained?tenant=${seg(id)}` }, 'Retained messages'),
    ),
    status,
    h(
      'div',
      { class: 'tiles' },
      Object.values(tiles).map((t) => t.element),
    ),
    h('div', { class: 'charts' }, messages.element, connections.element),
    h('h2', {}, 'Quotas'),
    quotas,
    h('h2', {}, 'Settings'),
    settings,
  );

  const stopHistory = pollHistory(
    (since) => api(`${base}/history?since=${since}`),
    (t, s) => {
      messages.add(t, [s.messagesIn, s.messagesOut]);
      connections.add(t, [s.connections]);
    },
    (err) => fill(status, errorNotice(err)),
  );
  const stopFigures = every(async () => {
    try {
      const t = await api(base);
      fill(status);
      fill(tiles.connections.value, num(t.connections));
      fill(tiles.sessions.value, num(t.sessions));
      fill(tiles.subscriptions.value, num(t.subscriptions.total));
      fill(tiles.retained.value, num(t.retained.messages));
      fill(tiles.memory.value, bytes(t.memory.sessionQueueBytes + t.memory.inboxBytes));
      showQuotas(quotas, t);
    } catch (err) {
      fill(status, errorNotice(err));
    }
  }, 5000);
  void showSettings(settings, base, ctx.who.admin);
  return () => {
    stopHistory();
    stopFigures();
    messages.destroy();
    connections.destroy();
  };
}

/**
 * @param {HTMLElement} box
 * @param {any} t the tenant's figures
 */
function showQuotas(box, t) {
  const rows = Object.entries(t.quota).map(([resource, /** @type {any} */ q]) =>
    h(
      'tr',
      {},
      h('th', { scope: 'row' }, resource),
      h('td', { class: 'num' }, num(q.usage)),
      h('td', { class: 'num' }, q.limit === undefined ? '—' : num(q.limit)),
      h('td', {}, quotaBar(q.usage, q.limit)),
      h('td', { class: 'num' }, num(q.refusals)),
    ),
  );
  fill(
    box,
    h(
      'table',
      {},
      h('caption', { class: 'muted' }, t.quotaScope === 'cluster' ? 'Usage of every node of the cluster.' : 'Usage on this node.'),
      h(
        'thead',
        {},
        h(
          'tr',
          {},
          ['Resource', 'Usage', 'Limit', 'Share', 'Refusals'].map((c, i) =>
            h('th', { scope: 'col', class: i === 1 || i === 2 || i === 4 ? 'num' : undefined }, c),
          ),
        ),
      ),
      h('tbody', {}, rows),
    ),
  );
}

/**
 * The settings table; with `editable`, inputs and a save button that sends only what changed.
 * @param {HTMLElement} box
 * @param {string} base
 * @param {boolean} admin
 */
async function showSettings(box, base, admin) {
  /** @type {any} */
  let s;
  try {
    s = await api(`${base}/settings`);
  } catch (err) {
    fill(box, errorNotice(err));
    return;
  }
  const editable = admin && s.writable;
  const status = h('div', { role: 'status' });
  /** @type {Map<string, { input: HTMLInputElement | HTMLSelectElement, error: HTMLElement, original: unknown, reset: boolean }>} */
  const fields = new Map();
  const rows = Object.entries(s.settings).map(([name, /** @type {any} */ v]) => {
    const error = h('span', { class: 'field-error', id: `err-${name}` });
    /** @type {HTMLInputElement | HTMLSelectElement} */
    let input;
    if (typeof v.value === 'boolean')
      input = /** @type {HTMLSelectElement} */ (
        h(
          'select',
          { name, 'aria-describedby': `err-${name}` },
          h('option', { value: 'true' }, 'true'),
          h('option', { value: 'false' }, 'false'),
        )
      );
    else
      input = /** @type {HTMLInputElement} */ (
        h('input', { type: 'number', name, min: v.min, max: v.max, step: 1, 'aria-describedby': `err-${name}` })
      );
    input.value = String(v.value);
    input.id = `setting-${name}`;
    input.disabled = !editable;
    const field = { input, error, original: v.value, reset: false };
    fields.set(name, field);
    const resetButton =
      editable && v.source === 'provider'
        ? h(
            'button',
            {
              type: 'button',
              class: 'quiet',
              onclick: () => {
                field.reset = true;
                input.value = String(v.default);
              },
            },
            'Use default',
          )
        : null;
    return h(
      'tr',
      {},
      h('th', { scope: 'row' }, h('label', { for: input.id, class: 'inline' }, name)),
      h('td', {}, input, error),
      h('td', { class: 'num' }, String(v.default)),
      h('td', {}, v.source === 'provider' ? 'settings plugin' : 'default'),
      h('td', {}, v.applies === 'live' ? 'live connections' : 'next CONNECT'),
      h('td', {}, v.min !== undefined ? `${num(v.min)}–${num(v.max)}` : ''),
      h('td', {}, resetButton),
    );
  });
  const save = h('button', { type: 'submit' }, 'Save changes');
  const form = h(
    'form',
    { onsubmit: (/** @type {Event} */ e) => void submit(e), 'aria-label': 'Tenant settings', novalidate: true },
    h(
      'p',
      { class: 'muted' },
      `From ${s.provider}. `,
      editable
        ? 'Change a value and save: the broker checks it against the registry.'
        : s.writable
          ? 'Changing them needs an admin token.'
          : 'This settings plugin is read-only.',
    ),
    status,
    h(
      'div',
      { class: 'panel scroll' },
      h(
        'table',
        {},
        h(
          'thead',
          {},
          h(
            'tr',
            {},
            ['Setting', 'Value', 'Default', 'Source', 'Applies to', 'Range', ''].map((c) => h('th', { scope: 'col' }, c)),
          ),
        ),
        h('tbody', {}, rows),
      ),
    ),
    editable ? h('p', {}, save) : null,
  );
  async function submit(/** @type {Event} */ e) {
    e.preventDefault();
    /** @type {Record<string, unknown>} */
    const body = {};
    for (const [name, f] of fields) {
      f.error.textContent = '';
      f.input.removeAttribute('aria-invalid');
      if (f.reset) {
        body[name] = null;
        continue;
      }
      const raw = f.input.value;
      const value = typeof f.original === 'boolean' ? raw === 'true' : raw.trim() === '' ? raw : Number(raw);
      if (value !== f.original) body[name] = value;
    }
    if (Object.keys(body).length === 0) {
      fill(status, h('p', { class: 'notice' }, 'Nothing changed.'));
      return;
    }
    /** @type {HTMLButtonElement} */ (save).disabled = true;
    try {
      await api(`${base}/settings`, { method: 'PATCH', body });
      await showSettings(box, base, admin);
      const done = box.querySelector('[role=status]');
      if (done) fill(done, h('p', { class: 'notice ok' }, `Saved: ${Object.keys(body).join(', ')}.`));
    } catch (err) {
      /** @type {HTMLButtonElement} */ (save).disabled = false;
      if (err instanceof ApiError && err.errors.length > 0) {
        for (const { field, message } of err.errors) {
          const f = fields.get(field);
          if (f === undefined) continue;
          f.input.setAttribute('aria-invalid', 'true');
          f.error.textContent = message;
        }
        fill(status, h('p', { class: 'notice error', role: 'alert' }, 'Nothing was saved: fix the values marked below.'));
        fields.get(err.errors[0].field)?.input.focus();
      } else fill(status, errorNotice(err));
    }
  }
  fill(box, form);
}
