/**
 * An MQTT topic filter split for the retained index: its levels, where `#` is, and how many
 * leading levels are literal (the part a range read can use as a key prefix).
 */
export interface ParsedFilter {
  readonly levels: readonly string[];
  /** Index of the `#` level, or -1. */
  readonly hashAt: number;
  /** Number of leading levels without a wildcard (before the first `+` or `#`). */
  readonly literalLevels: number;
  /** True when the filter has no wildcard at all: it names one topic. */
  readonly exact: boolean;
}

export function parseFilter(filter: string): ParsedFilter {
  const levels = filter.split('/');
  const hashAt = levels.indexOf('#');
  let literalLevels = 0;
  while (literalLevels < levels.length && levels[literalLevels] !== '+' && levels[literalLevels] !== '#') literalLevels++;
  return { levels, hashAt, literalLevels, exact: literalLevels === levels.length };
}

/**
 * True when `topic` matches the filter: `+` is one level, `#` the rest (including the parent, so
 * `a/#` matches `a` [MQTT-4.7.1-2]); a topic starting with `$` is not matched by a `+` or `#` at
 * the first level [MQTT-4.7.2-1].
 */
export function topicMatches(filter: ParsedFilter, topic: string): boolean {
  const f = filter.levels;
  if (topic.startsWith('$') && (f[0] === '+' || f[0] === '#')) return false;
  const t = topic.split('/');
  for (let i = 0; i < f.length; i++) {
    if (f[i] === '#') return true;
    if (i >= t.length || (f[i] !== '+' && f[i] !== t[i])) return false;
  }
  return f.length === t.length;
}

/** Number of levels of a topic (`a` 1, `a/b` 2, `/` 2). */
export function levelCount(topic: string): number {
  let n = 1;
  for (let i = topic.indexOf('/'); i >= 0; i = topic.indexOf('/', i + 1)) n++;
  return n;
}
