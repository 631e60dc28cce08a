import { SETTINGS, type SettingName, type SettingValue } from './settings';

/** The bounds of a setting as the registry gives them. */
type Spec = { readonly type: 'boolean' | 'integer'; readonly min?: number; readonly max?: number };

/**
 * Why `value` is not a valid value of `setting` (wrong type, or outside the registry bounds), or
 * `undefined` when it is. The broker uses it on every value a {@link SettingProvider} gives; a
 * provider can use it to refuse a value early, with the same words.
 *
 * @example
 * ```ts
 * settingValueProblem('MaximumQoS', 3); // 'above the maximum 2'
 * settingValueProblem('MaximumQoS', 1); // undefined
 * settingValueProblem('RetainEnabled', 'yes'); // 'expected a boolean'
 * ```
 */
export function settingValueProblem(setting: SettingName, value: unknown): string | undefined {
  const spec: Spec = SETTINGS[setting];
  if (spec.type === 'boolean') return typeof value === 'boolean' ? undefined : 'expected a boolean';
  if (typeof value !== 'number' || !Number.isInteger(value)) return 'expected an integer';
  if (spec.min !== undefined && value < spec.min) return `below the minimum ${spec.min}`;
  if (spec.max !== undefined && value > spec.max) return `above the maximum ${spec.max}`;
  return undefined;
}

/**
 * Whether `value` is a valid value of `setting`: the right type and within the registry bounds
 * (see {@link settingValueProblem} for the reason when it is not).
 *
 * @example
 * ```ts
 * const raw: unknown = JSON.parse('2');
 * if (isValidSettingValue('MaximumQoS', raw)) overrides.set('MaximumQoS', raw); // raw: number
 * ```
 */
export function isValidSettingValue<S extends SettingName>(setting: S, value: unknown): value is SettingValue<S> {
  return settingValueProblem(setting, value) === undefined;
}

/**
 * What a valid value of `setting` looks like, for messages: `true or false`, `an integer from 0
 * to 2`, `an integer of at least 1`...
 *
 * @example
 * ```ts
 * `invalid value ${describeValue(raw)} for MaximumQoS (expected ${expectedSettingValue('MaximumQoS')})`;
 * // invalid value "high" for MaximumQoS (expected an integer from 0 to 2)
 * ```
 */
export function expectedSettingValue(setting: SettingName): string {
  const spec: Spec = SETTINGS[setting];
  if (spec.type === 'boolean') return 'true or false';
  if (spec.min !== undefined && spec.max !== undefined) return `an integer from ${spec.min} to ${spec.max}`;
  if (spec.min !== undefined) return `an integer of at least ${spec.min}`;
  if (spec.max !== undefined) return `an integer of at most ${spec.max}`;
  return 'an integer';
}

/**
 * Any value as it appears in a log line or a warning: strings quoted, objects and arrays as JSON
 * (or their tag when they cannot be serialised, e.g. a cycle), everything else through `String`.
 *
 * @example
 * ```ts
 * describeValue('8'); // '"8"'
 * describeValue({ max: 8 }); // '{"max":8}'
 * describeValue(8); // '8'
 * ```
 */
export function describeValue(value: unknown): string {
  if (typeof value === 'string') return JSON.stringify(value);
  if (typeof value === 'object' && value !== null) {
    try {
      return JSON.stringify(value);
    } catch {
      return Object.prototype.toString.call(value);
    }
  }
  return String(value);
}

const SETTING_NAMES = Object.keys(SETTINGS) as SettingName[];

/** One bad entry of a change of a tenant's settings, as {@link settingChangeEntryProblems} gives it (SPI 1.5.0). */
export interface SettingChangeProblem {
  /** The setting name as the change gives it (possibly unknown, or misspelt). */
  readonly setting: string;
  /** What is wrong, without the name: `3 (above the maximum 2)`, `unknown setting (did you mean MaxTopicLevels?)`. */
  readonly problem: string;
  /** The whole line, naming the setting, as {@link settingChangeProblems} lists it. */
  readonly line: string;
}

/**
 * What is wrong with a change of a tenant's settings, one entry per bad setting, each with its
 * name apart (SPI 1.5.0): for a form that shows each problem next to its field. The words are
 * those of {@link settingChangeProblems}.
 *
 * @example
 * ```ts
 * settingChangeEntryProblems({ MaximumQoS: 3, maxtopiclevels: 4 });
 * // [{ setting: 'MaximumQoS', problem: '3 (above the maximum 2)', line: 'invalid MaximumQoS: 3 (above the maximum 2)' },
 * //  { setting: 'maxtopiclevels', problem: 'unknown setting (did you mean MaxTopicLevels?)',
 * //    line: 'unknown setting maxtopiclevels (did you mean MaxTopicLevels?)' }]
 * ```
 */
export function settingChangeEntryProblems(changes: Readonly<Record<string, unknown>>): SettingChangeProblem[] {
  const problems: SettingChangeProblem[] = [];
  for (const [name, value] of Object.entries(changes)) {
    if (!Object.prototype.hasOwnProperty.call(SETTINGS, name)) {
      const found = SETTING_NAMES.find((n) => n.toLowerCase() === name.toLowerCase());
      const hint = found === undefined ? '' : ` (did you mean ${found}?)`;
      problems.push({ setting: name, problem: `unknown setting${hint}`, line: `unknown setting ${name}${hint}` });
      continue;
    }
    if (value === null) continue;
    const problem = settingValueProblem(name as SettingName, value);
    if (problem === undefined) continue;
    const text = `${describeValue(value)} (${problem})`;
    problems.push({ setting: name, problem: text, line: `invalid ${name}: ${text}` });
  }
  return problems;
}

/**
 * What is wrong with a change of a tenant's settings (a `SettingUpdate`), one line per bad
 * entry, empty when it is fine (SPI 1.3.0): an unknown name (with a hint for a case mistake), or a
 * value the registry refuses, in the broker's words. `null` (remove the override) is fine for every
 * known setting. The broker checks a change with it before a writable provider sees it; the
 * provider can check again with the same words. {@link settingChangeEntryProblems} gives the same
 * with each setting name apart.
 *
 * @example
 * ```ts
 * settingChangeProblems({ MaximumQoS: 3, maxtopiclevels: 4, RetainEnabled: null });
 * // ['invalid MaximumQoS: 3 (above the maximum 2)', 'unknown setting maxtopiclevels (did you mean MaxTopicLevels?)']
 * ```
 */
export function settingChangeProblems(changes: Readonly<Record<string, unknown>>): string[] {
  return settingChangeEntryProblems(changes).map((p) => p.line);
}
