import { defineErrors } from '../errors';

/** Listener errors. */
export const TRANSPORT_ERRORS = defineErrors({
  BIFRO_LISTENER_BIND_FAILED: {
    summary: 'A listener could not bind its address (port in use, no permission, unknown host).',
    remedy: 'Free the port or change `listeners[].port` / `--port`; ports below 1024 need privileges.',
  },
  BIFRO_LISTENER_UNSUPPORTED: {
    summary: 'A listener type is configured that this build cannot serve.',
    remedy: 'Use a listener type listed in docs/configuration.md.',
  },
});
