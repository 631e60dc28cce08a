import { describeValue, expectedSettingValue, isValidSettingValue, SETTINGS, type SettingName } from '@bifro/spi';
import { isAlias, isMap, isScalar, LineCounter, parseDocument, type Document, type YAMLMap } from 'yaml';

/** A value of any setting. */
export type AnySettingValue = boolean | number;

/** The overrides of one scope (the `defaults` section or one tenant). */
export type Overrides = ReadonlyMap<SettingName, AnySettingValue>;

/** What a settings file says, once checked against the registry. */
export interface SettingsTable {
  readonly defaults: Overrides;
  readonly tenants: ReadonlyMap<string, Overrides>;
}

/** No overrides at all: every tenant gets the registry defaults. */
export const EMPTY_TABLE: SettingsTable = { defaults: new Map(), tenants: new Map() };

/** A problem found in the file, ready to be logged. */
export interface SettingsWarning {
  readonly msg: string;
  readonly fields: Readonly<Record<string, unknown>>;
}

/** Outcome of {@link parseSettings}: a new table (with warnings), or a reason to keep the previous one whole. */
export type ParseResult =
  | { readonly ok: true; readonly table: SettingsTable; readonly warnings: readonly SettingsWarning[] }
  | { readonly ok: false; readonly warning: SettingsWarning };

const SETTING_NAMES = new Set<string>(Object.keys(SETTINGS));

function isSettingName(name: string): name is SettingName {
  return SETTING_NAMES.has(name);
}

/** Where a scope's values go and how it is named in warnings. */
interface Scope {
  /** `defaults` or `tenant <id>`. */
  readonly label: string;
  /** The tenant, or undefined for the `defaults` section. */
  readonly tenantId: string | undefined;
  /** Its values before this reload. */
  readonly previous: Overrides | undefined;
}

/**
 * Parses and checks the text of a settings file. A YAML error, or a top level that is not a
 * mapping, gives `ok: false` (the caller keeps everything). Otherwise every valid value is taken;
 * an invalid one is reported and replaced by the scope's previous value for that setting (none on
 * the first load); unknown keys are reported and ignored; a section that is not a mapping is
 * reported and keeps its previous values whole.
 */
export function parseSettings(text: string, file: string, previous: SettingsTable): ParseResult {
  const lineCounter = new LineCounter();
  const doc = parseDocument(text, { lineCounter, prettyErrors: false, uniqueKeys: true });
  const lineOf = (node: unknown): number | undefined => {
    const range = typeof node === 'object' && node !== null && 'range' in node ? (node as { range?: unknown }).range : undefined;
    return Array.isArray(range) && typeof range[0] === 'number' ? lineCounter.linePos(range[0]).line : undefined;
  };
  const error = doc.errors[0];
  if (error !== undefined) {
    const pos = lineCounter.linePos(error.pos[0]);
    return {
      ok: false,
      warning: {
        msg: `settings file ${file}: YAML error at line ${pos.line}, column ${pos.col}: ${error.message}; the file is ignored and the previous settings stay`,
        fields: { file, line: pos.line, column: pos.col, error: error.message },
      },
    };
  }
  const root = resolve(doc, doc.contents);
  if (root === null || root === undefined || (isScalar(root) && root.value === null)) {
    return { ok: true, table: EMPTY_TABLE, warnings: [] };
  }
  if (!isMap(root)) {
    const line = lineOf(root);
    return {
      ok: false,
      warning: {
        msg: `settings file ${file}: the top level must be a mapping with defaults: and tenants: (line ${line ?? '?'}); the file is ignored and the previous settings stay`,
        fields: { file, line },
      },
    };
  }

  const warnings: SettingsWarning[] = [];
  const warn = (msg: string, fields: Record<string, unknown>): void => {
    warnings.push({ msg: `settings file ${file}: ${msg}`, fields: { file, ...fields } });
  };

  const readScope = (node: unknown, scope: Scope): Overrides => {
    const value = resolve(doc, node);
    if (value === null || value === undefined || (isScalar(value) && value.value === null)) return new Map();
    const where = scope.tenantId === undefined ? { scope: 'defaults' } : { tenantId: scope.tenantId };
    if (!isMap(value)) {
      warn(`${scope.label} must be a mapping of setting names to values (line ${lineOf(value) ?? '?'}); its previous values stay`, {
        ...where,
        line: lineOf(value),
      });
      return scope.previous ?? new Map();
    }
    const out = new Map<SettingName, AnySettingValue>();
    for (const pair of value.items) {
      const key = keyOf(pair.key);
      const line = lineOf(pair.key) ?? lineOf(pair.value);
      if (key === undefined) {
        warn(`${scope.label}: a key that is not a setting name at line ${line ?? '?'}; ignored`, { ...where, line });
        continue;
      }
      if (!isSettingName(key)) {
        const hint = [...SETTING_NAMES].find((n) => n.toLowerCase() === key.toLowerCase());
        warn(
          `${scope.label}: unknown setting ${key} at line ${line ?? '?'}${hint === undefined ? '' : ` (did you mean ${hint}?)`}; ignored`,
          {
            ...where,
            setting: key,
            line,
          },
        );
        continue;
      }
      const raw = toJS(doc, pair.value);
      if (isValidSettingValue(key, raw)) {
        out.set(key, raw);
        continue;
      }
      const kept = scope.previous?.get(key);
      const outcome =
        kept !== undefined
          ? `the previous value ${String(kept)} stays`
          : scope.tenantId === undefined
            ? `the registry default ${String(SETTINGS[key].default)} applies`
            : 'not overridden (the defaults section or the registry default applies)';
      warn(
        `${scope.label}: invalid value ${describeValue(raw)} for ${key} at line ${lineOf(pair.value) ?? line ?? '?'} (expected ${expectedSettingValue(key)}); ${outcome}`,
        { ...where, setting: key, value: describeValue(raw), expected: expectedSettingValue(key), line: lineOf(pair.value) ?? line },
      );
      if (kept !== undefined) out.set(key, kept);
    }
    return out;
  };

  let defaults: Overrides = new Map();
  let tenants = new Map<string, Overrides>();
  for (const pair of root.items) {
    const key = keyOf(pair.key);
    const line = lineOf(pair.key);
    if (key === 'defaults') {
      defaults = readScope(pair.value, { label: 'defaults', tenantId: undefined, previous: previous.defaults });
    } else if (key === 'tenants') {
      const section = resolve(doc, pair.value);
      if (section === null || section === undefined || (isScalar(section) && section.value === null)) continue;
      if (!isMap(section)) {
        warn(
          `tenants must be a mapping of tenant ids to settings (line ${lineOf(section) ?? line ?? '?'}); the previous tenant settings stay`,
          {
            line: lineOf(section) ?? line,
          },
        );
        tenants = new Map(previous.tenants);
        continue;
      }
      tenants = readTenants(section);
    } else {
      const hint =
        key !== undefined && isSettingName(key)
          ? ' (settings go under defaults: or tenants: <tenant id>:)'
          : ' (expected defaults: and tenants:; tenant overrides go under tenants:)';
      warn(`unknown top-level key ${key ?? describeValue(toJS(doc, pair.key))} at line ${line ?? '?'}${hint}; ignored`, {
        key: key ?? describeValue(toJS(doc, pair.key)),
        line,
      });
    }
  }
  return { ok: true, table: { defaults, tenants }, warnings };

  function readTenants(section: YAMLMap): Map<string, Overrides> {
    const out = new Map<string, Overrides>();
    for (const pair of section.items) {
      const tenantId = keyOf(pair.key);
      const line = lineOf(pair.key);
      if (tenantId === undefined) {
        warn(`tenants: a key that is not a tenant id at line ${line ?? '?'}; ignored`, { line });
        continue;
      }
      const overrides = readScope(pair.value, { label: `tenant ${tenantId}`, tenantId, previous: previous.tenants.get(tenantId) });
      if (overrides.size > 0) out.set(tenantId, overrides);
    }
    return out;
  }
}

/** A node with aliases followed. */
function resolve(doc: Document, node: unknown): unknown {
  return isAlias(node) ? node.resolve(doc) : node;
}

/** The JavaScript value of a node (aliases followed). */
function toJS(doc: Document, node: unknown): unknown {
  const value = resolve(doc, node);
  if (isScalar(value)) return value.value;
  if (typeof value === 'object' && value !== null && 'toJS' in value && typeof value.toJS === 'function') {
    return (value as { toJS(doc: Document): unknown }).toJS(doc);
  }
  return value ?? null;
}

/** A mapping key as a string, or undefined when it is not a plain scalar (null, a list...). */
function keyOf(node: unknown): string | undefined {
  const value = isScalar(node) ? node.value : node;
  if (typeof value === 'string') return value;
  if (typeof value === 'number' || typeof value === 'boolean' || typeof value === 'bigint') return String(value);
  return undefined;
}

/** Whether two scopes hold the same values. */
export function sameOverrides(a: Overrides | undefined, b: Overrides | undefined): boolean {
  const sizeA = a?.size ?? 0;
  if (sizeA !== (b?.size ?? 0)) return false;
  if (sizeA === 0) return true;
  for (const [setting, value] of a!) if (b!.get(setting) !== value) return false;
  return true;
}

/** What changed between two tables: the tenants whose overrides differ, and whether the defaults do. */
export function diffTables(before: SettingsTable, after: SettingsTable): { readonly tenants: string[]; readonly defaults: boolean } {
  const tenants: string[] = [];
  for (const [tenantId, overrides] of after.tenants) if (!sameOverrides(before.tenants.get(tenantId), overrides)) tenants.push(tenantId);
  for (const tenantId of before.tenants.keys()) if (!after.tenants.has(tenantId)) tenants.push(tenantId);
  return { tenants, defaults: !sameOverrides(before.defaults, after.defaults) };
}
