import type { InboxAppendResult, InboxEntry, InboxLimit, InboxMessage, InboxStore } from '@bifro/spi';
import { locked, nothingToWrite, type BatchOp } from './group-commit';
import { prefixEnd, readU64, u64Key } from './key-codec';
import type { SessionState } from './session-states';
import { iteratorLimit, type Generation, type StoreContext } from './store-context';
import { ValueReader, ValueWriter, readInboxMessage, writeInboxMessage } from '@bifro/spi';
import { decodeInboxMeta, encodeInboxMeta, type InboxMeta } from './value-codec';

/** Most entries a read takes by key; a longer read is a range read. */
const MAX_POINT_READ = 1024;

/**
 * The inbox of each session: entries under `q!<tenant>\0<client>\0<seq>` (seq as 8 bytes
 * big-endian, so entries sort by seq) and a meta record `qm!<tenant>\0<client>` holding the seq
 * of the oldest entry and the seq the next append gets. Live entries are the range [first, next):
 * appends add at `next`, commits and drops remove from `first`. So count is `next − first` (O(1),
 * cached in memory), a commit knows the keys it deletes without reading, and seqs are never
 * reused, also across restarts, because `next` is stored in the same batch as the entries. Only
 * a repair of damaged table files leaves holes in the range (entries it could not read): reads
 * step over them.
 */
export class LevelInboxStore implements InboxStore {
  constructor(private readonly ctx: StoreContext) {}

  async append(tenantId: string, clientId: string, messages: readonly InboxMessage[], limit: InboxLimit): Promise<InboxAppendResult> {
    if (messages.length === 0) return { appended: 0, dropped: 0 };
    // Encode before taking the lock: the caller's buffers are copied now (copy-on-store).
    const writer = new ValueWriter(messages.length * (128 + messages[0].message.payload.byteLength));
    const ends: number[] = [];
    for (const m of messages) {
      writeInboxMessage(writer, m);
      ends.push(writer.length);
    }
    const encoded = writer.finish();
    const g = this.ctx.gen ?? (await this.ctx.opened());
    const state = g.sessions.get(tenantId, clientId);
    return locked(state.scope, async () => {
      const meta = state.inbox ?? (await this.loadMeta(g, state));
      const n = messages.length;
      const count = meta.next - meta.first;
      const maxSize = Math.max(0, limit.maxSize);
      let result: InboxAppendResult;
      let next: InboxMeta;
      let firstWritten: number; // index into messages of the first one stored
      if (!limit.dropOldest) {
        const appended = Math.min(n, Math.max(0, maxSize - count));
        if (appended === 0) return nothingToWrite({ appended: 0, dropped: n });
        result = { appended, dropped: n - appended };
        next = { first: meta.first, next: meta.next + appended };
        firstWritten = 0;
      } else {
        const kept = Math.min(maxSize, count + n);
        result = { appended: n, dropped: count + n - kept };
        next = { first: meta.next + n - kept, next: meta.next + n };
        firstWritten = Math.max(0, next.first - meta.next);
      }
      const ops: BatchOp[] = [];
      for (let seq = meta.first; seq < Math.min(next.first, meta.next); seq++)
        ops.push({ type: 'del', key: u64Key(state.inboxPrefix, seq) });
      const lastWritten = next.next - meta.next;
      for (let i = firstWritten; i < lastWritten; i++) {
        const value = encoded.subarray(i === 0 ? 0 : ends[i - 1], ends[i]);
        ops.push({ type: 'put', key: u64Key(state.inboxPrefix, meta.next + i), value });
      }
      ops.push({ type: 'put', key: state.inboxMetaKey, value: encodeInboxMeta(next) });
      state.inbox = next;
      return { value: result, written: g.group.write(ops, [state.scope]) };
    });
  }

  async read(tenantId: string, clientId: string, afterSeq: number, max: number): Promise<InboxEntry[]> {
    const limit = iteratorLimit(max);
    if (limit === 0) return [];
    const from = Math.max(1, Math.floor(afterSeq) + 1);
    if (!(from <= Number.MAX_SAFE_INTEGER)) return [];
    const g = this.ctx.gen ?? (await this.ctx.opened());
    const state = g.sessions.get(tenantId, clientId);
    try {
      const meta = state.inbox;
      if (meta !== undefined) {
        // The live entries are [first, next): their keys are known, so a point read (one call, no
        // iterator to set up and close) replaces the range read.
        const start = Math.max(from, meta.first);
        const end = limit < 0 ? meta.next : Math.min(meta.next, start + limit);
        if (start >= end) return [];
        if (end - start <= MAX_POINT_READ) return await this.readKnown(g, state, start, end);
      }
      const prefix = state.inboxPrefix;
      this.ctx.counters.sessionRangeReads++;
      const entries = await g.db.iterator({ gte: u64Key(prefix, from), lt: prefixEnd(prefix), limit }).all();
      return entries.map(([key, value]) => ({ ...readInboxMessage(new ValueReader(value)), seq: readU64(key, prefix.length) }));
    } catch (err) {
      throw this.ctx.readFailed(g, err);
    }
  }

  async commit(tenantId: string, clientId: string, uptoSeq: number): Promise<void> {
    const g = this.ctx.gen ?? (await this.ctx.opened());
    const state = g.sessions.get(tenantId, clientId);
    await locked(state.scope, async () => {
      const meta = state.inbox ?? (await this.loadMeta(g, state));
      if (!(uptoSeq >= meta.first) || meta.first === meta.next) return nothingToWrite(undefined);
      const first = Math.min(meta.next, Math.floor(uptoSeq) + 1);
      const ops: BatchOp[] = [];
      for (let seq = meta.first; seq < first; seq++) ops.push({ type: 'del', key: u64Key(state.inboxPrefix, seq) });
      const next = { first, next: meta.next };
      ops.push({ type: 'put', key: state.inboxMetaKey, value: encodeInboxMeta(next) });
      state.inbox = next;
      return { value: undefined, written: g.group.write(ops, [state.scope]) };
    });
  }

  async count(tenantId: string, clientId: string): Promise<number> {
    const g = this.ctx.gen ?? (await this.ctx.opened());
    const state = g.sessions.get(tenantId, clientId);
    const meta = state.inbox ?? (await state.scope.run(() => state.inbox ?? this.loadMeta(g, state)));
    return meta.next - meta.first;
  }

  /**
   * The entries [start, end) that are on disk, read from one snapshot (classic-level's getMany
   * takes one). Those before the first one found were committed (or dropped) meanwhile; a run of
   * missing ones at the end is appends not written yet (a session's appends are written in order);
   * a missing one followed by a present one is a hole left by a repair, stepped over.
   */
  private async readKnown(g: Generation, state: SessionState, start: number, end: number): Promise<InboxEntry[]> {
    const keys = new Array<Buffer>(end - start);
    for (let seq = start; seq < end; seq++) keys[seq - start] = u64Key(state.inboxPrefix, seq);
    const values = await g.db.getMany(keys);
    const entries: InboxEntry[] = [];
    for (let i = 0; i < values.length; i++) {
      const value = values[i];
      if (value !== undefined) entries.push({ ...readInboxMessage(new ValueReader(value)), seq: start + i });
    }
    return entries;
  }

  /** Loads the meta of a session's inbox into its state. Call under the session's lock. */
  private async loadMeta(g: Generation, state: SessionState): Promise<InboxMeta> {
    let value: Buffer | undefined;
    try {
      value = await g.db.get(state.inboxMetaKey);
    } catch (err) {
      throw this.ctx.readFailed(g, err);
    }
    const meta = value === undefined ? { first: 1, next: 1 } : decodeInboxMeta(value);
    state.inbox = meta;
    return meta;
  }
}
