import { describeValue, SETTINGS, settingValueProblem, type SettingChange, type SettingName, type SettingValue } from '@bifro/spi';
import { describeError } from '../base/errors';
import type { Logger } from '../base/logger';
import type { SettingsManager } from './managers';
import type { GuardedPlugin } from './plugin-call-guard';

type AnySettingValue = boolean | number;

/**
 * Per-tenant settings from the settings plugin, checked against the registry (`settingValueProblem`
 * of @bifro/spi, which providers can use too) and cached per tenant and setting. An invalid value
 * is logged (naming tenant, setting and value) and the default is used. When the provider announces a change the cache is dropped (for the tenant, or
 * all) and listeners are told.
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
