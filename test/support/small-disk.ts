import { execFileSync } from 'node:child_process';
import { closeSync, mkdtempSync, openSync, rmSync, unlinkSync, writeSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';

/** A small file system of its own (tmpfs), to run a broker's storage out of space and give it back. */
export interface SmallDisk {
  /** Where it is mounted. */
  readonly dir: string;
  /** Fill every free byte with a filler file (writes then fail with ENOSPC). */
  fill(): void;
  /** Delete the filler file. */
  free(): void;
  /** Unmount and remove the mount point (at the end of the test). */
  unmount(): void;
}

/**
 * Mounts a tmpfs of `megabytes` on a new temp directory. Needs root (`.ci/run` runs as root, as
 * the Debian packages it installs need): the error says so when the mount is refused.
 */
export function mountSmallDisk(megabytes: number): SmallDisk {
  const dir = mkdtempSync(path.join(os.tmpdir(), 'bifro-small-disk-'));
  try {
    execFileSync('mount', ['-t', 'tmpfs', '-o', `size=${megabytes}m,mode=0700`, 'tmpfs', dir], { stdio: 'pipe' });
  } catch (err) {
    rmSync(dir, { recursive: true, force: true });
    const detail = (err as { stderr?: Buffer }).stderr?.toString().trim() ?? String(err);
    throw new Error(
      `cannot mount a ${megabytes} MB tmpfs on ${dir} to run storage out of space (it needs root, as .ci/run has): ${detail}`,
    );
  }
  const filler = path.join(dir, 'filler');
  return {
    dir,
    fill() {
      const fd = openSync(filler, 'a');
      const chunk = Buffer.alloc(64 * 1024, 0x5a);
      try {
        for (;;) {
          let size = chunk.length;
          // Down to single bytes, so not even a partial page is left.
          for (;;) {
            try {
              writeSync(fd, chunk, 0, size);
              break;
            } catch (err) {
              if ((err as NodeJS.ErrnoException).code !== 'ENOSPC') throw err;
              if (size === 1) return;
              size = Math.max(1, size >> 1);
            }
          }
        }
      } finally {
        closeSync(fd);
      }
    },
    free() {
      unlinkSync(filler);
    },
    unmount() {
      try {
        execFileSync('umount', [dir], { stdio: 'pipe' });
      } catch {
        execFileSync('umount', ['-l', dir], { stdio: 'pipe' });
      }
      rmSync(dir, { recursive: true, force: true });
    },
  };
}
