/** What a command needs from its surroundings; main.ts passes the real process, tests their own. */
export interface CliIo {
  /** Writes a line (or lines) to standard output. */
  out(text: string): void;
  /** Writes a line (or lines) to standard error. */
  err(text: string): void;
  readonly cwd: string;
  readonly env: NodeJS.ProcessEnv;
}

/** Exit codes of `bifro`. */
export const EXIT = {
  OK: 0,
  /** Runtime failure: a required plugin failed, a port is in use, the broker would not stop... */
  FAILURE: 1,
  /** Usage or configuration error. */
  USAGE: 2,
  /** `bifro status`: the broker is not running. */
  NOT_RUNNING: 3,
} as const;
