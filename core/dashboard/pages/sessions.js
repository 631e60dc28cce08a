// @ts-check
import { api, seg } from '../api.js';
import { fill, h, mqttVersion, num, time } from '../dom.js';
import { errorNotice, tenantField, tenantOf } from './common.js';

export const title = 'Sessions';

/**
 * Search a tenant's sessions by client id prefix and user; one session's details; kick (with an
 * optional redirect) and ban.
 * @param {HTMLElement} main
 * @param {import('../app.js').PageContext} ctx
 */
export function render(main, ctx) {
  const tenant = tenantOf(ctx);
  const prefix = ctx.query.get('prefix') ?? '';
  const user = ctx.query.get('user') ?? '';
  const selected = ctx.query.get('client');
  const results = h('div');
  const details = h('div', { id: 'session-details' });
  const form = h(
    'form',
    { class: 'row', role: 'search', onsubmit: (/** @type {Event} */ e) => search(e) },
    tenantField(ctx, tenant, (t, picked) => open(t, picked)),
    h('label', {}, 'Client id starts with', h('input', { type: 'text', name: 'prefix', value: prefix, autocomplete: 'off' })),
    h('label', {}, 'User', h('input', { type: 'text', name: 'user', value: user, autocomplete: 'off' })),
    h('button', { type: 'submit' }, 'Search'),
  );
  fill(main, h('h1', {}, 'Sessions'), form, h('div', { class: 'split' }, results, details));

  /** @param {Event} e */
  function search(e) {
    e.preventDefault();
    const data = new FormData(/** @type {HTMLFormElement} */ (form));
    const q = new URLSearchParams();
    for (const k of ['tenant', 'prefix', 'user']) {
      const v = String(data.get(k) ?? '').trim();
      if (v !== '') q.set(k, v);
    }
    ctx.go(`#/sessions?${q}`);
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
    const q = new URLSearchParams({ tenant: t, ...(prefix ? { prefix } : {}), ...(user ? { user } : {}) });
    if (picked) ctx.go(`#/sessions?${q}`);
    else location.replace(`#/sessions?${q}`);
  }

  if (tenant === '') {
    fill(results, h('p', { class: 'muted' }, 'Loading tenants…'));
    return;
  }
  void list(results, tenant, prefix, user, selected);
  if (selected !== null) void showSession(details, tenant, selected);
}

/**
 * @param {HTMLElement} box
 * @param {string} tenant
 * @param {string} prefix
 * @param {string} user
 * @param {string | null} selected
 */
async function list(box, tenant, prefix, user, selected) {
  fill(box, h('p', { class: 'muted' }, 'Searching…'));
  try {
    const page = await api(
      `/api/v1/tenants/${seg(tenant)}/sessions?${new URLSearchParams({
        limit: '200',
        ...(prefix ? { clientIdPrefix: prefix } : {}),
        ...(user ? { user } : {}),
      })}`,
    );
    const link = (/** @type {string} */ clientId) => {
      const q = new URLSearchParams({ tenant, ...(prefix ? { prefix } : {}), ...(user ? { user } : {}), client: clientId });
      return `#/sessions?${q}`;
    };
    fill(
      box,
      h(
        'div',
        { class: 'panel scroll' },
        h(
          'table',
          { id: 'sessions-table' },
          h(
            'caption',
            { class: 'muted' },
            `${page.items.length}${page.nextCursor ? '+' : ''} session(s) in tenant ${tenant}${prefix ? `, client id starting with “${prefix}”` : ''}${user ? `, user “${user}”` : ''}`,
          ),
          h(
            'thead',
            {},
            h(
              'tr',
              {},
              ['Client id', 'User', 'State', 'MQTT', 'Subscriptions', 'Waiting'].map((c, i) =>
                h('th', { scope: 'col', class: i >= 4 ? 'num' : undefined }, c),
              ),
            ),
          ),
          h(
            'tbody',
            {},
            page.items.length === 0
              ? h('tr', {}, h('td', { colspan: 6, class: 'muted' }, 'No session matches.'))
              : page.items.map((/** @type {any} */ s) =>
                  h(
                    'tr',
                    { 'aria-selected': s.clientId === selected ? 'true' : undefined },
                    h('td', {}, h('a', { href: link(s.clientId), class: 'mono' }, s.clientId)),
                    h('td', {}, s.userId),
                    h(
                      'td',
                      {},
                      h('span', { class: `badge ${s.online ? 'ok' : 'warn'}` }, s.online ? 'online' : 'offline'),
                      s.persistent ? h('span', { class: 'muted' }, ' persistent') : null,
                    ),
                    h('td', {}, mqttVersion(s.protocolVersion)),
                    h('td', { class: 'num' }, num(s.subscriptions)),
                    h('td', { class: 'num' }, num(s.inboxDepth)),
                  ),
                ),
          ),
        ),
      ),
      page.nextCursor ? h('p', { class: 'muted' }, 'More sessions match: narrow the prefix.') : null,
    );
  } catch (err) {
    fill(box, errorNotice(err));
  }
}

/**
 * @param {HTMLElement} box
 * @param {string} tenant
 * @param {string} clientId
 */
async function showSession(box, tenant, clientId) {
  const path = `/api/v1/tenants/${seg(tenant)}/sessions/${seg(clientId)}`;
  /** @type {any} */
  let s;
  try {
    s = await api(path);
  } catch (err) {
    fill(box, errorNotice(err));
    return;
  }
  const outcome = h('div', { role: 'status' });
  const c = s.connection;
  const facts = [
    ['User', s.userId],
    ['State', s.online ? 'online' : 'offline'],
    ['MQTT', mqttVersion(s.protocolVersion)],
    ['Persistent', s.persistent ? `yes, expiry ${s.expirySeconds === 4294967295 ? 'never' : `${num(s.expirySeconds)} s`}` : 'no'],
    ['Started', time(s.createdAt)],
    ...(c
      ? [
          ['Address', `${c.remoteAddress}:${c.remotePort}`],
          ['Listener', c.listener],
          ['Connected', time(c.connectedSince)],
          ['Keep alive', `${c.keepAliveSeconds} s`],
          ['Receive maximum', num(c.receiveMaximum)],
        ]
      : [
          ['Disconnected', time(s.disconnectedAt)],
          ['Expires', s.expiresAt ? time(s.expiresAt) : 'never'],
        ]),
    ['Waiting', num(s.inboxDepth)],
    ['In flight', num(s.inflight)],
    [
      'Will',
      s.will
        ? `${s.will.topic} (QoS ${s.will.qos}${s.will.retain ? ', retained' : ''}, ${num(s.will.payloadBytes)} bytes, delay ${s.will.delaySeconds} s${s.will.publishesAt ? `, publishes ${time(s.will.publishesAt)}` : ''})`
        : 'none',
    ],
  ];
  const redirectKind = h(
    'select',
    { name: 'redirect' },
    h('option', { value: '' }, 'no redirect'),
    h('option', { value: 'temporary' }, 'use another server (0x9C)'),
    h('option', { value: 'permanent' }, 'server moved (0x9D)'),
  );
  const reference = h('input', { type: 'text', name: 'serverReference', placeholder: 'host:port', autocomplete: 'off' });
  const discard = h('input', { type: 'checkbox', name: 'discard' });
  const kickForm = h(
    'form',
    { class: 'row', 'aria-label': 'Kick', onsubmit: (/** @type {Event} */ e) => void kick(e) },
    h('label', {}, 'Redirect (MQTT 5)', redirectKind),
    h('label', {}, 'Server reference', reference),
    h('label', { class: 'inline' }, discard, 'also end the session'),
    h('button', { type: 'submit', class: 'danger' }, 'Kick'),
  );
  const banSeconds = h('input', { type: 'number', name: 'seconds', min: 1, max: 31536000, placeholder: 'until lifted' });
  const banReason = h('input', { type: 'text', name: 'reason', maxlength: 1024, autocomplete: 'off' });
  const banForm = h(
    'form',
    { class: 'row', 'aria-label': 'Ban', onsubmit: (/** @type {Event} */ e) => void ban(e) },
    h('label', {}, 'Ban for (seconds)', banSeconds),
    h('label', {}, 'Reason', banReason),
    h('button', { type: 'submit', class: 'danger' }, 'Ban client id'),
  );
  fill(
    box,
    h(
      'section',
      { class: 'panel', 'aria-label': `Session ${clientId}` },
      h('h2', {}, h('span', { class: 'mono' }, clientId)),
      h(
        'dl',
        { class: 'facts' },
        facts.flatMap(([k, v]) => [h('dt', {}, k), h('dd', {}, v)]),
      ),
      h('h2', {}, `Subscriptions (${s.subscriptions.length})`),
      s.subscriptions.length === 0
        ? h('p', { class: 'muted' }, 'None.')
        : h(
            'ul',
            {},
            s.subscriptions.map((/** @type {any} */ sub) =>
              h(
                'li',
                {},
                h('code', {}, sub.filter),
                ` QoS ${sub.qos}`,
                sub.noLocal ? ', no local' : '',
                sub.retainAsPublished ? ', retain as published' : '',
                sub.subscriptionId !== undefined ? `, id ${sub.subscriptionId}` : '',
              ),
            ),
          ),
      h('h2', {}, 'Kick'),
      kickForm,
      h('h2', {}, 'Ban'),
      banForm,
      outcome,
    ),
  );

  /** @param {Event} e */
  async function kick(e) {
    e.preventDefault();
    const kind = /** @type {HTMLSelectElement} */ (redirectKind).value;
    const ref = /** @type {HTMLInputElement} */ (reference).value.trim();
    if (kind !== '' && ref === '') {
      fill(outcome, h('p', { class: 'notice error', role: 'alert' }, 'A redirect needs a server reference (host:port).'));
      return;
    }
    if (!confirm(`Kick ${clientId}?`)) return;
    /** @type {Record<string, unknown>} */
    const body = {};
    if (/** @type {HTMLInputElement} */ (discard).checked) body.discard = true;
    if (kind !== '') body.redirect = { permanent: kind === 'permanent', serverReference: ref };
    try {
      const r = await api(path, { method: 'DELETE', body });
      fill(
        outcome,
        h(
          'p',
          { class: 'notice ok' },
          r.disconnected ? `Kicked ${clientId}.` : `${clientId} was not connected.`,
          r.sessionEnded ? ' Its session ended.' : '',
        ),
      );
    } catch (err) {
      fill(outcome, errorNotice(err));
    }
  }

  /** @param {Event} e */
  async function ban(e) {
    e.preventDefault();
    const seconds = /** @type {HTMLInputElement} */ (banSeconds).value;
    const reason = /** @type {HTMLInputElement} */ (banReason).value.trim();
    if (!confirm(`Ban client id ${clientId} in tenant ${tenant}?`)) return;
    try {
      const r = await api(`/api/v1/tenants/${seg(tenant)}/bans`, {
        method: 'POST',
        body: { kind: 'clientId', value: clientId, ...(seconds ? { seconds: Number(seconds) } : {}), ...(reason ? { reason } : {}) },
      });
      fill(
        outcome,
        h(
          'p',
          { class: 'notice ok' },
          `Banned ${clientId}${r.ban.until ? ` until ${time(r.ban.until)}` : ''}; ${r.kicked} connection(s) closed.`,
        ),
      );
    } catch (err) {
      fill(outcome, errorNotice(err));
    }
  }
}
