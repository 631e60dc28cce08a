/**
 * The configuration file: where it is, reading and parsing its YAML, validating it against the
 * schema, and turning a key path into the `file:line:col` the error messages name.
 */
import { promises as fs } from 'node:fs';
import path from 'node:path';
import Ajv, { type ErrorObject } from 'ajv';
import { LineCounter, isMap, isScalar, isSeq, parseDocument, type Document, type Node as YamlNode } from 'yaml';
import { ConfigError, type ConfigErrorCode, type ConfigIssue } from './config-errors';
import { CONFIG_SCHEMA, type RawConfig } from './config-schema';
import { DEFAULT_CONFIG_FILE } from './config-defaults';

export async function locateFile(
  explicit: string | undefined,
  fromEnv: string | undefined,
  cwd: string,
  issues: ConfigIssue[],
): Promise<string | undefined> {
  const named = explicit ?? fromEnv;
  if (named !== undefined) {
    const file = path.resolve(cwd, named);
    if (!(await exists(file))) {
      const origin = explicit !== undefined ? '--config' : 'BIFRO_CONFIG';
      issues.push({
        code: 'BIFRO_CONFIG_NOT_FOUND',
        path: origin,
        message: `configuration file not found: ${file} (given by ${origin})`,
      });
      throw new ConfigError(issues, file);
    }
    return file;
  }
  const conventional = path.join(cwd, DEFAULT_CONFIG_FILE);
  return (await exists(conventional)) ? conventional : undefined;
}

/** Whether a file or directory exists. */
export async function exists(file: string): Promise<boolean> {
  try {
    await fs.stat(file);
    return true;
  } catch {
    return false;
  }
}

export interface SourceMap {
  readonly doc: Document;
  readonly lines: LineCounter;
  readonly text: string;
}

export async function parseFile(file: string, issues: ConfigIssue[]): Promise<{ raw: RawConfig; source: SourceMap }> {
  let text: string;
  try {
    text = await fs.readFile(file, 'utf8');
  } catch (err) {
    const reason = (err as NodeJS.ErrnoException).code ?? String(err);
    issues.push({ code: 'BIFRO_CONFIG_READ', path: file, message: `cannot read configuration file ${file}: ${reason}` });
    throw new ConfigError(issues, file);
  }
  const lines = new LineCounter();
  const doc = parseDocument(text, { lineCounter: lines, prettyErrors: false, uniqueKeys: true });
  const parseIssues: ConfigIssue[] = doc.errors.map((err) => {
    const pos = lines.linePos(err.pos[0]);
    const sourceLine = (text.split(/\r?\n/)[pos.line - 1] ?? '').trim();
    const near = sourceLine ? ` (near ${JSON.stringify(sourceLine.slice(0, 60))})` : '';
    return {
      code: 'BIFRO_CONFIG_PARSE',
      path: '',
      message: `${file}:${pos.line}:${pos.col}: YAML syntax error: ${firstLine(err.message)}${near}`,
      line: pos.line,
      column: pos.col,
    };
  });
  if (parseIssues.length > 0) throw new ConfigError([...parseIssues, ...issues], file);
  let raw: unknown;
  try {
    raw = doc.toJS({ maxAliasCount: 100 });
  } catch (err) {
    issues.unshift({ code: 'BIFRO_CONFIG_PARSE', path: '', message: `${file}: YAML error: ${firstLine(String(err))}` });
    throw new ConfigError(issues, file);
  }
  // Validated against the schema right after; typed here so the schema check reads naturally.
  return { raw: (raw ?? {}) as RawConfig, source: { doc, lines, text } };
}

function firstLine(text: string): string {
  return text.split('\n')[0]!.trim();
}

// ---------------------------------------------------------------- positions

/** Turns a key path into `file:line:col` using the YAML document's source ranges. */
export class Locator {
  constructor(
    readonly file: string | undefined,
    private readonly source: SourceMap | undefined,
  ) {}

  /** `file:line:col: ` prefix for the value at `segments` (or the key itself when `asKey`), as close as the document allows. */
  position(segments: readonly (string | number)[], asKey = false): { prefix: string; line?: number; column?: number } {
    if (!this.file) return { prefix: '' };
    if (!this.source) return { prefix: `${this.file}: ` };
    let node: unknown = this.source.doc.contents;
    let offset: number | undefined = rangeStart(node);
    for (let i = 0; i < segments.length; i++) {
      const seg = segments[i]!;
      const last = i === segments.length - 1;
      if (isMap(node)) {
        const pair = node.items.find((p) => isScalar(p.key) && String(p.key.value) === String(seg));
        if (!pair) break;
        if (last && asKey) {
          offset = rangeStart(pair.key) ?? offset;
          break;
        }
        node = pair.value;
      } else if (isSeq(node)) {
        const item = node.items[Number(seg)];
        if (item === undefined) break;
        node = item;
      } else {
        break;
      }
      offset = rangeStart(node) ?? offset;
    }
    if (offset === undefined) return { prefix: `${this.file}: ` };
    const pos = this.source.lines.linePos(offset);
    return { prefix: `${this.file}:${pos.line}:${pos.col}: `, line: pos.line, column: pos.col };
  }

  issue(code: ConfigErrorCode, segments: readonly (string | number)[], text: string, asKey = false): ConfigIssue {
    const keyPath = formatKeyPath(segments);
    const pos = this.position(segments, asKey);
    return {
      code,
      path: keyPath,
      message: `${pos.prefix}${keyPath}: ${text}`,
      ...(pos.line !== undefined ? { line: pos.line, column: pos.column } : {}),
    };
  }
}

function rangeStart(node: unknown): number | undefined {
  const range = (node as YamlNode | null | undefined)?.range;
  return Array.isArray(range) ? range[0] : undefined;
}

/** `['listeners', 0, 'port']` → `listeners[0].port`. */
export function formatKeyPath(segments: readonly (string | number)[]): string {
  let out = '';
  for (const seg of segments) {
    if (typeof seg === 'number' || /^\d+$/.test(seg)) out += `[${seg}]`;
    else if (/^[A-Za-z_$][\w$]*$/.test(seg)) out += out ? `.${seg}` : seg;
    else out += `[${JSON.stringify(seg)}]`;
  }
  return out || '(top level)';
}

function pointerToSegments(pointer: string): (string | number)[] {
  if (!pointer) return [];
  return pointer
    .slice(1)
    .split('/')
    .map((s) => s.replace(/~1/g, '/').replace(/~0/g, '~'))
    .map((s) => (/^\d+$/.test(s) ? Number(s) : s));
}

// ---------------------------------------------------------------- schema

const ajv = new Ajv({ allErrors: true, verbose: true, strict: true, allowUnionTypes: true });
ajv.addVocabulary(['expected']);
const validateSchema = ajv.compile<RawConfig>(CONFIG_SCHEMA);

interface SchemaNode {
  readonly expected?: string;
  readonly properties?: Readonly<Record<string, SchemaNode>>;
}

export function validateRaw(raw: RawConfig, where: Locator): ConfigIssue[] {
  if (validateSchema(raw)) return [];
  const seen = new Set<string>();
  const issues: ConfigIssue[] = [];
  for (const err of validateSchema.errors ?? []) {
    const issue = schemaIssue(err, where);
    const key = `${issue.code} ${issue.path}`;
    if (seen.has(key)) continue;
    seen.add(key);
    issues.push(issue);
  }
  return issues;
}

export function byPosition(a: ConfigIssue, b: ConfigIssue): number {
  return (a.line ?? 0) - (b.line ?? 0) || (a.column ?? 0) - (b.column ?? 0);
}

function schemaIssue(err: ErrorObject, where: Locator): ConfigIssue {
  const segments = pointerToSegments(err.instancePath);
  const parent = err.parentSchema as SchemaNode | undefined;
  if (err.keyword === 'additionalProperties') {
    const key = String((err.params as { additionalProperty: string }).additionalProperty);
    const allowed = Object.keys(parent?.properties ?? {});
    const hint = closest(key, allowed);
    return where.issue(
      'BIFRO_CONFIG_UNKNOWN_KEY',
      [...segments, key],
      `unknown key; expected one of ${allowed.join(', ')}${hint ? ` (did you mean "${hint}"?)` : ''}`,
      true,
    );
  }
  if (err.keyword === 'required') {
    const key = String((err.params as { missingProperty: string }).missingProperty);
    const expected = parent?.properties?.[key]?.expected;
    const issue = where.issue('BIFRO_CONFIG_MISSING_KEY', [...segments, key], `missing${expected ? `; expected ${expected}` : ''}`);
    return issue;
  }
  const expected = parent?.expected ?? err.message ?? 'a valid value';
  return where.issue('BIFRO_CONFIG_INVALID_VALUE', segments, `expected ${expected}, got ${describeValue(err.data)}`);
}

/** How a wrong value is shown: strings quoted, collections named. */
export function describeValue(value: unknown): string {
  if (value === null) return 'null';
  if (Array.isArray(value)) return 'a list';
  if (typeof value === 'object') return 'a map';
  if (typeof value === 'string') return JSON.stringify(value.length > 60 ? `${value.slice(0, 57)}...` : value);
  return String(value);
}

/** The allowed key nearest to a misspelt one (edit distance ≤ 2, or a case-insensitive match). */
function closest(key: string, allowed: readonly string[]): string | undefined {
  let best: string | undefined;
  let bestDistance = 3;
  for (const candidate of allowed) {
    if (candidate.toLowerCase() === key.toLowerCase()) return candidate;
    const d = editDistance(key.toLowerCase(), candidate.toLowerCase());
    if (d < bestDistance) {
      best = candidate;
      bestDistance = d;
    }
  }
  return best;
}

function editDistance(a: string, b: string): number {
  const row = Array.from({ length: b.length + 1 }, (_, j) => j);
  for (let i = 1; i <= a.length; i++) {
    let diagonal = row[0]!;
    row[0] = i;
    for (let j = 1; j <= b.length; j++) {
      const above = row[j]!;
      row[j] = Math.min(above + 1, row[j - 1]! + 1, diagonal + (a[i - 1] === b[j - 1] ? 0 : 1));
      diagonal = above;
    }
  }
  return row[b.length]!;
}

// ---------------------------------------------------------------- listener rules beyond the schema
