// @ts-check
/**
 * Building the page's elements. Text always goes in as text nodes (never as HTML): topics, client
 * ids and payloads come from devices and are hostile.
 */

/**
 * @typedef {string | number | Node | null | undefined | false} Child
 * @typedef {Record<string, string | number | boolean | EventListener | undefined>} Attrs
 */

/**
 * An element with attributes (`on…` are listeners, `false`/`undefined` are left out) and children.
 * @param {string} tag
 * @param {Attrs} [attrs]
 * @param {...(Child | Child[])} children
 * @returns {HTMLElement}
 */
export function h(tag, attrs = {}, ...children) {
  const el = document.createElement(tag);
  for (const [name, value] of Object.entries(attrs)) {
    if (value === undefined || value === false) continue;
    if (name.startsWith('on') && typeof value === 'function') el.addEventListener(name.slice(2), value);
    else if (name === 'value' && 'value' in el) /** @type {HTMLInputElement} */ (el).value = String(value);
    else if (name === 'checked' && 'checked' in el) /** @type {HTMLInputElement} */ (el).checked = value === true;
    else el.setAttribute(name, value === true ? '' : String(value));
  }
  append(el, children);
  return el;
}

/**
 * @param {Element} el
 * @param {(Child | Child[])[]} children
 */
function append(el, children) {
  for (const c of children.flat()) {
    if (c === null || c === undefined || c === false) continue;
    el.append(typeof c === 'object' ? c : document.createTextNode(String(c)));
  }
}

/**
 * Replaces the element's children.
 * @param {Element} el
 * @param {...(Child | Child[])} children
 */
export function fill(el, ...children) {
  el.replaceChildren();
  append(el, children);
}

const INTEGER = new Intl.NumberFormat(undefined, { maximumFractionDigits: 0 });
const DECIMAL = new Intl.NumberFormat(undefined, { maximumFractionDigits: 1 });

/** @param {number | undefined} n */
export function num(n) {
  if (n === undefined || !Number.isFinite(n)) return '—';
  return Math.abs(n) >= 100 || Number.isInteger(n) ? INTEGER.format(n) : DECIMAL.format(n);
}

/** @type {Record<number, string>} */
const MQTT_VERSIONS = { 3: '3.1', 4: '3.1.1', 5: '5.0' };

/**
 * The MQTT version a CONNECT's protocol level stands for (3 → 3.1, 4 → 3.1.1, 5 → 5.0): the one
 * name the page uses for it everywhere (the API answers the level).
 * @param {number} level
 */
export function mqttVersion(level) {
  return MQTT_VERSIONS[level] ?? `level ${level}`;
}

/** @param {number | undefined} n */
export function bytes(n) {
  if (n === undefined) return '—';
  const units = ['B', 'KiB', 'MiB', 'GiB', 'TiB'];
  let v = n;
  let u = 0;
  while (v >= 1024 && u < units.length - 1) {
    v /= 1024;
    u++;
  }
  return `${u === 0 ? INTEGER.format(v) : DECIMAL.format(v)} ${units[u]}`;
}

/** @param {string | undefined} iso */
export function time(iso) {
  if (iso === undefined) return '—';
  return new Date(iso).toLocaleString();
}

/**
 * A usage bar: green below 80 % of the limit, amber from 80 %, red at or over the limit.
 * @param {number} usage
 * @param {number | undefined} limit
 */
export function quotaBar(usage, limit) {
  if (limit === undefined || limit <= 0) return h('span', { class: 'muted' }, 'no limit');
  const ratio = usage / limit;
  const level = ratio >= 1 ? 'over' : ratio >= 0.8 ? 'warn' : 'ok';
  const pct = Math.round(ratio * 100);
  const bar = h('span', { class: `bar ${level}`, role: 'img', 'aria-label': `${pct}% of the limit`, 'data-level': level });
  const inner = h('span');
  inner.style.width = `${Math.min(100, ratio * 100)}%`;
  bar.append(inner);
  return h('span', { class: 'quota' }, bar, ` ${pct}%`);
}

/**
 * A table whose column headers sort it (click, or Enter/Space on the header's button), with
 * `aria-sort` on the sorted column.
 * @template T
 * @param {{ label: string, key: (row: T) => string | number, cell?: (row: T) => Child | Child[], num?: boolean }[]} columns
 * @param {T[]} rows
 * @param {{ sortBy?: number, descending?: boolean, caption?: string, empty?: string }} [options]
 */
export function sortableTable(columns, rows, options = {}) {
  let sortBy = options.sortBy ?? 0;
  let descending = options.descending ?? false;
  const tbody = h('tbody');
  const headers = columns.map((c, i) =>
    h(
      'th',
      { scope: 'col', class: c.num ? 'num' : undefined },
      h('button', { type: 'button', class: 'sort', onclick: () => sort(i) }, c.label),
    ),
  );
  const table = h(
    'table',
    {},
    options.caption ? h('caption', { class: 'muted' }, options.caption) : null,
    h('thead', {}, h('tr', {}, headers)),
    tbody,
  );
  /** @param {number} i */
  function sort(i) {
    if (i === sortBy) descending = !descending;
    else {
      sortBy = i;
      descending = columns[i].num === true;
    }
    draw();
  }
  function draw() {
    headers.forEach((th, i) => th.setAttribute('aria-sort', i === sortBy ? (descending ? 'descending' : 'ascending') : 'none'));
    const key = columns[sortBy].key;
    const sorted = [...rows].sort((a, b) => {
      const x = key(a);
      const y = key(b);
      const c = typeof x === 'number' && typeof y === 'number' ? x - y : String(x).localeCompare(String(y));
      return descending ? -c : c;
    });
    fill(
      tbody,
      sorted.length === 0
        ? h('tr', {}, h('td', { colspan: columns.length, class: 'muted' }, options.empty ?? 'Nothing here.'))
        : sorted.map((r) =>
            h(
              'tr',
              {},
              columns.map((c) => h('td', { class: c.num ? 'num' : undefined }, c.cell ? c.cell(r) : c.key(r))),
            ),
          ),
    );
  }
  draw();
  return {
    table,
    /** @param {T[]} next */
    update(next) {
      rows = next;
      draw();
    },
  };
}
