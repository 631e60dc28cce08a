import { BifroError, defineErrors } from '../base/errors';

/** Errors of the `bifro` command line itself. */
export const CLI_ERRORS = defineErrors({
  BIFRO_CLI_USAGE: {
    summary: 'The command line names an unknown command or option, or an option lacks its value.',
    remedy: 'Run `bifro --help` for the commands and options.',
  },
  BIFRO_CLI_NOT_RUNNING: {
    summary: '`bifro stop` found no running broker for the pid file of this configuration.',
    remedy: 'Nothing to stop; check --config / --data-dir if you expected one (the pid file lives in the data directory).',
  },
  BIFRO_CLI_STOP_TIMEOUT: {
    summary: 'The broker did not exit within the stop timeout after SIGTERM.',
    remedy:
      'Look at <dataDir>/bifro.log for what it is waiting on; `kill -KILL <pid>` ends it at once (sessions not persisted may be lost).',
  },
  BIFRO_CLI_SIGNAL_FAILED: {
    summary: 'The broker process could not be signalled (it belongs to another user).',
    remedy: 'Run `bifro stop` as the user that started the broker.',
  },
  BIFRO_CLI_DAEMON_FAILED: {
    summary: '`bifro start --daemon` started a background broker that exited or did not become ready.',
    remedy: 'Read the log lines shown (the whole log is <dataDir>/bifro.log) and start in the foreground to see the error directly.',
  },
  BIFRO_CLI_BROKER_RUNNING: {
    summary: '`bifro storage check|repair` refused to touch the storage while the broker that uses it runs.',
    remedy: 'Stop the broker first (`bifro stop`, with the same --config / --data-dir), then run the command again.',
  },
  BIFRO_STORAGE_NO_TOOLS: {
    summary: 'The storage plugin the configuration uses offers no offline check or repair (`storageTools`, SPI 1.6.0).',
    remedy: "See the storage plugin's documentation for how to check its data; @bifro/plugin-storage-level has both commands.",
  },
  BIFRO_STORAGE_REPAIR_UNCONFIRMED: {
    summary: '`bifro storage repair` would drop data and was not confirmed.',
    remedy:
      'Read what `bifro storage check` reports under "a repair loses", then run the repair again with --yes (or answer y at the prompt).',
  },
  BIFRO_PLUGIN_VERIFY_FAILED: {
    summary: '`bifro plugin verify` found a phase that failed without a more specific code.',
    remedy: 'Read the phase named in the message; the other BIFRO_PLUGIN_* codes explain each phase.',
  },
});

export type CliErrorCode = keyof typeof CLI_ERRORS;

/** A command line the CLI cannot run: unknown command or option, missing value. Exit code 2. */
export class UsageError extends BifroError {
  constructor(message: string) {
    super('BIFRO_CLI_USAGE', message);
  }
}
