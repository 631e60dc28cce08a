import { compileAclRules, parseAclRules, type AclRule, type ClientInfo, type CompiledAclRules } from '@bifro/spi';

/**
 * The compiled rules of one scope. `main` answers publish and subscribe; `retain` answers the
 * retain question of a retained publish (the scope's `retain` and `all` rules, compiled as
 * publish rules), so that the question can be asked across scopes.
 */
export interface CompiledScope {
  /** Where the scope is declared, for messages: `global`, `tenant acme`, `tenant acme user alice`... */
  readonly label: string;
  readonly main: CompiledAclRules;
  readonly retain: CompiledAclRules | undefined;
}

/** The scopes of one tenant. */
export interface TenantScopes {
  readonly tenant: CompiledScope | undefined;
  readonly users: ReadonlyMap<string, CompiledScope>;
  readonly clients: ReadonlyMap<string, CompiledScope>;
  /** Client scopes with `*` or `?` in their id, in file order. */
  readonly clientGlobs: ReadonlyArray<{ readonly glob: string; readonly re: RegExp; readonly scope: CompiledScope }>;
}

/** A whole ACL file, compiled. */
export interface RuleSet {
  readonly global: CompiledScope | undefined;
  readonly tenants: ReadonlyMap<string, TenantScopes>;
  /** Rules in the file. */
  readonly rules: number;
  /** Scopes that hold at least one rule. */
  readonly scopes: number;
}

/** The result of {@link parseAclFile}: a rule set, or the problems (`file:line: message`, first ones) that make the file invalid. */
export type ParseResult = { readonly ok: true; readonly ruleSet: RuleSet } | { readonly ok: false; readonly problems: readonly string[] };

/** At most this many problems are reported for one file. */
export const MAX_PROBLEMS = 20;

const ACTIONS: ReadonlySet<string> = new Set(['publish', 'subscribe', 'retain', 'all']);

/** A mutable scope while parsing. */
interface Draft {
  readonly label: string;
  readonly rules: AclRule[];
}

interface TenantDraft {
  tenant: Draft | undefined;
  readonly users: Map<string, Draft>;
  readonly clients: Map<string, Draft>;
}

function isGlob(id: string): boolean {
  return id.includes('*') || id.includes('?');
}

/** `*` any run of characters, `?` one character, the rest literal. */
export function globToRegExp(glob: string): RegExp {
  let src = '';
  for (const ch of glob) {
    if (ch === '*') src += '[\\s\\S]*';
    else if (ch === '?') src += '[\\s\\S]';
    else src += ch.replace(/[\\^$.|+()[\]{}]/g, '\\$&');
  }
  return new RegExp(`^${src}$`, 'u');
}

function compileScope(draft: Draft): CompiledScope {
  const retainRules = draft.rules
    .filter((r) => r.action === 'retain' || r.action === 'all')
    .map((r) => ({ ...r, action: 'publish' as const }));
  return {
    label: draft.label,
    main: compileAclRules(draft.rules),
    retain: retainRules.length > 0 ? compileAclRules(retainRules) : undefined,
  };
}

/** The problem of a topic pattern, with parseAclRules' words, or undefined. */
function topicProblem(rule: AclRule): string | undefined {
  try {
    parseAclRules([rule], 'rule');
    return undefined;
  } catch (err) {
    const message = err instanceof Error ? err.message : String(err);
    return message.replace(/^rule\[0\]\.topic: /, '');
  }
}

/**
 * Parses an ACL file (format in the README): `global`, `tenant <id>`, `user <id>` and
 * `client <id or glob>` lines open a scope, `allow|deny <action> <topic>` lines add a rule to the
 * current one; `#` starts a comment line. `file` only names the file in the problems.
 */
export function parseAclFile(text: string, file: string): ParseResult {
  const problems: string[] = [];
  const problem = (line: number, message: string): void => {
    if (problems.length < MAX_PROBLEMS) problems.push(`${file}:${line}: ${message}`);
  };
  const global: Draft = { label: 'global', rules: [] };
  const tenants = new Map<string, TenantDraft>();
  let tenantId: string | undefined;
  let current: Draft = global;
  let rules = 0;

  const tenantDraft = (id: string): TenantDraft => {
    let t = tenants.get(id);
    if (t === undefined) {
      t = { tenant: undefined, users: new Map(), clients: new Map() };
      tenants.set(id, t);
    }
    return t;
  };

  const lines = text.split(/\r?\n/);
  for (let i = 0; i < lines.length; i++) {
    const lineNo = i + 1;
    const line = (lines[i] as string).trim();
    if (line === '' || line.startsWith('#')) continue;
    const space = line.search(/\s/);
    const keyword = space === -1 ? line : line.slice(0, space);
    const rest = space === -1 ? '' : line.slice(space).trim();
    switch (keyword) {
      case 'global':
        if (rest !== '') problem(lineNo, `"global" takes nothing after it (got ${JSON.stringify(rest)})`);
        tenantId = undefined;
        current = global;
        break;
      case 'tenant': {
        if (rest === '') {
          problem(lineNo, '"tenant" needs a tenant id');
          break;
        }
        tenantId = rest;
        const t = tenantDraft(rest);
        t.tenant ??= { label: `tenant ${rest}`, rules: [] };
        current = t.tenant;
        break;
      }
      case 'user':
      case 'client': {
        if (tenantId === undefined) {
          problem(lineNo, `"${keyword}" must follow a "tenant" line (user and client scopes belong to a tenant)`);
          break;
        }
        if (rest === '') {
          problem(lineNo, `"${keyword}" needs a ${keyword === 'user' ? 'user id' : 'client id or glob'}`);
          break;
        }
        const t = tenantDraft(tenantId);
        const map = keyword === 'user' ? t.users : t.clients;
        let draft = map.get(rest);
        if (draft === undefined) {
          draft = { label: `tenant ${tenantId} ${keyword} ${rest}`, rules: [] };
          map.set(rest, draft);
        }
        current = draft;
        break;
      }
      case 'allow':
      case 'deny': {
        const m = /^(\S+)(?:\s+([\s\S]*))?$/.exec(rest);
        const action = m?.[1];
        const topic = m?.[2]?.trim() ?? '';
        if (action === undefined) {
          problem(lineNo, `"${keyword}" needs an action (publish, subscribe, retain or all) and a topic`);
          break;
        }
        if (!ACTIONS.has(action)) {
          problem(lineNo, `unknown action ${JSON.stringify(action)} (expected publish, subscribe, retain or all)`);
          break;
        }
        if (topic === '') {
          problem(lineNo, `"${keyword} ${action}" needs a topic`);
          break;
        }
        const rule: AclRule = { permission: keyword, action: action as AclRule['action'], topic };
        const bad = topicProblem(rule);
        if (bad !== undefined) {
          problem(lineNo, `topic ${JSON.stringify(topic)}: ${bad}`);
          break;
        }
        current.rules.push(rule);
        rules++;
        break;
      }
      default:
        problem(lineNo, `unknown keyword ${JSON.stringify(keyword)} (expected allow, deny, tenant, user, client or global)`);
    }
  }
  if (problems.length > 0) return { ok: false, problems };

  let scopes = 0;
  const compile = (d: Draft | undefined): CompiledScope | undefined => {
    if (d === undefined || d.rules.length === 0) return undefined;
    scopes++;
    return compileScope(d);
  };
  const compiledTenants = new Map<string, TenantScopes>();
  for (const [id, t] of tenants) {
    const users = new Map<string, CompiledScope>();
    const clients = new Map<string, CompiledScope>();
    const clientGlobs: { glob: string; re: RegExp; scope: CompiledScope }[] = [];
    for (const [user, d] of t.users) {
      const s = compile(d);
      if (s) users.set(user, s);
    }
    for (const [client, d] of t.clients) {
      const s = compile(d);
      if (!s) continue;
      if (isGlob(client)) clientGlobs.push({ glob: client, re: globToRegExp(client), scope: s });
      else clients.set(client, s);
    }
    const tenant = compile(t.tenant);
    if (tenant || users.size > 0 || clients.size > 0 || clientGlobs.length > 0)
      compiledTenants.set(id, { tenant, users, clients, clientGlobs });
  }
  return { ok: true, ruleSet: { global: compile(global), tenants: compiledTenants, rules, scopes } };
}

/**
 * The scopes that apply to a client, most specific first: its exact client id, the client globs
 * that match it (file order), its user, its tenant, then the global scope.
 */
export function scopesFor(ruleSet: RuleSet, client: ClientInfo): CompiledScope[] {
  const out: CompiledScope[] = [];
  const t = ruleSet.tenants.get(client.tenantId);
  if (t !== undefined) {
    const exact = t.clients.get(client.clientId);
    if (exact) out.push(exact);
    for (const g of t.clientGlobs) if (g.re.test(client.clientId)) out.push(g.scope);
    const user = t.users.get(client.userId);
    if (user) out.push(user);
    if (t.tenant) out.push(t.tenant);
  }
  if (ruleSet.global) out.push(ruleSet.global);
  return out;
}

/** An empty rule set (nothing decides). */
export const EMPTY_RULE_SET: RuleSet = { global: undefined, tenants: new Map(), rules: 0, scopes: 0 };
