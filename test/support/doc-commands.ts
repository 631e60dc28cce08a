import { spawn } from 'node:child_process';
import { readFileSync } from 'node:fs';

/**
 * The shell blocks of the docs that a reader is meant to run, and a runner for them
 * (test/e2e/57-doc-commands.test.ts).
 *
 * A block is runnable when its fence's info string is `sh runnable` (the commands manage what
 * they need themselves) or `sh runnable broker` (they need the broker of the quick start running,
 * with the admin API on and `TOKEN` set, as docs/api.md assumes). Renderers use the first word for
 * highlighting and show nothing of the rest, so the marking costs the reader nothing.
 */
export interface DocBlock {
  /** Path relative to the repository, for messages. */
  readonly file: string;
  /** 1-based line of the block's first command in the file. */
  readonly line: number;
  readonly script: string;
  readonly needsBroker: boolean;
}

const FENCE = /^```sh runnable( broker)?\s*$/;

/** Every runnable block of one markdown file, in order. */
export function runnableBlocks(absolute: string, file: string): DocBlock[] {
  const lines = readFileSync(absolute, 'utf8').split('\n');
  const blocks: DocBlock[] = [];
  for (let i = 0; i < lines.length; i++) {
    const open = FENCE.exec(lines[i]!);
    if (open === null) continue;
    const end = lines.indexOf('```', i + 1);
    if (end < 0) throw new Error(`${file}:${i + 1}: runnable block without its closing fence`);
    blocks.push({ file, line: i + 2, script: lines.slice(i + 1, end).join('\n'), needsBroker: open[1] !== undefined });
    i = end;
  }
  return blocks;
}

/** The ports the docs write, each replaced by a free one when a block runs (so runs never collide). */
export const DOC_PORTS = [1883, 1884, 1885, 8091] as const;

/** Replaces each port of {@link DOC_PORTS} written as a number of its own with its free counterpart. */
export function withPorts(script: string, ports: ReadonlyMap<number, number>): string {
  return script.replace(/\b(1883|1884|1885|8091)\b/g, (p) => String(ports.get(Number(p)) ?? p));
}

export interface BlockResult {
  readonly ok: boolean;
  /** Doc line of the command that failed or ran out of time. */
  readonly failedLine?: number;
  readonly reason?: string;
  readonly output: string;
}

/**
 * Prefixed to every block, all on the first line so that bash's LINENO is the block's line + 1:
 * stop at the first failing command (of a pipeline too), trace each command's line on fd 3 (the
 * runner's per-command clock) and report the failing line there. curl gets --fail-with-body, the
 * one rewrite of a command: without it a 401 or 404 would pass.
 */
const PRELUDE = [
  'set -eo pipefail',
  'trap \'echo "failed $LINENO $?" >&3\' ERR',
  'curl() { command curl --fail-with-body -sS "$@"; }',
  "BASH_XTRACEFD=3; PS4='+$LINENO '; set -x",
].join('; ');

/**
 * Runs one block with bash in `cwd`. Each command has `perCommandMs` from the moment bash starts
 * it; past that the block's process group is killed and the command's line reported.
 */
export function runBlock(block: DocBlock, script: string, cwd: string, env: NodeJS.ProcessEnv, perCommandMs: number): Promise<BlockResult> {
  return new Promise((resolve) => {
    const child = spawn('bash', ['-c', `${PRELUDE}\n${script}\n`], {
      cwd,
      env,
      detached: true,
      stdio: ['ignore', 'pipe', 'pipe', 'pipe'],
    });
    let output = '';
    let current = block.line;
    let failedLine: number | undefined;
    let reason: string | undefined;
    const docLine = (lineno: number): number => block.line + lineno - 2;
    const killGroup = (): void => {
      try {
        process.kill(-child.pid!, 'SIGKILL');
      } catch {
        // already gone
      }
    };
    let timer = setTimeout(onTimeout, perCommandMs);
    function onTimeout(): void {
      failedLine = current;
      reason = `no end within ${perCommandMs} ms`;
      killGroup();
    }
    child.stdout!.on('data', (d: Buffer) => (output += d.toString()));
    child.stderr!.on('data', (d: Buffer) => (output += d.toString()));
    (child.stdio[3] as NodeJS.ReadableStream).on('data', (d: Buffer) => {
      for (const line of d.toString().split('\n')) {
        const traced = /^\+(\d+) /.exec(line);
        // Line 1 is the prelude: a command of its curl function is the block's curl line's.
        if (traced !== null && Number(traced[1]) > 1) {
          // A new command of the block (not of a command substitution, traced `++`): its own clock.
          current = docLine(Number(traced[1]));
          clearTimeout(timer);
          timer = setTimeout(onTimeout, perCommandMs);
        }
        const failed = /^failed (\d+) (\d+)/.exec(line);
        if (failed !== null && failedLine === undefined) {
          failedLine = Number(failed[1]) > 1 ? docLine(Number(failed[1])) : current;
          reason = `exit code ${failed[2]}`;
        }
      }
    });
    child.once('close', (code, signal) => {
      clearTimeout(timer);
      // Whatever the block left in the background (a subscriber, a pipe) goes with it.
      killGroup();
      const ok = code === 0 && failedLine === undefined;
      resolve({
        ok,
        ...(ok ? {} : { failedLine: failedLine ?? current, reason: reason ?? `bash ended with ${code ?? signal}` }),
        output,
      });
    });
  });
}
