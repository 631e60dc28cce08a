import { optionsError } from './errors';

/** The placeholders a query may use. `tenant` and `userId` are known only after the auth query. */
export const PLACEHOLDERS = ['username', 'clientId', 'tenant', 'userId'] as const;
export type Placeholder = (typeof PLACEHOLDERS)[number];

/** The values a query is run with. */
export type PlaceholderValues = { readonly [P in Placeholder]?: string };

/**
 * A query with its `${name}` placeholders replaced by bind parameters `$1`, `$2`...: `params[i]`
 * is the placeholder whose value goes into `$<i+1>`. A placeholder used twice is one parameter.
 * Values are never written into the SQL text.
 */
export interface CompiledQuery {
  /** The option the query came from (`authQuery`, `aclQuery`), for messages. */
  readonly key: string;
  /** The SQL sent to PostgreSQL, with `$n` parameters. */
  readonly text: string;
  readonly params: readonly Placeholder[];
  /** Whether the query uses the placeholder. */
  uses(placeholder: Placeholder): boolean;
  /** The bind values, in `$n` order. */
  values(values: PlaceholderValues): string[];
}

const IDENT_START = /[A-Za-z_\u0080-\uffff]/;
const IDENT_PART = /[A-Za-z0-9_\u0080-\uffff]/;

/**
 * Compiles a query option. The SQL is scanned the way PostgreSQL lexes it (string literals, `E''`
 * escapes, quoted identifiers, dollar-quoted strings, `--` and nested `/* *\/` comments), so that
 * a placeholder inside a quoted string or a comment is refused (it would not be a parameter
 * there), as are placeholders other than `allowed`, positional `$1` parameters written by hand,
 * and more than one statement. A trailing `;` is dropped.
 *
 * @example
 * ```ts
 * compileQuery('SELECT tenant, password_hash FROM mqtt_users WHERE username = ${username}', 'authQuery', ['username', 'clientId']);
 * // text: 'SELECT tenant, password_hash FROM mqtt_users WHERE username = $1', params: ['username']
 * ```
 */
export function compileQuery(sql: string, key: string, allowed: readonly Placeholder[]): CompiledQuery {
  const at = (i: number): string => `options.${key}: at offset ${i}`;
  const params: Placeholder[] = [];
  let out = '';
  let i = 0;
  let statementEnd = -1;
  const n = sql.length;
  const placeholderInside = (start: number, end: number, what: string): void => {
    const inner = sql.slice(start, end);
    const found = /\$\{([^}]*)\}/.exec(inner);
    if (found !== null) {
      throw optionsError(
        `${at(start + found.index)}: the placeholder ${found[0]} is inside ${what}; write it bare where a value goes (it becomes a bind parameter, e.g. \`WHERE username = \${username}\`)`,
      );
    }
  };
  while (i < n) {
    const ch = sql[i]!;
    const next = sql[i + 1];
    if (statementEnd >= 0 && !/\s/.test(ch)) {
      if (ch === '-' && next === '-') {
        // a comment after the last statement is fine
      } else if (ch === '/' && next === '*') {
        // idem
      } else {
        throw optionsError(`${at(statementEnd)}: only one SQL statement is allowed (found text after ";")`);
      }
    }
    if (ch === "'") {
      const escapes = (sql[i - 1] === 'E' || sql[i - 1] === 'e') && (i < 2 || !IDENT_PART.test(sql[i - 2]!));
      let j = i + 1;
      for (;;) {
        if (j >= n) throw optionsError(`${at(i)}: unterminated string literal`);
        if (escapes && sql[j] === '\\') {
          j += 2;
          continue;
        }
        if (sql[j] === "'") {
          if (sql[j + 1] === "'") {
            j += 2;
            continue;
          }
          break;
        }
        j++;
      }
      placeholderInside(i, j + 1, 'a string literal');
      out += sql.slice(i, j + 1);
      i = j + 1;
      continue;
    }
    if (ch === '"') {
      let j = i + 1;
      for (;;) {
        if (j >= n) throw optionsError(`${at(i)}: unterminated quoted identifier`);
        if (sql[j] === '"') {
          if (sql[j + 1] === '"') {
            j += 2;
            continue;
          }
          break;
        }
        j++;
      }
      placeholderInside(i, j + 1, 'a quoted identifier');
      out += sql.slice(i, j + 1);
      i = j + 1;
      continue;
    }
    if (ch === '-' && next === '-') {
      let j = sql.indexOf('\n', i);
      if (j < 0) j = n;
      placeholderInside(i, j, 'a comment');
      out += sql.slice(i, j);
      i = j;
      continue;
    }
    if (ch === '/' && next === '*') {
      let depth = 1;
      let j = i + 2;
      while (depth > 0) {
        if (j >= n) throw optionsError(`${at(i)}: unterminated /* comment`);
        if (sql[j] === '/' && sql[j + 1] === '*') {
          depth++;
          j += 2;
        } else if (sql[j] === '*' && sql[j + 1] === '/') {
          depth--;
          j += 2;
        } else j++;
      }
      placeholderInside(i, j, 'a comment');
      out += sql.slice(i, j);
      i = j;
      continue;
    }
    if (ch === '$') {
      if (next === '{') {
        const close = sql.indexOf('}', i + 2);
        const name = close < 0 ? undefined : sql.slice(i + 2, close);
        if (name === undefined) throw optionsError(`${at(i)}: "\${" without a closing "}"`);
        if (!(PLACEHOLDERS as readonly string[]).includes(name)) {
          throw optionsError(`${at(i)}: unknown placeholder \${${name}} (placeholders: ${allowed.map((p) => `\${${p}}`).join(', ')})`);
        }
        const placeholder = name as Placeholder;
        if (!allowed.includes(placeholder)) {
          throw optionsError(
            `${at(i)}: the placeholder \${${name}} is not known when ${key} runs (it may use ${allowed.map((p) => `\${${p}}`).join(', ')})`,
          );
        }
        let index = params.indexOf(placeholder);
        if (index < 0) {
          params.push(placeholder);
          index = params.length - 1;
        }
        // A space keeps `$1` from running into what follows (`${username}1` must not become `$11`).
        const after = sql[close + 1];
        out += `$${index + 1}${after !== undefined && /[0-9A-Za-z_$]/.test(after) ? ' ' : ''}`;
        i = close + 1;
        continue;
      }
      if (next !== undefined && /[0-9]/.test(next) && (i === 0 || !IDENT_PART.test(sql[i - 1]!))) {
        throw optionsError(
          `${at(i)}: positional parameters like $1 are not supported: write a placeholder (${allowed.map((p) => `\${${p}}`).join(', ')}) instead`,
        );
      }
      if (i === 0 || !IDENT_PART.test(sql[i - 1]!)) {
        // A dollar-quoted string: $$...$$ or $tag$...$tag$.
        let j = i + 1;
        if (next !== undefined && next !== '$' && IDENT_START.test(next)) {
          while (j < n && IDENT_PART.test(sql[j]!)) j++;
        }
        if (sql[j] === '$') {
          const tag = sql.slice(i, j + 1);
          const end = sql.indexOf(tag, j + 1);
          if (end < 0) throw optionsError(`${at(i)}: unterminated dollar-quoted string ${tag}`);
          placeholderInside(j + 1, end, 'a dollar-quoted string');
          out += sql.slice(i, end + tag.length);
          i = end + tag.length;
          continue;
        }
      }
      out += ch;
      i++;
      continue;
    }
    if (ch === ';') {
      if (statementEnd < 0) statementEnd = i;
      i++;
      continue;
    }
    out += ch;
    i++;
  }
  const text = out.trim();
  if (text === '') throw optionsError(`options.${key}: must be an SQL query, got an empty one`);
  const usesSet = new Set<Placeholder>(params);
  return {
    key,
    text,
    params,
    uses: (placeholder) => usesSet.has(placeholder),
    values: (values) =>
      params.map((p) => {
        const value = values[p];
        if (value === undefined) throw new Error(`${key}: no value for \${${p}}`);
        return value;
      }),
  };
}
