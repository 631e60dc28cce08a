// @ts-check
import { api } from '../api.js';
import { fill, h, num, time } from '../dom.js';
import { errorNotice, every } from './common.js';

export const title = 'Plugins';

/** @param {number} ms */
const ms = (ms) => (ms < 1 ? `${num(ms * 1000)} µs` : `${num(ms)} ms`);

/**
 * The loaded plugins: versions, kinds, SPI range, health and call latency percentiles, every 5 s.
 * @param {HTMLElement} main
 * @param {import('../app.js').PageContext} _ctx
 */
export function render(main, _ctx) {
  const box = h('div');
  fill(
    main,
    h('h1', {}, 'Plugins'),
    h('p', { class: 'muted' }, 'Latency percentiles are estimated from fixed buckets (50 µs to 10 s).'),
    box,
  );
  return every(async () => {
    try {
      const { items } = await api('/api/v1/plugins');
      fill(
        box,
        h(
          'div',
          { class: 'panel scroll' },
          h(
            'table',
            { id: 'plugins-table' },
            h(
              'thead',
              {},
              h(
                'tr',
                {},
                ['Plugin', 'Version', 'Kinds', 'SPI range', 'Source', 'Health', 'Calls', 'Failures', 'Timeouts', 'p50', 'p90', 'p99'].map(
                  (c, i) => h('th', { scope: 'col', class: i >= 6 ? 'num' : undefined }, c),
                ),
              ),
            ),
            h(
              'tbody',
              {},
              items.flatMap((/** @type {any} */ p) => {
                const calls = p.calls.length > 0 ? p.calls : [undefined];
                return calls.map((/** @type {any} */ c, i) =>
                  h(
                    'tr',
                    {},
                    i === 0
                      ? [
                          h('th', { scope: 'row', rowspan: calls.length, class: 'mono' }, p.name),
                          h('td', { rowspan: calls.length }, p.version),
                          h('td', { rowspan: calls.length }, p.kinds.join(', ')),
                          h('td', { rowspan: calls.length, class: 'mono' }, p.spiRange),
                          h('td', { rowspan: calls.length }, p.source),
                          h(
                            'td',
                            { rowspan: calls.length },
                            h('span', { class: `badge ${p.health === 'ok' ? 'ok' : 'bad'}` }, p.health),
                            p.lastFailureAt ? h('div', { class: 'muted' }, `last failure ${time(p.lastFailureAt)}`) : null,
                          ),
                        ]
                      : null,
                    c === undefined
                      ? h('td', { colspan: 6, class: 'muted' }, 'no guarded calls (storage calls are not counted here)')
                      : [
                          h('td', { class: 'num' }, `${c.kind}: ${num(c.count)}`),
                          h('td', { class: 'num' }, num(c.failures)),
                          h('td', { class: 'num' }, num(c.timeouts)),
                          h('td', { class: 'num' }, c.count > 0 ? ms(c.p50Ms) : '—'),
                          h('td', { class: 'num' }, c.count > 0 ? ms(c.p90Ms) : '—'),
                          h('td', { class: 'num' }, c.count > 0 ? ms(c.p99Ms) : '—'),
                        ],
                  ),
                );
              }),
            ),
          ),
        ),
      );
    } catch (err) {
      fill(box, errorNotice(err));
    }
  }, 5000);
}
