import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';

/** Temporary directories for real level databases, removed by {@link removeTempDirs}. */
const made: string[] = [];

/** A new empty directory under the OS temp dir; `sub` names a not yet existing folder inside it. */
export function tempDir(sub?: string): string {
  const dir = mkdtempSync(join(tmpdir(), 'bifro-level-'));
  made.push(dir);
  return sub === undefined ? dir : join(dir, sub);
}

/** Removes every directory {@link tempDir} made. */
export function removeTempDirs(): void {
  for (const dir of made.splice(0)) rmSync(dir, { recursive: true, force: true });
}
