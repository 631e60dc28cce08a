import {
  describeValue,
  SETTINGS,
  settingChangeProblems,
  settingValueProblem,
  type SettingChange,
  type SettingName,
  type SettingUpdate,
  type SettingValue,
} from '@bifro/spi';
import { describeError } from '../base/errors';
import type { Logger } from '../base/logger';
import type { SettingsManager, SettingUpdateOutcome } from './managers';
import { CALL_FAILED, type GuardedPlugin } from './plugin-call-guard';

type AnySettingValue = boolean | number;

const SETTING_NAMES = Object.keys(SETTINGS) as SettingName[];

/**
 * Per-tenant settings from the settings plugin, checked against the registry (`settingValueProblem`
 * of @bifro/spi, which providers can use too) and cached per tenant and setting. An invalid value
 * is logged (naming tenant, setting and value) and the default is used. When the provider announces a change the cache is dropped (for the tenant, or
 * all) and listeners are told. A writable provider (SPI 1.3.0 `update`) is changed through
 * {@link update}: checked against the registry, guarded like every plugin call, then the cache dropped.
 */
export class GuardedSettingsManager implements SettingsManager {
  private readonly cache = new Map<string, Map<SettingName, AnySettingValue>>();
  private readonly listeners = new Set<(tenantId: string | undefined) => void>();
  private readonly unsubscribe: (() => void) | undefined;

  constructor(
    private readonly provider: GuardedPlugin<'settings'>,
    private readonly logger: Logger,
  ) {
    const onChange = provider.instance.onChange;
    let unsubscribe: (() => void) | undefined;
    if (onChange !== undefined) {
      try {
        unsubscribe = onChange.call(provider.instance, (change: SettingChange) => this.changed(change));
      } catch (err) {
        logger.warn(
          { plugin: provider.name, err: describeError(err) },
          `settings provider ${provider.name} failed to accept a change listener; changes will not be picked up`,
        );
      }
    }
    this.unsubscribe = unsubscribe;
  }

  get<S extends SettingName>(tenantId: string, setting: S): SettingValue<S> {
    let values = this.cache.get(tenantId);
    if (values !== undefined) {
      const cached = values.get(setting);
      if (cached !== undefined) return cached as SettingValue<S>;
    } else {
      values = new Map();
      this.cache.set(tenantId, values);
    }
    const value = this.lookup(tenantId, setting);
    if (value !== undefined) values.set(setting, value);
    return (value ?? SETTINGS[setting].default) as SettingValue<S>;
  }

  onChange(listener: (tenantId: string | undefined) => void): () => void {
    this.listeners.add(listener);
    return () => this.listeners.delete(listener);
  }

  get providerName(): string {
    return this.provider.name;
  }

  get writable(): boolean {
    return typeof this.provider.instance.writeOverrides === 'function';
  }

  overrides(tenantId: string): Partial<Record<SettingName, SettingValue>> {
    const provider = this.provider;
    const instance = provider.instance;
    const start = provider.start();
    let held: unknown;
    try {
      if (typeof instance.readOverrides === 'function') held = instance.readOverrides(tenantId);
      else {
        // A read-only provider: what it answers is what it holds (`provide` is cheap by contract).
        const answered: Partial<Record<SettingName, unknown>> = {};
        for (const name of SETTING_NAMES) answered[name] = instance.provide(name, tenantId);
        held = answered;
      }
    } catch (err) {
      provider.failed(start, 'readOverrides', 'error', err, { tenantId });
      return {};
    }
    provider.succeeded(start);
    const out: Partial<Record<SettingName, SettingValue>> = {};
    if (typeof held !== 'object' || held === null) return out;
    for (const name of SETTING_NAMES) {
      const value = (held as Partial<Record<SettingName, unknown>>)[name];
      if (value !== undefined && settingValueProblem(name, value) === undefined) out[name] = value as SettingValue;
    }
    return out;
  }

  async update(tenantId: string, changes: SettingUpdate): Promise<SettingUpdateOutcome> {
    const provider = this.provider;
    const instance = provider.instance;
    if (typeof instance.writeOverrides !== 'function')
      return {
        ok: false,
        reason: 'not-writable',
        problems: [`the settings provider ${provider.name} is not writable (it has no writeOverrides)`],
      };
    const problems = settingChangeProblems(changes);
    if (problems.length > 0) return { ok: false, reason: 'invalid', problems };
    const start = provider.start();
    let error: unknown;
    let pending: Promise<void>;
    try {
      pending = Promise.resolve(instance.writeOverrides(tenantId, changes));
    } catch (err) {
      provider.failed(start, 'writeOverrides', 'error', err, { tenantId });
      return { ok: false, reason: 'failed', problems: [describeError(err)] };
    }
    // The guard counts, reports and times the call; the rejection's own words are kept for the caller.
    const kept = pending.catch((err: unknown) => {
      error = err;
      throw err;
    });
    const outcome = await provider.settle(kept, start, 'writeOverrides', { tenantId });
    if (outcome === CALL_FAILED) {
      return error === undefined
        ? { ok: false, reason: 'timeout', problems: [`the settings provider ${provider.name} did not answer writeOverrides in time`] }
        : { ok: false, reason: 'failed', problems: [describeError(error)] };
    }
    provider.succeeded(start);
    // The provider announces its change too; dropping the cache here makes the next CONNECT see
    // the new values even when that announcement comes late.
    this.changed({ tenantId });
    return { ok: true };
  }

  /** Stops listening to the provider. */
  close(): void {
    this.listeners.clear();
    if (this.unsubscribe === undefined) return;
    try {
      this.unsubscribe();
    } catch (err) {
      this.logger.warn({ plugin: this.provider.name, err: describeError(err) }, 'settings provider failed to remove its change listener');
    }
  }

  /** The value to cache, or undefined when the provider failed (not cached: the next call asks again). */
  private lookup(tenantId: string, setting: SettingName): AnySettingValue | undefined {
    const provider = this.provider;
    const start = provider.start();
    let provided: unknown;
    try {
      provided = provider.instance.provide(setting, tenantId);
    } catch (err) {
      provider.failed(start, 'provide', 'error', err, { tenantId });
      return undefined;
    }
    provider.succeeded(start);
    const fallback = SETTINGS[setting].default;
    if (provided === undefined) return fallback;
    const problem = settingValueProblem(setting, provided);
    if (problem === undefined) return provided as AnySettingValue;
    this.logger.warn(
      { plugin: provider.name, tenantId, setting, value: describeValue(provided), problem },
      `settings provider ${provider.name} gave tenant ${tenantId} an invalid ${setting}: ${describeValue(provided)} (${problem}); using the default ${String(fallback)}`,
    );
    return fallback;
  }

  private changed(change: SettingChange): void {
    const tenantId = change?.tenantId;
    if (tenantId === undefined) this.cache.clear();
    else this.cache.delete(tenantId);
    for (const listener of [...this.listeners]) {
      try {
        listener(tenantId);
      } catch (err) {
        this.logger.error({ err: describeError(err), tenantId }, 'settings change listener threw');
      }
    }
  }
}
