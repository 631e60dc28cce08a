import { defineErrors } from '../base/errors';

/** Listener errors. */
export const TRANSPORT_ERRORS = defineErrors({
  BIFRO_LISTENER_BIND_FAILED: {
    summary: 'A listener could not bind its address (port in use, no permission, unknown host).',
    remedy: 'Free the port or change `listeners[].port` / `--port`; ports below 1024 need privileges.',
  },
  BIFRO_LISTENER_TLS_INVALID: {
    summary: 'A tls/wss listener cannot use its certificate, key or CA file (unreadable, not PEM, key not matching the certificate).',
    remedy:
      'Check the file named in the message: a PEM certificate (chain) in `tls.cert`, its unencrypted private key in `tls.key`, PEM CA certificates in `tls.ca`.',
  },
});
