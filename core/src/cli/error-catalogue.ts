import { API_ERRORS } from '../api/api-errors';
import { pluginErrorSpec, type ErrorSpec } from '../base/errors';
import { CLI_ERRORS } from './cli-errors';
import { PLUGIN_ERRORS } from '../plugin-host/plugin-errors';
import { CONFIG_ERRORS } from '../runtime/config-errors';
import { PID_FILE_ERRORS } from '../runtime/pid-file';
import { TRANSPORT_ERRORS } from '../transport/transport-errors';
import { WORKER_ERRORS } from '../workers/worker-errors';

/**
 * Every area's catalogue of core, in the order docs/errors.md lists them. Plugins declare their
 * own codes (`PluginDefinition.errors` in @bifro/spi): the host records them when it loads a
 * plugin, and docs/errors.md lists the first-party plugins' codes after these (render-docs.ts).
 */
export const ERROR_AREAS: readonly { readonly title: string; readonly codes: Readonly<Record<string, ErrorSpec>> }[] = [
  { title: 'Configuration', codes: CONFIG_ERRORS },
  { title: 'Plugins', codes: PLUGIN_ERRORS },
  { title: 'Listeners', codes: TRANSPORT_ERRORS },
  { title: 'Process and pid file', codes: PID_FILE_ERRORS },
  { title: 'Worker processes', codes: WORKER_ERRORS },
  { title: 'Admin API', codes: API_ERRORS },
  { title: 'Command line', codes: CLI_ERRORS },
];

/** The catalogue entry of a code: core's, else the one a loaded plugin declared. */
export function errorSpec(code: string): ErrorSpec | undefined {
  for (const area of ERROR_AREAS) {
    if (Object.prototype.hasOwnProperty.call(area.codes, code)) return area.codes[code];
  }
  return pluginErrorSpec(code)?.spec;
}
