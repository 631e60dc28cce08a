// @ts-check
import { api, seg } from '../api.js';
import { CONNECTIONS_PLOT, liveChart, MESSAGES_PLOT, pollHistory } from '../charts.js';
import { fill, h, num, time } from '../dom.js';
import { errorNotice, every, tile } from './common.js';

export const title = 'Overview';

/**
 * The broker's last 15 minutes as live plots (an admin token), or the tenant's own (a tenant
 * token), and the cluster's nodes.
 * @param {HTMLElement} main
 * @param {import('../app.js').PageContext} ctx
 */
export function render(main, ctx) {
  const scope = ctx.who.admin ? 'the broker, every tenant' : `tenant ${ctx.who.tenant}`;
  const status = h('div');
  const tiles = {
    in: tile('messages in / s'),
    out: tile('messages out / s'),
    connections: tile('connections'),
    dropped: tile('dropped / s'),
    lag: tile('event-loop lag p99, ms'),
  };
  const charts = {
    messages: liveChart(MESSAGES_PLOT),
    connections: liveChart(CONNECTIONS_PLOT),
    dropped: liveChart({ title: 'Dropped deliveries per second', series: [{ label: 'dropped', color: '--series-4' }] }),
    lag: liveChart({ title: 'Event-loop lag (p99)', unit: ' ms', series: [{ label: 'lag', color: '--series-1' }] }),
  };
  charts.messages.element.id = 'chart-messages';
  charts.connections.element.id = 'chart-connections';
  const shown = ctx.who.admin ? Object.values(charts) : [charts.messages, charts.connections, charts.dropped];
  const nodes = h('div');
  fill(
    main,
    h('h1', {}, 'Overview'),
    h('p', { class: 'muted' }, `Last 15 minutes of ${scope}, a point every 2 s.`),
    status,
    h(
      'div',
      { class: 'tiles' },
      [tiles.in, tiles.out, tiles.connections, tiles.dropped, ...(ctx.who.admin ? [tiles.lag] : [])].map((t) => t.element),
    ),
    h(
      'div',
      { class: 'charts' },
      shown.map((c) => c.element),
    ),
    ctx.who.admin ? nodes : null,
  );
  const path = ctx.who.admin ? '/api/v1/history' : `/api/v1/tenants/${seg(ctx.who.tenant ?? '')}/history`;
  const stopHistory = pollHistory(
    (since) => api(`${path}?since=${since}`),
    (t, s) => {
      fill(status);
      charts.messages.add(t, [s.messagesIn, s.messagesOut]);
      charts.connections.add(t, [s.connections]);
      charts.dropped.add(t, [s.dropped]);
      if (s.eventLoopLagMs) charts.lag.add(t, [s.eventLoopLagMs]);
      const last = t.length - 1;
      fill(tiles.in.value, num(s.messagesIn[last]));
      fill(tiles.out.value, num(s.messagesOut[last]));
      fill(tiles.connections.value, num(s.connections[last]));
      fill(tiles.dropped.value, num(s.dropped[last]));
      if (s.eventLoopLagMs) fill(tiles.lag.value, num(s.eventLoopLagMs[last]));
    },
    (err) => fill(status, errorNotice(err)),
  );
  const stopNodes = ctx.who.admin ? every(() => showNodes(nodes), 5000) : () => {};
  return () => {
    stopHistory();
    stopNodes();
    for (const c of Object.values(charts)) c.destroy();
  };
}

/** @param {HTMLElement} box */
async function showNodes(box) {
  try {
    const n = await api('/api/v1/nodes');
    fill(
      box,
      h('h2', {}, n.cluster ? `Nodes (${n.nodes.length})` : 'Node'),
      n.cluster && !n.connected ? h('p', { class: 'notice error' }, 'This node is not connected to NATS.') : null,
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
              ['Node', 'Version', 'Listeners', 'Connections', 'Sessions', 'In / s', 'Out / s', 'Started', 'State'].map((c, i) =>
                h('th', { scope: 'col', class: i >= 3 && i <= 6 ? 'num' : undefined }, c),
              ),
            ),
          ),
          h(
            'tbody',
            {},
            n.nodes.map((/** @type {any} */ node) =>
              h(
                'tr',
                {},
                h('td', {}, node.id, node.self ? h('span', { class: 'muted' }, ' (this one)') : null),
                h('td', {}, node.version),
                h('td', { class: 'mono' }, node.listeners.join(', ')),
                h('td', { class: 'num' }, num(node.load.connections)),
                h('td', { class: 'num' }, num(node.load.sessions)),
                h('td', { class: 'num' }, num(node.load.msgInPerSec)),
                h('td', { class: 'num' }, num(node.load.msgOutPerSec)),
                h('td', {}, time(node.startedAt)),
                h('td', {}, node.draining ? h('span', { class: 'badge warn' }, 'draining') : h('span', { class: 'badge ok' }, 'serving')),
              ),
            ),
          ),
        ),
      ),
      n.cluster ? null : h('p', { class: 'muted' }, 'Standalone: the cluster section of the configuration is absent.'),
    );
  } catch (err) {
    fill(box, errorNotice(err));
  }
}
