import { promises as fs } from 'node:fs';
import path from 'node:path';
import type { Logger } from '../base/logger';
import { describeError } from '../base/errors';

/**
 * Secure defaults (docs/security.md § Secure defaults): loopback-only listeners while the dev-only
 * allow-all auth is in use, no client PUBLISH to `$`-topics, a private data directory.
 */

/** Whether a listener host only accepts connections from this machine. Host names other than `localhost` count as public. */
export function isLoopbackHost(host: string): boolean {
  const h = host.toLowerCase().replace(/^\[|\]$/g, '');
  if (h === 'localhost' || h === '::1' || h === '0:0:0:0:0:0:0:1') return true;
  const v4 = h.startsWith('::ffff:') ? h.slice(7) : h;
  return /^127\.\d{1,3}\.\d{1,3}\.\d{1,3}$/.test(v4);
}

/**
 * Topics a client may not publish to (nor may a will): `$SYS` and below, what the broker reports,
 * and `$share/` / `$oshare/`, which mean a shared subscription and exist only in subscriptions.
 * Refused as an ACL denial is: v5 PUBACK/PUBREC 0x87, v3 acknowledged and dropped. Other `$`
 * topics stay usable (only wildcard filters skip them [MQTT-4.7.2-1]), as in mosquitto.
 */
export function isReservedTopic(topic: string): boolean {
  if (topic.charCodeAt(0) !== 0x24) return false; // '$'
  return topic === '$SYS' || topic.startsWith('$SYS/') || topic.startsWith('$share/') || topic.startsWith('$oshare/');
}

/** Mode of the data directory and of the directories under it. */
export const DATA_DIR_MODE = 0o700;
/** Mode of the files under the data directory. */
export const DATA_FILE_MODE = 0o600;
/** The umask `bifro start` runs with: files 0600, directories 0700. */
export const BROKER_UMASK = 0o077;
/** How deep {@link secureDataDir} looks under the data directory (worker dirs / plugin dir / files). */
const MAX_DEPTH = 4;

/**
 * Creates the data directory with mode 0700 and takes group and other permissions off it and off
 * what is under it (files 0600, directories 0700), a few levels deep. A directory the process
 * does not own, or a sticky one (such as /tmp), is left alone with a warning. Returns how many
 * entries were changed (logged at info when any).
 */
export async function secureDataDir(dataDir: string, logger: Logger): Promise<number> {
  await fs.mkdir(dataDir, { recursive: true, mode: DATA_DIR_MODE });
  const stat = await fs.stat(dataDir);
  const uid = typeof process.getuid === 'function' ? process.getuid() : undefined;
  if ((uid !== undefined && stat.uid !== uid) || (stat.mode & 0o1000) !== 0) {
    logger.warn(
      { dataDir, mode: (stat.mode & 0o7777).toString(8) },
      `data directory ${dataDir} is shared (sticky, or owned by another user): its permissions are left as they are; give the broker a directory of its own`,
    );
    return 0;
  }
  let changed = 0;
  /** Group and other bits off; the owner's stay (0644 → 0600, 0755 → 0700). */
  const tighten = async (entry: string, mode: number): Promise<void> => {
    if ((mode & 0o077) === 0) return;
    try {
      await fs.chmod(entry, mode & 0o7700);
      changed++;
    } catch (err) {
      logger.warn({ file: entry, err: describeError(err) }, `cannot restrict the permissions of ${entry}`);
    }
  };
  await tighten(dataDir, stat.mode);
  const walk = async (dir: string, depth: number): Promise<void> => {
    if (depth > MAX_DEPTH) return;
    let names: string[];
    try {
      names = await fs.readdir(dir);
    } catch {
      return;
    }
    for (const name of names) {
      const entry = path.join(dir, name);
      let s;
      try {
        s = await fs.lstat(entry);
      } catch {
        continue;
      }
      if (s.isSymbolicLink()) continue;
      if (s.isDirectory()) {
        await tighten(entry, s.mode);
        await walk(entry, depth + 1);
      } else if (s.isFile()) await tighten(entry, s.mode);
    }
  };
  await walk(dataDir, 1);
  if (changed > 0)
    logger.info({ dataDir, changed }, `data directory ${dataDir}: group and other permissions removed from ${changed} entries`);
  return changed;
}
