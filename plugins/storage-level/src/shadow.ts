import { promises as fs } from 'node:fs';
import { basename, dirname, join } from 'node:path';
import { Level } from 'level';
import { FORMAT_KEY } from './key-codec';
import type { Db } from './store-context';
import { BATCHES_KEY, decodeBatches, readWatermark, type WatermarkReading } from './watermark';

/** What LevelDB's recovery of a database did, as seen on a shadow of it. */
export interface RecoveryReport {
  /** Bytes of write-ahead log records LevelDB dropped as damaged (it says so in its LOG file only). */
  readonly droppedBytes: number;
  /** LevelDB's reasons for those drops (`checksum mismatch`, `bad record length`...), each once. */
  readonly dropReasons: readonly string[];
  /** The batch count the recovered database holds. */
  readonly batches: number;
  /** What the watermark file beside the database says was acknowledged. */
  readonly watermark: WatermarkReading;
  /** Whether the recovered database has the format marker. */
  readonly formatMarker: boolean;
}

/** Batches acknowledged before the crash that the recovered database lacks (0 when it can't tell). */
export function missingBatches(r: RecoveryReport): number {
  return r.watermark.kind === 'count' && r.watermark.count > r.batches ? r.watermark.count - r.batches : 0;
}

/** Whether the recovery lost acknowledged writes. */
export function recoveryLost(r: RecoveryReport): boolean {
  return r.droppedBytes > 0 || missingBatches(r) > 0;
}

/** The recovery findings, one sentence each. */
export function recoveryFindings(r: RecoveryReport, path: string): string[] {
  const out: string[] = [];
  if (r.droppedBytes > 0)
    out.push(
      `the write-ahead log of ${path} has ${r.droppedBytes} damaged bytes (${r.dropReasons.join('; ')}): LevelDB's recovery drops the records in them`,
    );
  const missing = missingBatches(r);
  if (missing > 0)
    out.push(
      `the recovered database holds ${r.batches} write batches but ${r.watermark.kind === 'count' ? r.watermark.count : '?'} were acknowledged: ` +
        `the last ${missing} are missing (the write-ahead log was truncated or lost)`,
    );
  if (r.watermark.kind === 'invalid') out.push(`the watermark file of ${path} is unreadable: lost write batches cannot be told`);
  return out;
}

/** LevelDB's own files that a shadow shares by hard link (never written in place once created). */
const TABLE = /\.(ldb|sst)$/;
/** Files a shadow leaves out: the lock, LevelDB's info logs (the shadow writes its own). */
const LEFT_OUT = new Set(['LOCK', 'LOG', 'LOG.old']);

/**
 * Runs `fn` on a shadow of the database at `path`: a sibling directory where the table files are
 * hard links (copies across file systems) and everything else (CURRENT, MANIFEST, write-ahead
 * logs, the watermark file) is copied, opened with LevelDB. LevelDB's recovery (which replays the
 * write-ahead log, drops what it cannot read, and deletes the log) then runs on the shadow, and
 * the database itself is left as it was. The shadow is removed afterwards.
 */
export async function withShadow<T>(path: string, fn: (db: Db, report: RecoveryReport, shadowPath: string) => Promise<T>): Promise<T> {
  const shadow = join(dirname(path), `.${basename(path)}.shadow-${process.pid}-${Date.now().toString(36)}`);
  await fs.mkdir(shadow, { mode: 0o700 });
  try {
    for (const entry of await fs.readdir(path, { withFileTypes: true })) {
      if (!entry.isFile() || LEFT_OUT.has(entry.name)) continue;
      const from = join(path, entry.name);
      const to = join(shadow, entry.name);
      if (TABLE.test(entry.name)) await fs.link(from, to).catch(() => fs.copyFile(from, to));
      else await fs.copyFile(from, to);
    }
    const db: Db = new Level<Buffer, Buffer>(shadow, { keyEncoding: 'buffer', valueEncoding: 'buffer' });
    await db.open({ createIfMissing: false });
    try {
      const [batches, marker] = await db.getMany([BATCHES_KEY, FORMAT_KEY]);
      const drops = droppedRecords(await fs.readFile(join(shadow, 'LOG'), 'utf8').catch(() => ''));
      const report: RecoveryReport = {
        droppedBytes: drops.bytes,
        dropReasons: drops.reasons,
        batches: decodeBatches(batches),
        watermark: await readWatermark(path),
        formatMarker: marker !== undefined,
      };
      return await fn(db, report, shadow);
    } finally {
      await db.close();
    }
  } finally {
    await fs.rm(shadow, { recursive: true, force: true });
  }
}

/**
 * The bytes LevelDB's recovery dropped, from its info LOG: with paranoid checks off (the only mode
 * classic-level offers) it skips damaged write-ahead log records and only logs
 * `<file>: dropping <n> bytes; <reason>`.
 */
export function droppedRecords(log: string): { bytes: number; reasons: string[] } {
  let bytes = 0;
  const reasons = new Set<string>();
  for (const line of log.split('\n')) {
    const m = /dropping (\d+) bytes; (.*)$/.exec(line);
    if (m === null) continue;
    bytes += Number(m[1]);
    reasons.add(m[2]!.trim());
  }
  return { bytes, reasons: [...reasons] };
}
