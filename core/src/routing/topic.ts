/**
 * Topic names and topic filters: validation, shared-subscription parsing and single-filter matching.
 * Pure functions over strings; the success paths allocate nothing.
 */
import { isUtf8 } from 'node:buffer';

/** The largest UTF-8 string MQTT can carry (a two-byte length prefix) [MQTT-1.5.4]. */
export const MQTT_MAX_STRING_BYTES = 65535;

/** Size limits for topics and topic filters, from the tenant settings MaxTopicLength, MaxTopicLevels, MaxTopicLevelLength. */
export interface TopicLimits {
  /** Longest topic or filter in UTF-8 bytes (capped at 65535 whatever is configured). */
  readonly maxLength: number;
  /** Most levels (the number of `/` plus one). */
  readonly maxLevels: number;
  /** Longest single level in UTF-8 bytes. */
  readonly maxLevelLength: number;
}

/** The widest limits the protocol itself allows. */
export const PROTOCOL_TOPIC_LIMITS: TopicLimits = Object.freeze({
  maxLength: MQTT_MAX_STRING_BYTES,
  maxLevels: MQTT_MAX_STRING_BYTES,
  maxLevelLength: MQTT_MAX_STRING_BYTES,
});

/**
 * Why a topic name or filter was refused.
 * - `empty`: zero length.
 * - `wildcard`: `+` or `#` in a topic name.
 * - `bad-wildcard`: `+` or `#` placed wrongly in a filter.
 * - `null-char`: contains U+0000.
 * - `invalid-utf8`: contains a lone surrogate (cannot be UTF-8 encoded).
 * - `too-long`, `too-many-levels`, `level-too-long`: over a {@link TopicLimits} bound.
 */
export type TopicInvalidReason =
  'empty' | 'wildcard' | 'bad-wildcard' | 'null-char' | 'too-long' | 'too-many-levels' | 'level-too-long' | 'invalid-utf8';

/** Outcome of a topic check. The objects are shared constants: compare `ok`, never keep or mutate them. */
export type TopicCheck = { readonly ok: true } | { readonly ok: false; readonly reason: TopicInvalidReason };

const OK: TopicCheck = Object.freeze({ ok: true });
const FAIL: { readonly [R in TopicInvalidReason]: TopicCheck } = Object.freeze({
  empty: Object.freeze({ ok: false, reason: 'empty' }),
  wildcard: Object.freeze({ ok: false, reason: 'wildcard' }),
  'bad-wildcard': Object.freeze({ ok: false, reason: 'bad-wildcard' }),
  'null-char': Object.freeze({ ok: false, reason: 'null-char' }),
  'too-long': Object.freeze({ ok: false, reason: 'too-long' }),
  'too-many-levels': Object.freeze({ ok: false, reason: 'too-many-levels' }),
  'level-too-long': Object.freeze({ ok: false, reason: 'level-too-long' }),
  'invalid-utf8': Object.freeze({ ok: false, reason: 'invalid-utf8' }),
});

const SLASH = 0x2f;
const PLUS = 0x2b;
const HASH = 0x23;
const DOLLAR = 0x24;

/**
 * Checks a topic name (PUBLISH, will topic) against the MQTT rules and the tenant limits.
 *
 * @example
 * ```ts
 * const check = validateTopicName('a/b', limits);
 * if (!check.ok) disconnect(check.reason);
 * ```
 */
export function validateTopicName(topic: string, limits: TopicLimits): TopicCheck {
  return scan(topic, limits, false);
}

/**
 * Checks a topic filter (SUBSCRIBE, UNSUBSCRIBE) — without any `$share/<group>/` prefix, see
 * {@link parseSubscription} and {@link checkSubscription} — against the MQTT rules and the tenant limits.
 */
export function validateTopicFilter(filter: string, limits: TopicLimits): TopicCheck {
  return scan(filter, limits, true);
}

/** One pass over the UTF-16 code units, counting UTF-8 bytes per level. */
function scan(s: string, limits: TopicLimits, isFilter: boolean): TopicCheck {
  const n = s.length;
  // [MQTT-4.7.3-1] topic names and filters are at least one character long.
  if (n === 0) return FAIL.empty;
  const maxLength = Math.min(limits.maxLength, MQTT_MAX_STRING_BYTES);
  // Every code unit is at least one UTF-8 byte: a cheap early refusal.
  if (n > maxLength) return FAIL['too-long'];
  const maxLevelLength = limits.maxLevelLength;
  let bytes = 0;
  let levels = 1;
  let levelStart = 0;
  let levelBytes = 0;
  for (let i = 0; i < n; i++) {
    const c = s.charCodeAt(i);
    let width: number;
    if (c === SLASH) {
      if (levelBytes > maxLevelLength) return FAIL['level-too-long'];
      if (++levels > limits.maxLevels) return FAIL['too-many-levels'];
      levelBytes = 0;
      levelStart = i + 1;
      bytes++;
      continue;
    } else if (c < 0x80) {
      // [MQTT-4.7.3-2] no U+0000 in topic names or filters (also [MQTT-1.5.4-2]).
      if (c === 0) return FAIL['null-char'];
      if (c === PLUS || c === HASH) {
        // [MQTT-3.3.2-2] a topic name must not contain wildcard characters.
        if (!isFilter) return FAIL.wildcard;
        // [MQTT-4.7.1-3] `+` occupies a whole level; [MQTT-4.7.1-2] `#` a whole level and the last one.
        if (i !== levelStart) return FAIL['bad-wildcard'];
        const next = i + 1;
        if (c === HASH ? next !== n : next !== n && s.charCodeAt(next) !== SLASH) return FAIL['bad-wildcard'];
      }
      width = 1;
    } else if (c < 0x800) {
      width = 2;
    } else if (c >= 0xd800 && c <= 0xdbff) {
      const low = i + 1 < n ? s.charCodeAt(i + 1) : 0;
      // [MQTT-1.5.4-1] a lone surrogate is not a character UTF-8 can encode.
      if (low < 0xdc00 || low > 0xdfff) return FAIL['invalid-utf8'];
      i++;
      width = 4;
    } else if (c >= 0xdc00 && c <= 0xdfff) {
      return FAIL['invalid-utf8'];
    } else {
      width = 3;
    }
    levelBytes += width;
    bytes += width;
  }
  if (levelBytes > maxLevelLength) return FAIL['level-too-long'];
  if (bytes > maxLength) return FAIL['too-long'];
  return OK;
}

/** Number of UTF-8 bytes a string encodes to (lone surrogates count as U+FFFD, three bytes). */
export function utf8ByteLength(s: string): number {
  return Buffer.byteLength(s, 'utf8');
}

/**
 * Whether bytes are well-formed UTF-8 (no overlong forms, no surrogates, nothing above U+10FFFF),
 * for the v5 Payload Format Indicator check [MQTT-3.3.2-4] and for raw topic bytes. U+0000 is
 * well-formed here; topic checks refuse it separately.
 */
export function isWellFormedUtf8(buf: Uint8Array): boolean {
  return isUtf8(buf);
}

/** Whether a topic filter contains a `+` or `#` wildcard. */
export function hasWildcard(filter: string): boolean {
  return filter.indexOf('+') !== -1 || filter.indexOf('#') !== -1;
}

/**
 * Whether a topic name matches a valid (non-shared) topic filter, without splitting or allocating.
 * Same semantics as {@link TopicTrie.match}: `+` one level, `#` zero or more levels including the
 * parent, and a first-level wildcard never matches a topic starting with `$` [MQTT-4.7.2-1].
 */
export function topicMatchesFilter(topic: string, filter: string): boolean {
  const tl = topic.length;
  const fl = filter.length;
  if (tl === 0 || fl === 0) return false;
  if (topic.charCodeAt(0) === DOLLAR) {
    const f0 = filter.charCodeAt(0);
    if (f0 === PLUS || f0 === HASH) return false;
  }
  let t = 0;
  let f = 0;
  for (;;) {
    // Both t and f are at the start of a level.
    const fc = f < fl ? filter.charCodeAt(f) : -1;
    if (fc === HASH) return true;
    if (fc === PLUS) {
      while (t < tl && topic.charCodeAt(t) !== SLASH) t++;
      f++;
    } else {
      while (t < tl && f < fl) {
        const tc = topic.charCodeAt(t);
        const c = filter.charCodeAt(f);
        if (tc === SLASH || c === SLASH) break;
        if (tc !== c) return false;
        t++;
        f++;
      }
      const tAtEnd = t === tl || topic.charCodeAt(t) === SLASH;
      const fAtEnd = f === fl || filter.charCodeAt(f) === SLASH;
      if (!tAtEnd || !fAtEnd) return false;
    }
    if (t === tl) {
      if (f === fl) return true;
      // The topic is used up: only a trailing `/#` still matches (`a/#` matches `a`).
      return f + 2 === fl && filter.charCodeAt(f + 1) === HASH;
    }
    if (f === fl) return false;
    t++;
    f++;
  }
}

/** How a subscription's filter is shared: not at all, `$share/<group>/` or Bifro's ordered `$oshare/<group>/`. */
export type ShareKind = 'none' | 'share' | 'oshare';

/** Why a `$share/` or `$oshare/` filter is malformed. */
export type ShareMalformedReason = 'empty-group' | 'invalid-group' | 'missing-filter' | 'empty-filter';

/** A subscription filter split into its share prefix and the topic filter proper. */
export type ParsedSubscription =
  | { readonly shareKind: 'none'; readonly group?: undefined; readonly topicFilter: string }
  | { readonly shareKind: 'share' | 'oshare'; readonly group: string; readonly topicFilter: string };

/** Whether a filter as sent is a shared (`$share/`) or ordered shared (`$oshare/`) subscription. */
export function isSharedFilter(filter: string): boolean {
  return filter.startsWith('$share/') || filter.startsWith('$oshare/');
}

/** The marker {@link parseSubscription} returns for bad share syntax. */
export interface MalformedShare {
  readonly shareKind: 'malformed';
  readonly reason: ShareMalformedReason;
}

const SHARE_PREFIX = '$share/';
const OSHARE_PREFIX = '$oshare/';
const MALFORMED: { readonly [R in ShareMalformedReason]: MalformedShare } = Object.freeze({
  'empty-group': Object.freeze({ shareKind: 'malformed', reason: 'empty-group' }),
  'invalid-group': Object.freeze({ shareKind: 'malformed', reason: 'invalid-group' }),
  'missing-filter': Object.freeze({ shareKind: 'malformed', reason: 'missing-filter' }),
  'empty-filter': Object.freeze({ shareKind: 'malformed', reason: 'empty-filter' }),
});

/**
 * Splits a filter as sent into share kind, group and topic filter. `$share/<group>/<filter>` is an
 * MQTT 5 shared subscription [MQTT-4.8.2-1]; `$oshare/<group>/<filter>` is Bifro's ordered variant.
 * The group must be non-empty and hold no `/`, `+` or `#` [MQTT-4.8.2-2]; the filter must be non-empty.
 * Anything else (including `$share` without a slash) is an ordinary filter. Does not check the topic
 * filter itself: see {@link checkSubscription}.
 *
 * @example
 * ```ts
 * parseSubscription('$share/g/a/+'); // { shareKind: 'share', group: 'g', topicFilter: 'a/+' }
 * parseSubscription('$share//a');    // { shareKind: 'malformed', reason: 'empty-group' }
 * ```
 */
export function parseSubscription(filter: string): ParsedSubscription | MalformedShare {
  let kind: 'share' | 'oshare';
  let start: number;
  if (filter.startsWith(SHARE_PREFIX)) {
    kind = 'share';
    start = SHARE_PREFIX.length;
  } else if (filter.startsWith(OSHARE_PREFIX)) {
    kind = 'oshare';
    start = OSHARE_PREFIX.length;
  } else {
    return { shareKind: 'none', topicFilter: filter };
  }
  const slash = filter.indexOf('/', start);
  if (slash === start || start === filter.length) return MALFORMED['empty-group'];
  // [MQTT-4.8.2-1] a ShareName is followed by `/` and a topic filter.
  if (slash === -1) return MALFORMED['missing-filter'];
  const group = filter.slice(start, slash);
  // [MQTT-4.8.2-2] the ShareName must not contain `/`, `+` or `#`.
  if (group.indexOf('+') !== -1 || group.indexOf('#') !== -1) return MALFORMED['invalid-group'];
  if (slash + 1 === filter.length) return MALFORMED['empty-filter'];
  return { shareKind: kind, group, topicFilter: filter.slice(slash + 1) };
}

/** Outcome of {@link checkSubscription}. */
export type SubscriptionCheck =
  | { readonly ok: true; readonly parsed: ParsedSubscription }
  | { readonly ok: false; readonly reason: TopicInvalidReason | ShareMalformedReason };

/**
 * Parses and validates a filter as sent in SUBSCRIBE: share syntax, the group name (no U+0000, no
 * lone surrogates, within maxLevelLength) and the topic filter against the limits. The whole
 * string must also fit MQTT's 65535 bytes; the limits apply to the topic filter without the prefix.
 */
export function checkSubscription(filter: string, limits: TopicLimits): SubscriptionCheck {
  const parsed = parseSubscription(filter);
  if (parsed.shareKind === 'malformed') return { ok: false, reason: parsed.reason };
  if (parsed.shareKind !== 'none') {
    if (utf8ByteLength(filter) > MQTT_MAX_STRING_BYTES) return { ok: false, reason: 'too-long' };
    const group = validateTopicName(parsed.group, {
      maxLength: MQTT_MAX_STRING_BYTES,
      maxLevels: 1,
      maxLevelLength: limits.maxLevelLength,
    });
    if (!group.ok) return { ok: false, reason: group.reason === 'wildcard' ? 'invalid-group' : group.reason };
  }
  const check = validateTopicFilter(parsed.topicFilter, limits);
  if (!check.ok) return check;
  return { ok: true, parsed };
}
