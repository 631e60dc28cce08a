import type { SettingProvider } from '@bifro/spi';

export const REGISTRY_DEFAULT_SETTINGS = '@bifro/core:registry-default-settings';

/** Gives every tenant the registry defaults. Loaded when no settings plugin is configured. */
export function createRegistryDefaultSettings(): SettingProvider {
  return { provide: () => undefined };
}
