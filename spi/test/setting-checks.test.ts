import {
  describeValue,
  expectedSettingValue,
  isValidSettingValue,
  SETTINGS,
  settingChangeEntryProblems,
  settingChangeProblems,
  settingValueProblem,
  type SettingName,
} from '@bifro/spi';

describe('settingValueProblem', () => {
  it('accepts a value of the right type within the bounds', () => {
    expect(settingValueProblem('MaximumQoS', 0)).toBeUndefined();
    expect(settingValueProblem('MaximumQoS', 2)).toBeUndefined();
    expect(settingValueProblem('RetainEnabled', false)).toBeUndefined();
  });

  it('names the bound a value crosses', () => {
    expect(settingValueProblem('MaximumQoS', 3)).toBe('above the maximum 2');
    expect(settingValueProblem('MaxTopicLevels', 0)).toBe('below the minimum 1');
  });

  it('refuses the wrong type, fractions and non-finite numbers', () => {
    expect(settingValueProblem('RetainEnabled', 'true')).toBe('expected a boolean');
    expect(settingValueProblem('RetainEnabled', 1)).toBe('expected a boolean');
    expect(settingValueProblem('MaximumQoS', '1')).toBe('expected an integer');
    expect(settingValueProblem('MaximumQoS', 1.5)).toBe('expected an integer');
    expect(settingValueProblem('MaximumQoS', Number.NaN)).toBe('expected an integer');
    expect(settingValueProblem('MaximumQoS', true)).toBe('expected an integer');
    expect(settingValueProblem('MaximumQoS', null)).toBe('expected an integer');
  });

  it("accepts every registry default, and refuses one past each integer setting's bounds", () => {
    for (const [name, spec] of Object.entries(SETTINGS) as [SettingName, { default: boolean | number; min?: number; max?: number }][]) {
      expect(settingValueProblem(name, spec.default)).toBeUndefined();
      if (spec.max !== undefined) expect(settingValueProblem(name, spec.max + 1)).toMatch(/^above the maximum /);
      if (spec.min !== undefined) expect(settingValueProblem(name, spec.min - 1)).toMatch(/^below the minimum /);
    }
  });
});

describe('isValidSettingValue', () => {
  it('agrees with settingValueProblem', () => {
    for (const value of [0, 2, 3, -1, 1.5, '1', true, undefined]) {
      expect(isValidSettingValue('MaximumQoS', value)).toBe(settingValueProblem('MaximumQoS', value) === undefined);
    }
  });

  it('narrows the value to the setting type', () => {
    const raw: unknown = 1;
    if (!isValidSettingValue('MaximumQoS', raw)) throw new Error('expected valid');
    const qos: number = raw;
    expect(qos).toBe(1);
  });
});

describe('expectedSettingValue', () => {
  it('describes booleans and bounded integers', () => {
    expect(expectedSettingValue('RetainEnabled')).toBe('true or false');
    expect(expectedSettingValue('MaximumQoS')).toBe('an integer from 0 to 2');
  });
});

describe('describeValue', () => {
  it('quotes strings, serialises objects, stringifies the rest', () => {
    expect(describeValue('8')).toBe('"8"');
    expect(describeValue({ max: 8 })).toBe('{"max":8}');
    expect(describeValue([1, 'a'])).toBe('[1,"a"]');
    expect(describeValue(8)).toBe('8');
    expect(describeValue(true)).toBe('true');
    expect(describeValue(null)).toBe('null');
    expect(describeValue(undefined)).toBe('undefined');
  });

  it('falls back to the object tag when JSON cannot serialise it', () => {
    const cycle: Record<string, unknown> = {};
    cycle.self = cycle;
    expect(describeValue(cycle)).toBe('[object Object]');
    expect(describeValue({ big: 1n })).toBe('[object Object]');
  });
});

describe('settingChangeProblems', () => {
  it('accepts valid values and null (remove the override)', () => {
    expect(settingChangeProblems({ MaximumQoS: 1, RetainEnabled: false, MaxTopicAlias: null })).toEqual([]);
  });

  it('names every bad entry: out of bounds, wrong type, unknown with a case hint', () => {
    expect(settingChangeProblems({ MaximumQoS: 3, RetainEnabled: 'yes', maxtopiclevels: 4, Bogus: 1 })).toEqual([
      'invalid MaximumQoS: 3 (above the maximum 2)',
      'invalid RetainEnabled: "yes" (expected a boolean)',
      'unknown setting maxtopiclevels (did you mean MaxTopicLevels?)',
      'unknown setting Bogus',
    ]);
  });

  it('does not take inherited names for settings', () => {
    expect(settingChangeProblems(JSON.parse('{"toString": 1, "__proto__": 2}') as Record<string, unknown>)).toEqual([
      'unknown setting toString',
      'unknown setting __proto__',
    ]);
  });
});

describe('settingChangeEntryProblems', () => {
  it('gives each bad entry with its name apart, in the words of settingChangeProblems', () => {
    const change = { MaximumQoS: 3, RetainEnabled: 'yes', maxtopiclevels: 4, Bogus: 1, MaxTopicAlias: null, ReceivingMaximum: 10 };
    const problems = settingChangeEntryProblems(change);
    expect(problems.map(({ setting, problem }) => ({ setting, problem }))).toEqual([
      { setting: 'MaximumQoS', problem: '3 (above the maximum 2)' },
      { setting: 'RetainEnabled', problem: '"yes" (expected a boolean)' },
      { setting: 'maxtopiclevels', problem: 'unknown setting (did you mean MaxTopicLevels?)' },
      { setting: 'Bogus', problem: 'unknown setting' },
    ]);
    expect(problems.map((p) => p.line)).toEqual(settingChangeProblems(change));
  });

  it('is empty for a valid change', () => {
    expect(settingChangeEntryProblems({ MaximumQoS: 1, RetainEnabled: null })).toEqual([]);
  });
});
