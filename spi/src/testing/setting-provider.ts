import assert from 'node:assert/strict';
import { SETTINGS, type SettingName, type SettingProvider } from '../settings';
import type { ConformanceCase, InstanceFactory } from './conformance-case';
import { callSync, call, lifecycleCheck, withInstance } from './contract-checks';

/** A value the provider under test must give. */
export interface SettingExpectation {
  readonly tenantId: string;
  readonly setting: SettingName;
  /** The expected value; `undefined` for "use the registry default". */
  readonly value: boolean | number | undefined;
}

/** Options of {@link settingProviderConformance}. */
export interface SettingProviderConformanceOptions extends InstanceFactory<SettingProvider> {
  /** Tenants to ask about every setting, besides a few plain and odd ones. */
  readonly tenants?: readonly string[];
  /** The provider's own values, checked one by one. */
  readonly expectations?: readonly SettingExpectation[];
  /**
   * Makes the provider announce a change (e.g. rewrites its file). When given, a case checks
   * that `onChange` listeners are called and that an unsubscribed listener is not.
   */
  readonly triggerChange?: (provider: SettingProvider) => Promise<void>;
  /** How long to wait for a listener call after `triggerChange`; default 2000 ms. */
  readonly changeTimeoutMs?: number;
}

/** Every setting name of the registry, in {@link SETTINGS} order. */
export function allSettingNames(): SettingName[] {
  return Object.keys(SETTINGS) as SettingName[];
}

/** Asserts that `value` is `undefined` or a valid value of `setting` (right type, within bounds). */
export function assertSettingValue(setting: SettingName, value: unknown, what: string): void {
  if (value === undefined) return;
  const spec = SETTINGS[setting];
  if (spec.type === 'boolean') {
    assert.equal(typeof value, 'boolean', `${what}: ${setting} is a boolean setting, got ${JSON.stringify(value)}`);
    return;
  }
  const s = spec as { readonly min?: number; readonly max?: number };
  assert.ok(
    typeof value === 'number' && Number.isInteger(value),
    `${what}: ${setting} is an integer setting, got ${JSON.stringify(value)}`,
  );
  if (s.min !== undefined) assert.ok(value >= s.min, `${what}: ${setting} = ${value} is below its minimum ${s.min}`);
  if (s.max !== undefined) assert.ok(value <= s.max, `${what}: ${setting} = ${value} is above its maximum ${s.max}`);
}

const ORDINARY_TENANTS = ['t1', 'default', '', 'tenant-ü', 'unknown-tenant-bifro-conformance'];

/**
 * The conformance kit of {@link SettingProvider}: lifecycle; for every setting of the registry
 * and varied tenants, `provide` answers synchronously `undefined` or a value of the right type
 * within the registry bounds; `onChange`, when present, returns an unsubscribe function; the
 * provider's own values and change notifications when the options ask for them.
 *
 * @example
 * ```ts
 * registerConformance(
 *   settingProviderConformance({
 *     create: () => new YamlSettingProvider(file),
 *     expectations: [{ tenantId: 'small', setting: 'MaxTopicLevels', value: 8 }],
 *     triggerChange: async () => fs.promises.writeFile(file, 'small:\n  MaxTopicLevels: 9\n'),
 *   }),
 *   { it },
 * );
 * ```
 */
export function settingProviderConformance(options: SettingProviderConformanceOptions): ConformanceCase[] {
  const cases: ConformanceCase[] = [];
  const add = (name: string, check: (p: SettingProvider, timeoutMs: number) => Promise<void>): void => {
    cases.push({ name: `settings: ${name}`, run: () => withInstance(options, check) });
  };
  const tenants = [...ORDINARY_TENANTS, ...(options.tenants ?? [])];

  add('create, init and close resolve; provide is a method', async (p) => lifecycleCheck(['provide'])(p));

  for (const setting of allSettingNames()) {
    add(`provide(${setting}) answers undefined or a valid value for every tenant`, async (p) => {
      for (const tenantId of tenants) {
        const what = `provide(${setting}, ${JSON.stringify(tenantId)})`;
        assertSettingValue(
          setting,
          callSync(what, () => p.provide(setting, tenantId)),
          what,
        );
      }
    });
  }

  add('onChange, when present, returns an unsubscribe function that may be called twice', async (p) => {
    const onChange = p.onChange?.bind(p);
    if (onChange === undefined) return;
    const unsubscribe: unknown = callSync('onChange()', () => onChange(() => undefined));
    assert.equal(typeof unsubscribe, 'function', 'onChange must return a function');
    const fn = unsubscribe as () => void;
    callSync('unsubscribe()', fn);
    callSync('unsubscribe() again', fn);
  });

  (options.expectations ?? []).forEach((e) => {
    add(`expectation: ${e.setting} of ${JSON.stringify(e.tenantId)} is ${String(e.value)}`, async (p) => {
      const what = `provide(${e.setting}, ${JSON.stringify(e.tenantId)})`;
      const value = callSync(what, () => p.provide(e.setting, e.tenantId));
      assertSettingValue(e.setting, value, what);
      assert.equal(value, e.value, what);
    });
  });

  if (options.triggerChange) {
    const trigger = options.triggerChange;
    const wait = options.changeTimeoutMs ?? 2000;
    add('onChange listeners hear a change; unsubscribed ones do not', async (p, t) => {
      const onChange = p.onChange?.bind(p);
      assert.equal(typeof onChange, 'function', 'a provider that announces changes must implement onChange');
      if (onChange === undefined) return;
      let kept = 0;
      let dropped = 0;
      let heard: () => void = () => undefined;
      const heardOnce = new Promise<void>((resolve) => (heard = resolve));
      const unsubscribeKept = onChange((change) => {
        assert.ok(change.tenantId === undefined || typeof change.tenantId === 'string', 'change.tenantId must be a string or undefined');
        kept++;
        heard();
      });
      const unsubscribeDropped = onChange(() => {
        dropped++;
      });
      unsubscribeDropped();
      await call('triggerChange()', t, () => trigger(p));
      let timer: NodeJS.Timeout | undefined;
      await Promise.race([heardOnce, new Promise<void>((resolve) => (timer = setTimeout(resolve, wait)))]);
      clearTimeout(timer);
      unsubscribeKept();
      assert.ok(kept > 0, `no onChange listener was called within ${wait} ms of the change`);
      assert.equal(dropped, 0, 'an unsubscribed listener was called');
    });
  }

  return cases;
}
