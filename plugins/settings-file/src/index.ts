import { definePlugin } from '@bifro/spi';
import { FileSettingProvider } from './file-setting-provider';
import { parseOptions } from './options';

export { FileSettingProvider } from './file-setting-provider';
export { parseOptions, DEFAULT_FILE, DEFAULT_POLL_MS, type FileSettingsOptions } from './options';
export { parseSettings, type SettingsTable, type SettingsWarning, type ParseResult } from './settings-table';

/**
 * The settings-file plugin (`plugins.settings: "@bifro/plugin-settings-file"` in the broker
 * config): per-tenant settings from `conf/settings.yml`, reloaded when the file changes.
 * Options: `file` (default `settings.yml`, relative to the config folder), `pollMs` (default 500),
 * `missingOk` (default true), `watch` (default true).
 */
export default definePlugin({
  settings: (ctx) => new FileSettingProvider(parseOptions(ctx.options, ctx.configDir), ctx.logger),
});
