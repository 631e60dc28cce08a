import { BifroError, describeError } from '../base/errors';
import { errorSpec as specOf } from './error-catalogue';
import { ConfigError } from '../runtime/config-errors';
import { UsageError } from './cli-errors';
import { EXIT, type CliIo } from './cli-io';

/** 2 for usage and configuration errors, 1 for everything else. */
export function exitCodeOf(err: unknown): number {
  if (err instanceof UsageError || err instanceof ConfigError) return EXIT.USAGE;
  if (err instanceof BifroError && err.code.startsWith('BIFRO_CONFIG_')) return EXIT.USAGE;
  return EXIT.FAILURE;
}

/**
 * Prints an error as `error CODE: message` lines (one per configuration problem) followed by the
 * catalogue's remedy, and returns the exit code. Only errors without a code (bugs) get a stack.
 */
export function reportError(err: unknown, io: CliIo): number {
  if (err instanceof ConfigError && err.issues.length > 1) {
    for (const issue of err.issues) io.err(`error ${issue.code}: ${issue.message}`);
    const codes = [...new Set(err.issues.map((i) => i.code))];
    for (const code of codes) {
      const spec = specOf(code);
      if (spec) io.err(`  hint (${code}): ${spec.remedy}`);
    }
    return exitCodeOf(err);
  }
  if (err instanceof BifroError) {
    io.err(`error ${err.message}`);
    const spec = specOf(err.code);
    if (spec && !(err instanceof UsageError)) io.err(`  hint: ${spec.remedy}`);
    if (err instanceof UsageError) io.err('Run `bifro --help` for usage.');
    return exitCodeOf(err);
  }
  io.err(`error: unexpected failure: ${describeError(err)}`);
  if (err instanceof Error && err.stack) io.err(err.stack);
  return EXIT.FAILURE;
}
