import { promises as fs } from 'node:fs';
import { join } from 'node:path';
import { decodeBan, decodeInboxMessage, decodeInflight, decodeMessage, decodeSession, type StorageReport } from '@bifro/spi';
import { ClassicLevel } from 'classic-level';
import { Level } from 'level';
import type { BatchOp } from './group-commit';
import { FORMAT_KEY, KEY_SPACE, concatKey, decodeKeyString, encodeKeyString, prefixEnd, readU64, u16Key } from './key-codec';
import { retainedBytes } from './retain-store';
import { recoveryFindings, recoveryLost, missingBatches, withShadow, type RecoveryReport } from './shadow';
import { prefixRange, type Db } from './store-context';
import { levelCount } from './topic-filter';
import { decodeInboxMeta, encodeInboxMeta, encodeRetainedIndexValue, encodeRetainedMeta } from './value-codec';
import { BATCHES_KEY, decodeBatches, Watermark } from './watermark';

/**
 * `offline`: the broker is stopped (`bifro storage repair`): data of a session without a record
 * is dropped. `online`: the running storage repairs itself: the broker still holds such a session
 * and writes its record again, so its data is kept.
 */
export type RepairMode = 'offline' | 'online';

/** The data format marker value (kept in sync with level-storage's FORMAT_VERSION). */
const FORMAT = Buffer.from('1');
/** Keys read per step of a scan, and operations per batch of fixes. */
const CHUNK = 1000;
const FIX_BATCH = 10_000;

/** A session's keys as the scan found them (`<tenant>\0<client>\0` latin1). */
interface SessionKeys {
  record: boolean;
  meta: { first: number; next: number } | undefined;
  entries: number;
  inRange: number;
  minSeq: number;
  maxSeq: number;
  below: Buffer[];
  inflight: number;
  incoming: number;
}

/** What a scan of the whole database found. */
export interface Analysis {
  /** An iterator met unreadable data (a damaged table block or a missing table file): the scan is incomplete. */
  readonly unreadable: string | undefined;
  readonly holds: Record<string, number>;
  readonly loses: Record<string, number>;
  readonly findings: string[];
  /** The writes that make the data consistent again (empty when it is). */
  readonly fixes: BatchOp[];
}

/**
 * Scans every key of the database and checks that the records fit together: each session's inbox
 * entries lie in the range its meta names (entries missing inside it are holes: messages lost),
 * every inbox, inflight record and inbound QoS 2 id belongs to a session record, every retained
 * message has its index entry and the tenant's totals count them, every value decodes. Returns
 * what it holds, what is lost, and the writes that make the data consistent (holes are left: the
 * inbox reads step over them).
 */
export async function analyze(db: Db, mode: RepairMode): Promise<Analysis> {
  const sessions = new Map<string, SessionKeys>();
  const session = (id: string): SessionKeys => {
    let s = sessions.get(id);
    if (s === undefined)
      sessions.set(
        id,
        (s = {
          record: false,
          meta: undefined,
          entries: 0,
          inRange: 0,
          minSeq: Infinity,
          maxSeq: 0,
          below: [],
          inflight: 0,
          incoming: 0,
        }),
      );
    return s;
  };
  const fixes: BatchOp[] = [];
  const loses: Record<string, number> = {};
  const findings: string[] = [];
  const lose = (what: string, n: number): void => {
    if (n > 0) loses[what] = (loses[what] ?? 0) + n;
  };
  let undecodable = 0;
  let bans = 0;
  try {
    // Session records and inbox metas first: the entries are judged against them.
    await scan(db, KEY_SPACE.session, (key, value) => {
      if (!decodes(() => decodeSession(value))) {
        undecodable++;
        fixes.push({ type: 'del', key });
        return;
      }
      session(key.toString('latin1', KEY_SPACE.session.length) + '\0').record = true;
    });
    await scan(db, KEY_SPACE.inboxMeta, (key, value) => {
      const id = key.toString('latin1', KEY_SPACE.inboxMeta.length) + '\0';
      if (value.length !== 16) {
        undecodable++;
        fixes.push({ type: 'del', key });
        return;
      }
      session(id).meta = decodeInboxMeta(value);
    });
    await scan(db, KEY_SPACE.inbox, (key, value) => {
      const id = key.toString('latin1', KEY_SPACE.inbox.length, key.length - 8);
      const s = session(id);
      if (!decodes(() => decodeInboxMessage(value))) {
        undecodable++;
        fixes.push({ type: 'del', key });
        return;
      }
      const seq = readU64(key, key.length - 8);
      s.entries++;
      s.minSeq = Math.min(s.minSeq, seq);
      s.maxSeq = Math.max(s.maxSeq, seq);
      if (s.meta !== undefined && seq < s.meta.first) s.below.push(key);
      else if (s.meta !== undefined && seq < s.meta.next) s.inRange++;
    });
    await scan(db, KEY_SPACE.inflight, (key, value) => {
      if (!decodes(() => decodeInflight(value))) {
        undecodable++;
        fixes.push({ type: 'del', key });
        return;
      }
      session(key.toString('latin1', KEY_SPACE.inflight.length, key.length - 10)).inflight++;
    });
    await scan(db, KEY_SPACE.incoming, (key) => {
      session(key.toString('latin1', KEY_SPACE.incoming.length, key.length - 2)).incoming++;
    });
    await scan(db, KEY_SPACE.ban, (key, value) => {
      if (decodes(() => decodeBan(value))) bans++;
      else {
        undecodable++;
        fixes.push({ type: 'del', key });
      }
    });
  } catch (err) {
    return { unreadable: describe(err), holds: {}, loses: {}, findings: [], fixes: [] };
  }

  let records = 0;
  let queued = 0;
  let inflight = 0;
  let incoming = 0;
  let orphans = 0;
  for (const [id, s] of sessions) {
    if (!s.record && mode === 'online') {
      // A running broker holds the session in memory and writes its record again at its next change.
      findings.push(`session ${printable(id)}: its record is missing (the broker writes it again at the session's next change)`);
      queued += s.inRange;
      continue;
    }
    if (!s.record) {
      // Data of a session whose record is gone: its subscriptions and expiry are unknown, and a new
      // session with its client id must not inherit its queue. Dropped.
      orphans++;
      lose('queued messages', s.entries);
      lose('in-flight messages', s.inflight);
      await deletePrefixes(db, id, fixes);
      continue;
    }
    records++;
    inflight += s.inflight;
    incoming += s.incoming;
    let meta = s.meta;
    if (meta === undefined && s.entries > 0) {
      meta = { first: s.minSeq, next: s.maxSeq + 1 };
      fixes.push({
        type: 'put',
        key: concatKey(KEY_SPACE.inboxMeta, Buffer.from(id.slice(0, -1), 'latin1')),
        value: encodeInboxMeta(meta),
      });
      findings.push(`session ${printable(id)}: inbox meta missing, rebuilt from its ${s.entries} entries`);
      s.inRange = s.entries;
    } else if (meta !== undefined && s.entries > 0 && s.maxSeq >= meta.next) {
      const beyond = s.entries - s.inRange - s.below.length;
      meta = { first: meta.first, next: s.maxSeq + 1 };
      s.inRange += beyond;
      fixes.push({
        type: 'put',
        key: concatKey(KEY_SPACE.inboxMeta, Buffer.from(id.slice(0, -1), 'latin1')),
        value: encodeInboxMeta(meta),
      });
      findings.push(`session ${printable(id)}: ${beyond} inbox entries past the end its meta names, meta extended`);
    }
    for (const key of s.below) fixes.push({ type: 'del', key });
    if (meta !== undefined) {
      const holes = meta.next - meta.first - s.inRange;
      if (holes > 0) {
        lose('queued messages', holes);
        findings.push(`session ${printable(id)}: ${holes} of its ${meta.next - meta.first} queued messages are missing`);
      }
    }
    queued += s.inRange;
  }
  if (orphans > 0) {
    lose('sessions', orphans);
    findings.push(`${orphans} sessions lost their record (their queues and in-flight messages are dropped)`);
  }

  let retained = 0;
  try {
    retained = await checkRetained(db, fixes, findings, lose);
  } catch (err) {
    return { unreadable: describe(err), holds: {}, loses: {}, findings: [], fixes: [] };
  }
  if (undecodable > 0) {
    lose('undecodable records', undecodable);
    findings.push(`${undecodable} records do not decode (damaged bytes LevelDB did not detect)`);
  }
  const [marker] = await db.getMany([FORMAT_KEY]);
  const holdsData = records + retained + bans + orphans > 0;
  if (marker === undefined && holdsData) {
    fixes.push({ type: 'put', key: FORMAT_KEY, value: FORMAT });
    findings.push('the format marker (meta!format) is missing');
  }
  return {
    unreadable: undefined,
    holds: {
      sessions: records,
      'queued messages': queued,
      'in-flight messages': inflight,
      'inbound QoS 2 ids': incoming,
      'retained messages': retained,
      bans,
    },
    loses,
    findings,
    fixes,
  };
}

/**
 * Retained messages against their index and totals: an index entry without its message is a lost
 * message, a message without its entry is re-indexed, and a tenant whose totals disagree gets them
 * rebuilt. Returns the number of retained messages.
 */
async function checkRetained(db: Db, fixes: BatchOp[], findings: string[], lose: (what: string, n: number) => void): Promise<number> {
  interface Totals {
    topics: number;
    bytes: number;
    levels: Map<number, number>;
    indexed: Set<string>;
    messages: Map<string, { bytes: number; expiresAt?: number }>;
    metaKey: Buffer;
    meta: Buffer | undefined;
  }
  const tenants = new Map<string, Totals>();
  const tenant = (t: string): Totals => {
    let x = tenants.get(t);
    if (x === undefined)
      tenants.set(
        t,
        (x = {
          topics: 0,
          bytes: 0,
          levels: new Map(),
          indexed: new Set(),
          messages: new Map(),
          metaKey: concatKey(KEY_SPACE.retainedMeta, encodeKeyString(t)),
          meta: undefined,
        }),
      );
    return x;
  };
  let count = 0;
  await scan(db, KEY_SPACE.retained, (key, value) => {
    const at = key.indexOf(0, KEY_SPACE.retained.length);
    const t = decodeKeyString(key, KEY_SPACE.retained.length, at);
    const topic = decodeKeyString(key, at + 1);
    let message;
    try {
      message = decodeMessage(value);
    } catch {
      lose('retained messages', 1);
      fixes.push({ type: 'del', key });
      return;
    }
    const x = tenant(t);
    x.messages.set(
      topic,
      message.expiresAt === undefined ? { bytes: retainedBytes(message) } : { bytes: retainedBytes(message), expiresAt: message.expiresAt },
    );
    x.topics++;
    x.bytes += retainedBytes(message);
    const levels = levelCount(topic);
    x.levels.set(levels, (x.levels.get(levels) ?? 0) + 1);
    count++;
  });
  let lostFromIndex = 0;
  await scan(db, KEY_SPACE.retainedIndex, (key) => {
    const at = key.indexOf(0, KEY_SPACE.retainedIndex.length);
    const t = decodeKeyString(key, KEY_SPACE.retainedIndex.length, at);
    const topic = decodeKeyString(key, at + 3);
    const x = tenant(t);
    if (x.messages.has(topic)) x.indexed.add(topic);
    else {
      lostFromIndex++;
      fixes.push({ type: 'del', key });
    }
  });
  await scan(db, KEY_SPACE.retainedMeta, (key, value) => {
    tenant(decodeKeyString(key, KEY_SPACE.retainedMeta.length)).meta = value;
  });
  for (const [t, x] of tenants) {
    const tenantPrefix = concatKey(KEY_SPACE.retainedIndex, encodeKeyString(t), Buffer.from([0]));
    let reindexed = 0;
    for (const [topic, m] of x.messages) {
      if (x.indexed.has(topic)) continue;
      reindexed++;
      fixes.push({
        type: 'put',
        key: concatKey(u16Key(tenantPrefix, levelCount(topic)), encodeKeyString(topic)),
        value: encodeRetainedIndexValue(m),
      });
    }
    const meta = encodeRetainedMeta({ topics: x.topics, bytes: x.bytes, levels: x.levels });
    if (x.topics === 0) {
      if (x.meta !== undefined) fixes.push({ type: 'del', key: x.metaKey });
    } else if (x.meta === undefined || !x.meta.equals(meta)) {
      fixes.push({ type: 'put', key: x.metaKey, value: meta });
      findings.push(`tenant ${JSON.stringify(t)}: retained totals rebuilt (${x.topics} messages)`);
    }
    if (reindexed > 0) findings.push(`tenant ${JSON.stringify(t)}: ${reindexed} retained messages re-indexed`);
  }
  if (lostFromIndex > 0) {
    lose('retained messages', lostFromIndex);
    findings.push(`${lostFromIndex} retained messages are missing (their index entries remain)`);
  }
  return count;
}

/** Calls `visit` for every entry whose key starts with `prefix` (throws when LevelDB cannot read a block). */
async function scan(db: Db, prefix: Buffer, visit: (key: Buffer, value: Buffer) => void): Promise<void> {
  const it = db.iterator(prefixRange(prefix));
  try {
    for (;;) {
      const entries = await it.nextv(CHUNK);
      if (entries.length === 0) return;
      for (const [key, value] of entries) visit(key, value);
    }
  } finally {
    await it.close();
  }
}

/** Deletes of every inbox, inbox meta, inflight and incoming key of the session `id`. */
async function deletePrefixes(db: Db, id: string, fixes: BatchOp[]): Promise<void> {
  const raw = Buffer.from(id, 'latin1');
  fixes.push({ type: 'del', key: concatKey(KEY_SPACE.inboxMeta, raw.subarray(0, raw.length - 1)) });
  for (const space of [KEY_SPACE.inbox, KEY_SPACE.inflight, KEY_SPACE.incoming]) {
    const prefix = concatKey(space, raw);
    const end = prefixEnd(prefix);
    for (const key of await db.keys(end === undefined ? { gte: prefix } : { gte: prefix, lt: end }).all()) fixes.push({ type: 'del', key });
  }
}

/** Writes `ops` in batches (a repair: fsync'ed). */
async function applyFixes(db: Db, ops: readonly BatchOp[]): Promise<void> {
  for (let i = 0; i < ops.length; i += FIX_BATCH) {
    const batch = db.batch();
    for (const op of ops.slice(i, i + FIX_BATCH)) {
      if (op.type === 'put') batch.put(op.key, op.value);
      else batch.del(op.key);
    }
    await batch.write({ sync: true });
  }
}

/** The outcome of {@link checkDatabase}. */
export interface CheckOutcome extends StorageReport {
  /** Whether LevelDB met unreadable table data (a repair rebuilds the tables). */
  readonly tablesDamaged: boolean;
  /** Whether the write-ahead log lost acknowledged writes at recovery. */
  readonly recoveryLost: boolean;
}

/**
 * Checks the database at `path` without changing it: LevelDB's recovery runs on a shadow, then the
 * whole shadow is scanned ({@link analyze}); when a block cannot be read, the shadow is repaired as
 * `repair` would and scanned again, so the report says what a repair keeps and loses.
 */
export async function checkDatabase(path: string): Promise<CheckOutcome> {
  const entries: string[] = await fs.readdir(path).catch((err: NodeJS.ErrnoException) => {
    if (err.code === 'ENOENT') return [];
    throw err;
  });
  if (!entries.includes('CURRENT'))
    return {
      location: path,
      healthy: true,
      findings: [`${path} holds no database yet`],
      holds: {},
      loses: {},
      tablesDamaged: false,
      recoveryLost: false,
    };
  let recovery: RecoveryReport | undefined;
  let analysis: Analysis | undefined;
  let repairedTables: string[] = [];
  await withShadow(path, async (db, report) => {
    recovery = report;
    analysis = await analyze(db, 'offline');
  });
  if (analysis!.unreadable !== undefined) {
    // Again on a shadow, repaired the way `repair` repairs: what it keeps and what it drops.
    const unreadable = analysis!.unreadable;
    await withShadow(path, async (db, _report, shadow) => {
      await db.close();
      repairedTables = await repairTables(shadow);
      await db.open();
      analysis = await analyze(db, 'offline');
    });
    analysis!.findings.unshift(`LevelDB cannot read all of the table files (${unreadable}): a repair drops their unreadable blocks`);
    for (const t of repairedTables) analysis!.findings.push(t);
  }
  const r = recovery!;
  const a = analysis!;
  const lost = recoveryLost(r);
  const loses = { ...a.loses };
  if (missingBatches(r) > 0) loses['write batches'] = missingBatches(r);
  if (r.droppedBytes > 0) loses['write-ahead log bytes'] = r.droppedBytes;
  const findings = [...recoveryFindings(r, path), ...a.findings];
  const healthy =
    !lost && repairedTables.length === 0 && a.unreadable === undefined && a.fixes.length === 0 && Object.keys(loses).length === 0;
  if (healthy) findings.push(`${path}: no damage found`);
  return {
    location: path,
    healthy,
    findings,
    holds: a.holds,
    loses,
    tablesDamaged: repairedTables.length > 0,
    recoveryLost: lost,
  };
}

/**
 * Repairs the database at `path` in place: LevelDB's repair when a table block cannot be read
 * (its damaged table files go to `lost/`), then LevelDB's recovery of the write-ahead log, then
 * the consistency fixes of {@link analyze}; finally the watermark file is set to what the
 * database holds, so it opens again. With `backup`, the directory is copied first.
 */
export async function repairDatabase(path: string, backup: boolean): Promise<CheckOutcome> {
  const before = await checkDatabase(path);
  const findings = [...before.findings];
  if (backup) {
    const copy = `${path}.before-repair-${new Date().toISOString().replace(/[:.]/g, '-')}`;
    await fs.cp(path, copy, { recursive: true, errorOnExist: true, force: false });
    findings.push(`a copy of the data as it was is in ${copy}`);
  }
  findings.push(...(await repairInPlace(path, 'offline')).done);
  return { ...before, healthy: true, findings };
}

/** What {@link repairInPlace} did and what it dropped. */
export interface RepairOutcome {
  readonly done: string[];
  readonly findings: string[];
  readonly loses: Record<string, number>;
}

/**
 * Rebuilds the tables (when unreadable), opens the database (LevelDB's recovery), applies the
 * consistency fixes and resets the watermark to what the database holds.
 */
export async function repairInPlace(path: string, mode: RepairMode): Promise<RepairOutcome> {
  const done: string[] = [];
  let db: Db = new Level<Buffer, Buffer>(path, { keyEncoding: 'buffer', valueEncoding: 'buffer' });
  await db.open({ createIfMissing: false });
  try {
    let analysis = await analyze(db, mode);
    if (analysis.unreadable !== undefined) {
      await db.close();
      done.push(...(await repairTables(path)));
      db = new Level<Buffer, Buffer>(path, { keyEncoding: 'buffer', valueEncoding: 'buffer' });
      await db.open({ createIfMissing: false });
      analysis = await analyze(db, mode);
      if (analysis.unreadable !== undefined) throw new Error(`${path} is still unreadable after LevelDB's repair: ${analysis.unreadable}`);
    }
    await applyFixes(db, analysis.fixes);
    if (analysis.fixes.length > 0) done.push(`${analysis.fixes.length} consistency fixes written`);
    const [batches] = await db.getMany([BATCHES_KEY]);
    new Watermark(path, decodeBatches(batches)).close();
    done.push(`the watermark now holds ${decodeBatches(batches)} write batches`);
    return { done, findings: analysis.findings, loses: analysis.loses };
  } finally {
    await db.close();
  }
}

/** LevelDB's repair of the database at `path` (closed); returns what it reported about damaged tables. */
async function repairTables(path: string): Promise<string[]> {
  await ClassicLevel.repair(path);
  const log = await fs.readFile(join(path, 'LOG'), 'utf8').catch(() => '');
  const lines = log
    .split('\n')
    .filter((l) => /Table #\d+: .*(repaired|Corruption|IO error)|Archiving/.test(l))
    .map((l) => l.replace(/^\S+ \S+ /, '').trim());
  return lines.length === 0 ? ['LevelDB rebuilt the table index'] : lines.map((l) => `LevelDB repair: ${l}`);
}

function decodes(decode: () => unknown): boolean {
  try {
    decode();
    return true;
  } catch {
    return false;
  }
}

/** A session id (`<tenant>\0<client>\0` latin1) as `tenant/client` for a report. */
function printable(id: string): string {
  const raw = Buffer.from(id, 'latin1');
  const at = raw.indexOf(0);
  return JSON.stringify(`${decodeKeyString(raw, 0, at)}/${decodeKeyString(raw, at + 1, raw.length - 1)}`);
}

function describe(err: unknown): string {
  return err instanceof Error ? err.message : String(err);
}
