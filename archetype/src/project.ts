import { existsSync, readdirSync, statSync } from 'node:fs';
import path from 'node:path';
import type { PluginKind } from '@bifro/spi';
import { CliError, EXIT } from './cli-error';
import { describeKinds } from './kinds';

/** The answers a project is generated from (prompted, or taken from flags and defaults). */
export interface PluginAnswers {
  /** Absolute path of the target directory. */
  readonly directory: string;
  readonly name: string;
  readonly kinds: readonly PluginKind[];
  readonly description: string;
}

/** The description proposed for the chosen kinds. */
export function defaultDescription(kinds: readonly string[]): string {
  return kinds.length === 0 ? 'A Bifro plugin' : `A Bifro ${describeKinds(kinds)} plugin`;
}

/**
 * Why the project cannot be written to `dir`, or undefined when it can: a file is in the way,
 * or (without `force`) the directory holds something already.
 */
export function targetProblem(dir: string, force: boolean): string | undefined {
  if (!existsSync(dir)) return undefined;
  if (!statSync(dir).isDirectory()) return `${dir} exists and is not a directory`;
  if (force) return undefined;
  const entries = readdirSync(dir);
  if (entries.length === 0) return undefined;
  return `directory ${dir} exists and is not empty (${entries.length} entr${entries.length === 1 ? 'y' : 'ies'}); choose another directory, or pass --force to write into it (through npm create: after --)`;
}

/** Throws the {@link targetProblem} of `dir` as a failure (exit 1). */
export function checkTarget(dir: string, force: boolean): void {
  const problem = targetProblem(dir, force);
  if (problem !== undefined) throw new CliError(problem, EXIT.FAILED);
}

/** `dir` as the user would type it from `cwd`: relative when inside it, else absolute. */
export function displayPath(dir: string, cwd: string): string {
  const rel = path.relative(cwd, dir);
  if (rel === '') return '.';
  return rel.startsWith('..') || path.isAbsolute(rel) ? dir : rel;
}
