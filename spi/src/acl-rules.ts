import type { AccessAction } from './acl';
import type { ClientInfo } from './common';

/**
 * One rule: the first rule that matches an action decides.
 *
 * @example
 * ```ts
 * const rules: AclRule[] = [
 *   { permission: 'deny', action: 'retain', topic: '#' },
 *   { permission: 'allow', action: 'all', topic: 'devices/%c/#' },
 * ];
 * ```
 */
export interface AclRule {
  readonly permission: 'allow' | 'deny';
  /**
   * `publish` (every PUBLISH), `subscribe` (each filter of a SUBSCRIBE), `retain` (a PUBLISH with
   * the RETAIN flag; a retained publish needs both the publish question and the retain question
   * granted, see docs/spi/acl.md "Rule helpers") or `all` (publish, retain and subscribe).
   */
  readonly action: 'publish' | 'subscribe' | 'retain' | 'all';
  /**
   * An MQTT topic filter pattern; `%t` `%u` `%c` are replaced by the client's tenant id, user id
   * and client id. A value that is empty or holds `/`, `+`, `#` or U+0000 makes the rule match
   * nothing for that client (the next rule decides).
   */
  readonly topic: string;
}

/** The `ClientInfo.attrs` key under which an auth provider attaches the session's rules (JSON, see {@link aclRulesAttr}). */
export const ACL_RULES_ATTR = 'bifro.acl';

/** How many distinct attribute texts {@link attachedAclRules} keeps compiled (least recently used first out). */
export const ATTACHED_ACL_RULES_CACHE_SIZE = 1024;

/** The decision of a rule set: `defer` when no rule matched. */
export type AclRulesDecision = 'granted' | 'denied' | 'defer';

/**
 * Compiled rules (see {@link compileAclRules}).
 *
 * @example
 * ```ts
 * const rules = compileAclRules([{ permission: 'allow', action: 'publish', topic: 'sensors/%u/#' }]);
 * rules.check(client, { type: 'publish', topic: 'sensors/alice/t', qos: 0, retain: false }); // 'granted' for alice
 * ```
 */
export interface CompiledAclRules {
  /** The decision for one action: synchronous, from memory. */
  check(client: ClientInfo, action: AccessAction): AclRulesDecision;
  /** How many rules were compiled. */
  readonly size: number;
}

const PERMISSIONS: ReadonlySet<string> = new Set(['allow', 'deny']);
const ACTIONS: ReadonlySet<string> = new Set(['publish', 'subscribe', 'retain', 'all']);
const RULE_FIELDS: ReadonlySet<string> = new Set(['permission', 'action', 'topic']);
const MAX_TOPIC_BYTES = 65535;

function utf8Length(s: string): number {
  let n = 0;
  for (let i = 0; i < s.length; i++) {
    const c = s.charCodeAt(i);
    if (c < 0x80) n += 1;
    else if (c < 0x800) n += 2;
    else if (c >= 0xd800 && c <= 0xdbff && i + 1 < s.length) {
      n += 4;
      i++;
    } else n += 3;
  }
  return n;
}

/** Why `topic` is not a valid rule pattern, or undefined. */
function patternProblem(topic: string): string | undefined {
  if (topic.length === 0) return 'must not be empty';
  if (utf8Length(topic) > MAX_TOPIC_BYTES) return `must be at most ${MAX_TOPIC_BYTES} bytes`;
  if (topic.includes('\u0000')) return 'must not contain U+0000';
  if (topic.startsWith('$share/') || topic.startsWith('$oshare/'))
    return 'must not be a shared subscription ($share/$oshare filters are checked on their inner filter)';
  const levels = topic.split('/');
  for (let i = 0; i < levels.length; i++) {
    const level = levels[i] as string;
    if (level === '#') {
      if (i !== levels.length - 1) return `"#" must be the last level (level ${i + 1} of "${topic}")`;
    } else if (level !== '+' && (level.includes('#') || level.includes('+'))) {
      return `"+" and "#" must fill a whole level (level ${i + 1} of "${topic}")`;
    }
  }
  return undefined;
}

function describeValue(value: unknown): string {
  if (typeof value === 'string') return JSON.stringify(value.length > 80 ? `${value.slice(0, 80)}...` : value);
  if (value === null) return 'null';
  if (Array.isArray(value)) return 'an array';
  return typeof value === 'object' ? 'an object' : `${typeof value} ${String(value)}`;
}

/**
 * Checks rules read from untrusted input (JSON from a webhook, a token, a database); throws an
 * Error naming `where` and the index and field of the first bad rule (`<where>[2].topic: ...`).
 * Each rule must be an object with exactly `permission` ("allow" | "deny"), `action` ("publish" |
 * "subscribe" | "retain" | "all") and `topic` (an MQTT topic filter: "+" and "#" fill a whole
 * level, "#" last, not empty, at most 65535 bytes, no U+0000, not a `$share/` filter).
 *
 * @example
 * ```ts
 * const rules = parseAclRules(JSON.parse(body).acl, 'webhook answer acl');
 * // throws "webhook answer acl[1].action: must be one of publish, subscribe, retain, all (got \"pub\")"
 * ```
 */
export function parseAclRules(value: unknown, where: string): AclRule[] {
  if (!Array.isArray(value)) throw new Error(`${where}: must be an array of rules (got ${describeValue(value)})`);
  const out: AclRule[] = [];
  for (let i = 0; i < value.length; i++) {
    const raw: unknown = value[i];
    const at = `${where}[${i}]`;
    if (typeof raw !== 'object' || raw === null || Array.isArray(raw))
      throw new Error(`${at}: must be an object with permission, action and topic (got ${describeValue(raw)})`);
    const rec = raw as Record<string, unknown>;
    for (const key of Object.keys(rec)) {
      if (!RULE_FIELDS.has(key)) throw new Error(`${at}.${key}: unknown field (a rule has permission, action and topic)`);
    }
    const permission = rec.permission;
    if (typeof permission !== 'string' || !PERMISSIONS.has(permission))
      throw new Error(`${at}.permission: must be "allow" or "deny" (got ${describeValue(permission)})`);
    const action = rec.action;
    if (typeof action !== 'string' || !ACTIONS.has(action))
      throw new Error(`${at}.action: must be one of publish, subscribe, retain, all (got ${describeValue(action)})`);
    const topic = rec.topic;
    if (typeof topic !== 'string') throw new Error(`${at}.topic: must be a string (got ${describeValue(topic)})`);
    const problem = patternProblem(topic);
    if (problem !== undefined) throw new Error(`${at}.topic: ${problem}`);
    out.push(
      Object.freeze({
        permission: permission as AclRule['permission'],
        action: action as AclRule['action'],
        topic,
      }),
    );
  }
  return out;
}

// ---------------------------------------------------------------------------------------------
// Compilation

const LIT = 0;
const PLUS = 1;
const HASH = 2;
type LevelKind = typeof LIT | typeof PLUS | typeof HASH;

const VAR_TENANT = 0;
const VAR_USER = 1;
const VAR_CLIENT = 2;
type Var = typeof VAR_TENANT | typeof VAR_USER | typeof VAR_CLIENT;
/** A level with `%t` `%u` `%c`: literal text and variables, in order. */
type Template = ReadonlyArray<string | Var>;

interface Rule {
  readonly allow: boolean;
  readonly kinds: readonly LevelKind[];
  readonly texts: readonly string[];
  /** Per level, the template when the level needs substitution; undefined when no level does. */
  readonly templates: ReadonlyArray<Template | undefined> | undefined;
  /** Whether the pattern's own text of the first level starts with `$` (before substitution). */
  readonly dollarFirst: boolean;
}

/** The rules that apply to one question (publish, retain, subscribe), indexed by first level. */
interface RuleList {
  readonly rules: readonly Rule[];
  /** Positions in `rules` (ascending) of the rules whose first level is a literal, by that literal. */
  readonly byFirst: ReadonlyMap<string, readonly number[]>;
  /** Positions (ascending) of the rules whose first level is a wildcard or needs substitution. */
  readonly always: readonly number[];
}

function parseTemplate(level: string): Template | undefined {
  if (!level.includes('%')) return undefined;
  const out: (string | Var)[] = [];
  let text = '';
  let any = false;
  for (let i = 0; i < level.length; i++) {
    const ch = level[i];
    const next = level[i + 1];
    if (ch === '%' && (next === 't' || next === 'u' || next === 'c')) {
      if (text !== '') out.push(text);
      text = '';
      out.push(next === 't' ? VAR_TENANT : next === 'u' ? VAR_USER : VAR_CLIENT);
      any = true;
      i++;
    } else text += ch;
  }
  if (text !== '') out.push(text);
  return any ? out : undefined;
}

function compileRule(rule: AclRule): Rule {
  const levels = rule.topic.split('/');
  const kinds: LevelKind[] = [];
  const texts: string[] = [];
  const templates: (Template | undefined)[] = [];
  let needs = false;
  for (const level of levels) {
    if (level === '+') {
      kinds.push(PLUS);
      texts.push('');
      templates.push(undefined);
    } else if (level === '#') {
      kinds.push(HASH);
      texts.push('');
      templates.push(undefined);
    } else {
      const t = parseTemplate(level);
      kinds.push(LIT);
      texts.push(level);
      templates.push(t);
      if (t) needs = true;
    }
  }
  return {
    allow: rule.permission === 'allow',
    kinds,
    texts,
    templates: needs ? templates : undefined,
    dollarFirst: levels[0]?.startsWith('$') ?? false,
  };
}

function buildList(rules: readonly Rule[]): RuleList {
  const byFirst = new Map<string, number[]>();
  const always: number[] = [];
  rules.forEach((rule, i) => {
    if (rule.kinds[0] === LIT && rule.templates?.[0] === undefined) {
      const key = rule.texts[0] as string;
      const bucket = byFirst.get(key);
      if (bucket) bucket.push(i);
      else byFirst.set(key, [i]);
    } else always.push(i);
  });
  return { rules, byFirst, always };
}

// ---------------------------------------------------------------------------------------------
// Matching, over the topic or filter string (no split per call)

/** Whether the pattern matches the topic name (MQTT 4.7: `+` one level, `#` the rest, incl. the parent). */
function matchesTopic(kinds: readonly LevelKind[], texts: readonly string[], topic: string): boolean {
  const n = kinds.length;
  const len = topic.length;
  if (kinds[0] !== LIT && topic.charCodeAt(0) === 36 /* $ */) return false;
  let pos = 0;
  for (let i = 0; i < n; i++) {
    const k = kinds[i];
    if (k === HASH) return true;
    if (pos > len) return false;
    let end = topic.indexOf('/', pos);
    if (end === -1) end = len;
    if (k === LIT) {
      const t = texts[i] as string;
      if (end - pos !== t.length || !topic.startsWith(t, pos)) return false;
    }
    pos = end + 1;
  }
  return pos > len;
}

/** Whether every topic the filter (from `start`) can match, the pattern matches. */
function coversFilter(kinds: readonly LevelKind[], texts: readonly string[], filter: string, start: number): boolean {
  const n = kinds.length;
  const len = filter.length;
  if (kinds[0] !== LIT && filter.charCodeAt(start) === 36) return false;
  let pos = start;
  for (let i = 0; i < n; i++) {
    const k = kinds[i];
    if (k === HASH) return true;
    if (pos > len) return false;
    let end = filter.indexOf('/', pos);
    if (end === -1) end = len;
    const one = end - pos === 1;
    const c = filter.charCodeAt(pos);
    if (one && c === 35 /* # */) return false;
    if (one && c === 43 /* + */) {
      if (k !== PLUS) return false;
    } else if (k === LIT) {
      const t = texts[i] as string;
      if (end - pos !== t.length || !filter.startsWith(t, pos)) return false;
    }
    pos = end + 1;
  }
  return pos > len;
}

/** Whether the filter (from `start`) and the pattern can match a common topic. */
function overlapsFilter(kinds: readonly LevelKind[], texts: readonly string[], filter: string, start: number): boolean {
  const n = kinds.length;
  const len = filter.length;
  const f0 = filter.charCodeAt(start);
  const f0Wild = (f0 === 35 || f0 === 43) && (start + 1 === len || filter.charCodeAt(start + 1) === 47);
  if (kinds[0] !== LIT && f0 === 36) return false;
  if (f0Wild && kinds[0] === LIT && (texts[0] as string).startsWith('$')) return false;
  let pos = start;
  for (let i = 0; i < n; i++) {
    const k = kinds[i];
    if (k === HASH) return true;
    if (pos > len) return false;
    let end = filter.indexOf('/', pos);
    if (end === -1) end = len;
    const one = end - pos === 1;
    const c = filter.charCodeAt(pos);
    if (one && c === 35) return true;
    if (!(one && c === 43) && k === LIT) {
      const t = texts[i] as string;
      if (end - pos !== t.length || !filter.startsWith(t, pos)) return false;
    }
    pos = end + 1;
  }
  return pos > len || (len - pos === 1 && filter.charCodeAt(pos) === 35);
}

// ---------------------------------------------------------------------------------------------
// Substitution: a value is one literal level, or the rule matches nothing

function varValue(client: ClientInfo, v: Var): string {
  return v === VAR_TENANT ? client.tenantId : v === VAR_USER ? client.userId : client.clientId;
}

/**
 * Whether a tenant, user or client id cannot stand for itself in one topic level: empty (no
 * identity, so no subtree of its own: `users/%u/#` would be `users//#`, shared by every client
 * without one), or with `/` (it would span levels and reach another identity's subtree: client id
 * `sensor1/cmd` under `devices/%c/#`), `+` or `#` (a wildcard, or a level no topic name has) or
 * U+0000 (no topic has it, [MQTT-4.7.3-2]).
 */
function unsafeValue(value: string): boolean {
  if (value.length === 0) return true;
  for (let i = 0; i < value.length; i++) {
    const c = value.charCodeAt(i);
    if (c === 47 /* / */ || c === 43 /* + */ || c === 35 /* # */ || c === 0) return true;
  }
  return false;
}

/**
 * The rule's level texts for this client (its level kinds stay the same), or undefined when the
 * rule must match nothing for it: a substituted value that is {@link unsafeValue}, or one that
 * makes the first level start with `$` when the pattern's own text does not (so a user id `$SYS`
 * never reaches `$`-topics through `%u/#`). Skipping the rule, rather than matching its text
 * literally, means a later rule (or the chain's default) decides, for topics and filters alike.
 */
function substitute(rule: Rule, client: ClientInfo): string[] | undefined {
  const templates = rule.templates as ReadonlyArray<Template | undefined>;
  const texts: string[] = [];
  for (let i = 0; i < rule.kinds.length; i++) {
    const t = templates[i];
    if (t === undefined) {
      texts.push(rule.texts[i] as string);
      continue;
    }
    let s = '';
    for (const part of t) {
      if (typeof part === 'string') {
        s += part;
        continue;
      }
      const value = varValue(client, part);
      if (unsafeValue(value)) return undefined;
      s += value;
    }
    if (i === 0 && !rule.dollarFirst && s.startsWith('$')) return undefined;
    texts.push(s);
  }
  return texts;
}

const NONE: readonly number[] = [];
const MODE_PUBLISH = 0;
const MODE_SUBSCRIBE = 1;
type Mode = typeof MODE_PUBLISH | typeof MODE_SUBSCRIBE;

function ruleMatches(rule: Rule, client: ClientInfo, mode: Mode, subject: string, start: number): boolean {
  const kinds = rule.kinds;
  let texts = rule.texts;
  if (rule.templates !== undefined) {
    const substituted = substitute(rule, client);
    if (substituted === undefined) return false;
    texts = substituted;
  }
  if (mode === MODE_PUBLISH) return matchesTopic(kinds, texts, subject);
  return rule.allow ? coversFilter(kinds, texts, subject, start) : overlapsFilter(kinds, texts, subject, start);
}

function decide(list: RuleList, client: ClientInfo, mode: Mode, subject: string, start: number): AclRulesDecision {
  const rules = list.rules;
  if (rules.length === 0) return 'defer';
  let end = subject.indexOf('/', start);
  if (end === -1) end = subject.length;
  const wildFirst = end - start === 1 && (subject.charCodeAt(start) === 43 || subject.charCodeAt(start) === 35);
  if (mode === MODE_SUBSCRIBE && wildFirst) {
    // A filter starting with a wildcard can overlap (deny) any rule: every rule, in order.
    for (const rule of rules) {
      if (ruleMatches(rule, client, mode, subject, start)) return rule.allow ? 'granted' : 'denied';
    }
    return 'defer';
  }
  const key = start === 0 && end === subject.length ? subject : subject.slice(start, end);
  const bucket = list.byFirst.get(key);
  const always = list.always;
  const nb = bucket === undefined ? 0 : bucket.length;
  const na = always.length;
  const b = bucket ?? NONE;
  let i = 0;
  let j = 0;
  // Merge the two ascending position lists, so the rules are tried in their order.
  while (i < nb || j < na) {
    let at: number;
    if (j >= na || (i < nb && (b[i] as number) < (always[j] as number))) at = b[i++] as number;
    else at = always[j++] as number;
    const rule = rules[at] as Rule;
    if (ruleMatches(rule, client, mode, subject, start)) return rule.allow ? 'granted' : 'denied';
  }
  return 'defer';
}

/** Where the inner filter of `$share/<g>/<f>` or `$oshare/<g>/<f>` starts (0 for other filters). */
function filterStart(filter: string): number {
  let prefix = 0;
  if (filter.startsWith('$share/')) prefix = 7;
  else if (filter.startsWith('$oshare/')) prefix = 8;
  else return 0;
  const slash = filter.indexOf('/', prefix);
  return slash === -1 ? 0 : slash + 1;
}

class Compiled implements CompiledAclRules {
  readonly size: number;
  private readonly publish: RuleList;
  private readonly retain: RuleList;
  private readonly subscribe: RuleList;

  constructor(rules: readonly AclRule[]) {
    this.check = this.check.bind(this);
    this.size = rules.length;
    const compiled = rules.map(compileRule);
    const pick = (actions: readonly AclRule['action'][]): Rule[] =>
      compiled.filter((_, i) => actions.includes((rules[i] as AclRule).action));
    this.publish = buildList(pick(['publish', 'all']));
    this.retain = buildList(pick(['retain', 'all']));
    this.subscribe = buildList(pick(['subscribe', 'all']));
  }

  check(client: ClientInfo, action: AccessAction): AclRulesDecision {
    switch (action.type) {
      case 'publish': {
        const p = decide(this.publish, client, MODE_PUBLISH, action.topic, 0);
        if (!action.retain || p === 'denied') return p;
        const r = decide(this.retain, client, MODE_PUBLISH, action.topic, 0);
        if (r === 'denied') return 'denied';
        return p === 'granted' && r === 'granted' ? 'granted' : 'defer';
      }
      case 'subscribe': {
        const start = filterStart(action.filter);
        return decide(this.subscribe, client, MODE_SUBSCRIBE, action.filter, start);
      }
      default:
        return 'defer';
    }
  }
}

/**
 * Compiles ordered rules once; `check` answers per action: 'granted' (an allow rule matched),
 * 'denied' (a deny rule matched) or 'defer' (no rule matched; also for `connect` and
 * `unsubscribe`). Synchronous, no allocation per call beyond what substitution needs (and the
 * first level of the topic, to look up the index). The rules' `permission`, `action` and `topic`
 * are validated with {@link parseAclRules} (throws on a bad rule, with `compileAclRules` as
 * `where`; other fields of the objects are ignored).
 *
 * @example
 * ```ts
 * const rules = compileAclRules(parseAclRules(claims.acl, 'token claim acl'));
 * rules.check(client, { type: 'subscribe', filter: 'devices/+/state', qos: 1 });
 * ```
 */
export function compileAclRules(rules: readonly AclRule[]): CompiledAclRules {
  const own = rules.map((r) => ({ permission: r.permission, action: r.action, topic: r.topic }));
  return new Compiled(parseAclRules(own, 'compileAclRules'));
}

const DENY_ALL: CompiledAclRules = Object.freeze({
  size: 0,
  check: (): AclRulesDecision => 'denied',
});

const attachedCache = new Map<string, CompiledAclRules>();

/**
 * The rules an auth plugin attached to the client (`attrs[ACL_RULES_ATTR]`), compiled and cached
 * by the attribute's text (at most {@link ATTACHED_ACL_RULES_CACHE_SIZE} texts, least recently
 * used out); undefined when the client carries none; a malformed attribute (not JSON, or not valid
 * rules) answers 'denied' for everything, connect included (fail closed).
 *
 * @example
 * ```ts
 * checkPermission(client, action) {
 *   return attachedAclRules(client)?.check(client, action) ?? 'defer';
 * }
 * ```
 */
export function attachedAclRules(client: ClientInfo): CompiledAclRules | undefined {
  const text = client.attrs[ACL_RULES_ATTR];
  if (text === undefined) return undefined;
  const hit = attachedCache.get(text);
  if (hit !== undefined) {
    attachedCache.delete(text);
    attachedCache.set(text, hit);
    return hit;
  }
  let compiled: CompiledAclRules;
  try {
    compiled = new Compiled(parseAclRules(JSON.parse(text) as unknown, ACL_RULES_ATTR));
  } catch {
    compiled = DENY_ALL;
  }
  if (attachedCache.size >= ATTACHED_ACL_RULES_CACHE_SIZE) {
    const oldest = attachedCache.keys().next();
    if (oldest.done !== true) attachedCache.delete(oldest.value);
  }
  attachedCache.set(text, compiled);
  return compiled;
}

/**
 * `JSON.stringify` of rules for attrs (only `permission`, `action` and `topic` of each).
 *
 * @example
 * ```ts
 * return { type: 'ok', tenantId, userId, attrs: { [ACL_RULES_ATTR]: aclRulesAttr(rules) } };
 * ```
 */
export function aclRulesAttr(rules: readonly AclRule[]): string {
  return JSON.stringify(rules.map((r) => ({ permission: r.permission, action: r.action, topic: r.topic })));
}
