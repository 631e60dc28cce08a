import { closeSync, fsync, fsyncSync, openSync, promises as fs, writeSync } from 'node:fs';
import { join } from 'node:path';
import { crc32 } from 'node:zlib';

/**
 * The batch watermark (docs/storage.md § Recovery checks). Every batch the storage writes also puts
 * the number of batches written so far under {@link BATCHES_KEY}; once a batch is on disk, the same
 * number is written to the file {@link WATERMARK_FILE} beside the database. After a crash the
 * database's number must be at least the file's: a smaller one means LevelDB recovered less than
 * was acknowledged (a truncated or damaged write-ahead log), which LevelDB itself does not report.
 *
 * The file is written in place (16 bytes: magic, count, CRC-32) without an fsync per batch: a
 * process crash keeps it (the page cache survives), and after a power loss it can only be older
 * than the database, never newer, when the database syncs its writes. It is fsync'ed every
 * {@link FLUSH_MS} when it changed, and at close.
 */
export const WATERMARK_FILE = 'BIFRO-BATCHES';

/** The database key holding the number of batches written (8 bytes big-endian). */
export const BATCHES_KEY = Buffer.from('meta!batches', 'latin1');

const MAGIC = 0x42465731; // "BFW1"
const SIZE = 16;
const FLUSH_MS = 1000;

/** What the watermark file says: a count, absent (no file), or unreadable (torn or foreign bytes). */
export type WatermarkReading =
  { readonly kind: 'count'; readonly count: number } | { readonly kind: 'absent' } | { readonly kind: 'invalid' };

export function encodeWatermark(count: number, out: Buffer = Buffer.allocUnsafe(SIZE)): Buffer {
  out.writeUInt32BE(MAGIC, 0);
  out.writeUInt32BE(Math.floor(count / 0x1_0000_0000), 4);
  out.writeUInt32BE(count >>> 0, 8);
  out.writeUInt32BE(crc32(out.subarray(0, 12)), 12);
  return out;
}

/** Reads the watermark file of the database at `path`. */
export async function readWatermark(path: string): Promise<WatermarkReading> {
  let bytes: Buffer;
  try {
    bytes = await fs.readFile(join(path, WATERMARK_FILE));
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code === 'ENOENT') return { kind: 'absent' };
    throw err;
  }
  if (bytes.length < SIZE || bytes.readUInt32BE(0) !== MAGIC || bytes.readUInt32BE(12) !== crc32(bytes.subarray(0, 12)))
    return { kind: 'invalid' };
  return { kind: 'count', count: bytes.readUInt32BE(4) * 0x1_0000_0000 + bytes.readUInt32BE(8) };
}

/** Reads a batch count value of the database (absent: 0, a database from before the watermark). */
export function decodeBatches(value: Buffer | undefined): number {
  if (value === undefined || value.length !== 8) return 0;
  return value.readUInt32BE(0) * 0x1_0000_0000 + value.readUInt32BE(4);
}

export function encodeBatches(count: number): Buffer {
  const out = Buffer.allocUnsafe(8);
  out.writeUInt32BE(Math.floor(count / 0x1_0000_0000), 0);
  out.writeUInt32BE(count >>> 0, 4);
  return out;
}

/** The open watermark file of a running storage. */
export class Watermark {
  private readonly fd: number;
  private readonly buffer = Buffer.allocUnsafe(SIZE);
  private dirty = false;
  private flushing = false;
  private readonly timer: NodeJS.Timeout;

  /** Opens (creating) the file at `path` and writes `count` into it. */
  constructor(path: string, count: number) {
    this.fd = openSync(join(path, WATERMARK_FILE), 'w', 0o600);
    this.record(count);
    fsyncSync(this.fd);
    this.dirty = false;
    this.timer = setInterval(() => this.flush(), FLUSH_MS);
    this.timer.unref();
  }

  /** Batches up to `count` are on disk. */
  record(count: number): void {
    writeSync(this.fd, encodeWatermark(count, this.buffer), 0, SIZE, 0);
    this.dirty = true;
  }

  private flush(): void {
    if (!this.dirty || this.flushing) return;
    this.dirty = false;
    this.flushing = true;
    fsync(this.fd, () => {
      this.flushing = false;
    });
  }

  close(): void {
    clearInterval(this.timer);
    try {
      if (this.dirty) fsyncSync(this.fd);
    } finally {
      closeSync(this.fd);
    }
  }
}
