/** Exit codes of `create-bifro-plugin`. */
export const EXIT = {
  OK: 0,
  /** The project could not be written (target directory not empty, a file failed). */
  FAILED: 1,
  /** Usage error: unknown flag or kind, invalid package name, a missing answer without a terminal. */
  USAGE: 2,
  /** The user interrupted a prompt (Ctrl-C). */
  INTERRUPTED: 130,
} as const;

/** An expected failure: printed as `error: <message>` (no stack) and turned into `exitCode`. */
export class CliError extends Error {
  constructor(
    message: string,
    readonly exitCode: number,
  ) {
    super(message);
    this.name = 'CliError';
  }
}

/** A usage error (exit 2). */
export function usageError(message: string): CliError {
  return new CliError(message, EXIT.USAGE);
}
