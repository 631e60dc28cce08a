import type { ErrorCatalogue } from '@bifro/spi';

/**
 * The error codes of the NATS storage. Every error it throws has a message starting with
 * `<CODE>: ` (the convention of the broker's catalogue, docs/errors.md) and a `code` property; the
 * plugin declares them in its definition (`errors`), so the broker knows them once it is loaded.
 */
export const NATS_STORAGE_ERRORS = {
  BIFRO_STORAGE_NATS_OPTIONS_INVALID: {
    summary: 'An option of the NATS storage plugin is missing or has the wrong type or range; the message names the field.',
    remedy: 'Fix `plugins.storage.options` (or the `cluster` section it comes from): see the option table in docs/storage-nats.md.',
  },
  BIFRO_STORAGE_NATS_UNREACHABLE: {
    summary: 'No NATS server of `servers` accepted the connection when the storage started, so the broker cannot load its storage.',
    remedy:
      'Start NATS (with JetStream) or fix `servers`, the credentials or `tls`; the cause is in the message. The broker exits: its supervisor restarts it once NATS is back.',
  },
  BIFRO_STORAGE_NATS_TIMEOUT: {
    summary: 'A storage call got no answer from NATS JetStream within `timeoutMs` (NATS away, reconnecting, or a stream without a leader).',
    remedy:
      'The client reconnects by itself; check that NATS and JetStream are up and the streams have a leader (`nats stream report`). The write may or may not have been stored.',
  },
  BIFRO_STORAGE_NATS_FAILED: {
    summary: 'JetStream refused a storage request (a stream missing, storage full, a message larger than the server allows...).',
    remedy: 'The JetStream error is in the message; check the server log and `nats stream report`.',
  },
  BIFRO_STORAGE_NATS_LAYOUT: {
    summary: 'The streams under this `prefix` were created with another number of `partitions` (or by an incompatible plugin version).',
    remedy:
      'Every node sharing a `prefix` must use the same `partitions`: set it back to the value named in the message, or use another `prefix` for a new layout.',
  },
  BIFRO_STORAGE_NATS_CLOSED: {
    summary: 'A storage call arrived before init() or after close().',
    remedy: 'A bug in the caller: storage may only be used between init() and close().',
  },
} as const satisfies ErrorCatalogue;

export type NatsStorageErrorCode = keyof typeof NATS_STORAGE_ERRORS;

/** An error of the NATS storage: `message` starts with the code; `cause` keeps the client's error. */
export class NatsStorageError extends Error {
  override readonly name = 'NatsStorageError';

  constructor(
    readonly code: NatsStorageErrorCode,
    message: string,
    options?: { cause?: unknown },
  ) {
    super(`${code}: ${message}`, options);
  }
}

/** A short text for anything thrown. */
export function describe(err: unknown): string {
  return err instanceof Error ? err.message : String(err);
}
