import { defineErrors } from '../base/errors';

/** Errors of running several worker processes (`workers` > 1, docs/multicore.md). */
export const WORKER_ERRORS = defineErrors({
  BIFRO_WORKERS_COUNT_MISMATCH: {
    summary:
      'The data directory was used with another worker count. Tenants are assigned to workers by a hash of their id modulo the count, so a different count would put them on workers that do not hold their sessions and retained messages.',
    remedy:
      'Start with the count recorded in `<dataDir>/workers.json` (`workers:` in the config or `--workers`), or give this broker a new data directory. Changing the count of a data directory in place is not supported.',
  },
  BIFRO_WORKERS_MARKER_INVALID: {
    summary: '`<dataDir>/workers.json`, which records the worker count of the data directory, cannot be read or does not hold a count.',
    remedy:
      'Restore the file from a backup, or write {"workers": N} with the count the data directory was used with; never guess a different count (see BIFRO_WORKERS_COUNT_MISMATCH).',
  },
  BIFRO_WORKER_START_FAILED: {
    summary: 'A worker process exited, or stopped answering, before it was ready, without reporting a more specific error.',
    remedy:
      'Read the lines the worker logged before it exited (they carry its `worker` index); start with `workers: 1` to see the error directly.',
  },
});

export type WorkerErrorCode = keyof typeof WORKER_ERRORS;
