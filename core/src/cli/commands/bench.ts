import { existsSync } from 'node:fs';
import { createRequire } from 'node:module';
import path from 'node:path';
import { UsageError } from '../cli-errors';
import { EXIT, type CliIo } from '../cli-io';

/**
 * What core/bench/dist/cli.js exports. The load generator is its own TypeScript project
 * (core/bench, built by `npm run build`), loaded at run time so the broker never loads it.
 */
interface BenchModule {
  benchMain(
    argv: readonly string[],
    io: { out(text: string): void; err(text: string): void; readonly stderrIsTTY: boolean },
  ): Promise<number>;
  benchUsage(): string;
}

/** core/dist/cli/commands (or core/src/cli/commands) → core/bench/dist/cli.js. */
export const BENCH_MODULE = path.resolve(__dirname, '..', '..', '..', 'bench', 'dist', 'cli.js');

function loadBench(io: CliIo): BenchModule | null {
  if (!existsSync(BENCH_MODULE)) {
    io.err(`error: the load generator is not built (${BENCH_MODULE} is missing): run \`npm run build\``);
    return null;
  }
  return createRequire(__filename)(BENCH_MODULE) as BenchModule;
}

/** `bifro help bench`. */
export function benchUsage(io: CliIo): string {
  return loadBench(io)?.benchUsage() ?? 'Usage: bifro bench <scenario> [options] (the load generator is not built: npm run build)';
}

/** `bifro bench <scenario> [options]`: the load generator against any MQTT broker. */
export async function benchCommand(argv: readonly string[], io: CliIo): Promise<number> {
  const bench = loadBench(io);
  if (bench === null) return EXIT.FAILURE;
  try {
    return await bench.benchMain(argv, { out: io.out, err: io.err, stderrIsTTY: process.stderr.isTTY === true });
  } catch (err) {
    if (err instanceof Error && err.name === 'BenchUsageError') throw new UsageError(`bifro bench: ${err.message}`);
    throw err;
  }
}
