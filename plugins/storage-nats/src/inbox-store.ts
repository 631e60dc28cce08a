import { randomBytes } from 'node:crypto';
import type { InboxAppendResult, InboxEntry, InboxLimit, InboxMessage, InboxStore, PluginLogger } from '@bifro/spi';
import { headersOf, WriteConflict, type JetStreamLink, type ReadMsg } from './jetstream-link';
import { asBuffer, type StoreContext } from './store-context';
import { readInboxMessage, ValueReader, ValueWriter, writeInboxMessage } from '@bifro/spi';

/**
 * Inboxes on stream `<PREFIX>_INBOX_<p>`, one subject per session. Every message on a session's
 * subject is a chunk of consecutive entries (one or more appends) or a marker, and carries in
 * its headers the inbox state after it: `Bifro-Next` (the seq the next entry gets) and
 * `Bifro-Head` (the oldest live seq). So the last message of the subject alone tells the state:
 * `count` is next − head, read from the stream leader, without a scan; and seqs grow by one per
 * entry, per session, whatever else shares the stream.
 *
 * Every write of a session's state is a compare-and-set: it is published with the stream
 * sequence of the subject's last message as the expected last subject sequence, so two writers
 * (a node taking a session over while the old one still writes) cannot hand out a seq twice;
 * the loser reads the state again and retries. Writes of one session are queued here and what
 * queued up while one was in flight goes out as the next chunk (group commit per session);
 * writes of different sessions go out pipelined. Commits and drops move the head (a marker, or
 * the next chunk's headers); messages wholly behind the head are then deleted from the stream
 * one by one, not purged (see cleanUp).
 */

const H_KIND = 'Bifro-Kind';
const H_FIRST = 'Bifro-First';
const H_NEXT = 'Bifro-Next';
const H_HEAD = 'Bifro-Head';
/** Id of the write that produced a message: tells an unanswered attempt that landed from one that did not. */
const H_WRITE = 'Bifro-Write';
/** This process's part of write ids. */
const WRITER = randomBytes(6).toString('hex');

/** Most entries and bytes of one chunk (the server's default max payload is 1 MiB). */
const CHUNK_MAX_ENTRIES = 1000;
const CHUNK_MAX_BYTES = 512 * 1024;
/** Sessions whose state is cached (the last message's stream sequence and headers). */
const CACHED_STATES = 10_000;
/** Most dead messages one clean-up looks at; the next clean-up goes on. */
const GC_MAX_STEPS = 1000;

interface InboxState {
  /** Seq the next entry gets. */
  readonly next: number;
  /** Oldest live seq (next when empty). */
  readonly head: number;
  /** Stream sequence of the subject's last message; 0 when it has none. */
  readonly last: number;
}

const EMPTY: InboxState = { next: 1, head: 1, last: 0 };

type WriteJob =
  | {
      readonly kind: 'append';
      readonly entries: readonly Buffer[];
      readonly bytes: number;
      readonly limit: InboxLimit;
      readonly resolve: (r: InboxAppendResult) => void;
      readonly reject: (err: unknown) => void;
    }
  | { readonly kind: 'commit'; readonly upto: number; readonly resolve: () => void; readonly reject: (err: unknown) => void };

type Job = WriteJob | { readonly kind: 'clear'; readonly resolve: () => void; readonly reject: (err: unknown) => void };

interface Lane {
  readonly stream: string;
  readonly subject: string;
  readonly jobs: Job[];
}

function num(m: ReadMsg, header: string): number {
  return Number(m.headers?.get(header) ?? NaN);
}

function stateOf(m: ReadMsg | undefined): InboxState {
  if (m === undefined) return EMPTY;
  const next = num(m, H_NEXT);
  const head = num(m, H_HEAD);
  if (!Number.isSafeInteger(next) || !Number.isSafeInteger(head))
    throw new Error(`inbox message ${m.seq} on ${m.subject} has no state headers`);
  return { next, head, last: m.seq };
}

function encodeEntry(m: InboxMessage): Buffer {
  const w = new ValueWriter(96 + m.message.topic.length + m.message.payload.byteLength);
  writeInboxMessage(w, m);
  return w.finish();
}

export class NatsInboxStore implements InboxStore {
  private readonly lanes = new Map<string, Lane>();
  /** Per session: the state after this process's last write. Only a starting guess for the next compare-and-set, so a stale one costs a retry, never a wrong seq. */
  private readonly states = new Map<string, InboxState>();
  private readonly cleanups = new Set<Promise<void>>();
  private writes = 0;

  constructor(
    private readonly ctx: StoreContext,
    private readonly logger?: PluginLogger,
  ) {}

  private where(tenantId: string, clientId: string): { stream: string; subject: string } {
    const layout = this.ctx.layout;
    const p = layout.sessionPartition(tenantId, clientId);
    return { stream: layout.inboxStream(p), subject: layout.inboxSubject(p, tenantId, clientId) };
  }

  append(tenantId: string, clientId: string, messages: readonly InboxMessage[], limit: InboxLimit): Promise<InboxAppendResult> {
    // Encoded now: the caller may reuse its buffers once this returns.
    const entries = messages.map(encodeEntry);
    const bytes = entries.reduce((n, e) => n + e.byteLength, 0);
    return this.ctx.call(
      `inbox append (${tenantId}/${clientId}, ${messages.length} messages)`,
      (link) =>
        new Promise<InboxAppendResult>((resolve, reject) =>
          this.enqueue(link, tenantId, clientId, { kind: 'append', entries, bytes, limit: { ...limit }, resolve, reject }),
        ),
    );
  }

  commit(tenantId: string, clientId: string, uptoSeq: number): Promise<void> {
    return this.ctx.call(
      `inbox commit (${tenantId}/${clientId} up to ${uptoSeq})`,
      (link) =>
        new Promise<void>((resolve, reject) => this.enqueue(link, tenantId, clientId, { kind: 'commit', upto: uptoSeq, resolve, reject })),
    );
  }

  count(tenantId: string, clientId: string): Promise<number> {
    const { stream, subject } = this.where(tenantId, clientId);
    return this.ctx.call(`inbox count (${tenantId}/${clientId})`, async (link) => {
      const s = stateOf(await link.last(stream, subject));
      return s.next - s.head;
    });
  }

  read(tenantId: string, clientId: string, afterSeq: number, max: number): Promise<InboxEntry[]> {
    const { stream, subject } = this.where(tenantId, clientId);
    return this.ctx.call(`inbox read (${tenantId}/${clientId} after ${afterSeq})`, async (link) => {
      if (max <= 0) return [];
      const state = stateOf(await link.last(stream, subject));
      const from = Math.max(afterSeq + 1, state.head);
      if (from >= state.next) return [];
      const out: InboxEntry[] = [];
      // The seq the next chunk must start at (or before): chunks hold consecutive seqs from Head on.
      let expected = from;
      let missing: [number, number] | undefined;
      await link.scan(stream, subject, {}, (m) => {
        // Written after the state this read started from: so is every later message. Without
        // this stop, appends arriving as fast as the scan reads kept it going for seconds.
        if (m.seq > state.last) return false;
        if (m.headers?.get(H_KIND) !== 'c') return true;
        const first = num(m, H_FIRST);
        if (num(m, H_NEXT) <= from) return true;
        if (first > expected) missing ??= [expected, first - 1];
        expected = Math.max(expected, num(m, H_NEXT));
        const r = new ValueReader(asBuffer(m.data));
        const n = r.varint();
        for (let i = 0; i < n; i++) {
          const entry = readInboxMessage(r);
          const seq = first + i;
          if (seq >= from && seq < state.next) {
            out.push({ ...entry, seq });
            if (out.length >= max) return false;
          }
        }
        return true;
      });
      if (out.length < max && expected < state.next) missing ??= [expected, state.next - 1];
      // Dropped meanwhile (an append with dropOldest moved Head, its clean-up ran) is no loss.
      if (missing !== undefined && stateOf(await link.last(stream, subject)).head <= missing[1]) this.reportMissing(subject, missing);
      return out;
    });
  }

  /**
   * Removes a session's inbox (session delete). Queued behind the session's writes: an append the
   * ended session issued and still in flight would otherwise land after the purge (its
   * compare-and-set retried on the emptied subject) and hand the next session its messages.
   */
  clear(tenantId: string, clientId: string): Promise<void> {
    const link = this.ctx.link;
    if (link === undefined) return Promise.resolve();
    return new Promise<void>((resolve, reject) => this.enqueue(link, tenantId, clientId, { kind: 'clear', resolve, reject }));
  }

  /** Waits for the clean-ups still running (close). */
  async settle(): Promise<void> {
    await Promise.allSettled([...this.cleanups]);
  }

  private enqueue(link: JetStreamLink, tenantId: string, clientId: string, job: Job): void {
    const { stream, subject } = this.where(tenantId, clientId);
    const lane = this.lanes.get(subject);
    if (lane !== undefined) {
      lane.jobs.push(job);
      return;
    }
    const fresh: Lane = { stream, subject, jobs: [job] };
    this.lanes.set(subject, fresh);
    void this.drain(link, fresh);
  }

  /** Writes a lane's jobs, a window at a time, until none is left. */
  private async drain(link: JetStreamLink, lane: Lane): Promise<void> {
    while (lane.jobs.length > 0) {
      const first = lane.jobs[0]!;
      if (first.kind === 'clear') {
        lane.jobs.shift();
        this.states.delete(lane.subject);
        try {
          // Still one purge, unlike the clean-up: a node cut off from NATS sends it when the link
          // heals, before a new owner reads, where a listing and its deletes would come too late
          // (the session's next owner would read the ended session's entries). Replayed by
          // nats-server before 2.9.18 after a restart of every server, it empties the partition's
          // stream up to it (docs/storage-nats.md § Failure behaviour).
          await link.purge(lane.stream, lane.subject);
          first.resolve();
        } catch (err) {
          first.reject(err);
        }
        continue;
      }
      const window: WriteJob[] = [];
      let bytes = 0;
      let entries = 0;
      for (let j = lane.jobs[0]; j !== undefined && j.kind !== 'clear'; j = lane.jobs[0]) {
        const jb = j.kind === 'append' ? j.bytes : 0;
        const je = j.kind === 'append' ? j.entries.length : 0;
        if (window.length > 0 && (bytes + jb > CHUNK_MAX_BYTES || entries + je > CHUNK_MAX_ENTRIES)) break;
        window.push(j);
        lane.jobs.shift();
        bytes += jb;
        entries += je;
      }
      try {
        await this.write(link, lane, window);
      } catch (err) {
        for (const j of window) j.reject(err);
      }
    }
    this.lanes.delete(lane.subject);
  }

  private async write(link: JetStreamLink, lane: Lane, window: readonly WriteJob[]): Promise<void> {
    const { stream, subject } = lane;
    for (let attempt = 1; ; attempt++) {
      const base = this.states.get(subject) ?? stateOf(await link.last(stream, subject));
      let next = base.next;
      let head = base.head;
      const chunk: Array<{ seq: number; data: Buffer }> = [];
      const results: Array<InboxAppendResult | undefined> = [];
      for (const job of window) {
        if (job.kind === 'commit') {
          head = Math.min(Math.max(head, job.upto + 1), next);
          results.push(undefined);
          continue;
        }
        const m = job.entries.length;
        const count = next - head;
        if (job.limit.dropOldest) {
          // Every message counts as appended; the oldest entries (old ones first, then the batch's own) make room.
          const excess = Math.max(0, count + m - job.limit.maxSize);
          const fromOld = Math.min(excess, count);
          head += fromOld;
          for (let i = excess - fromOld; i < m; i++) chunk.push({ seq: next++, data: job.entries[i] });
          results.push({ appended: m, dropped: excess });
        } else {
          // The first messages that fit are kept, the rest refused.
          const k = Math.max(0, Math.min(m, job.limit.maxSize - count));
          for (let i = 0; i < k; i++) chunk.push({ seq: next++, data: job.entries[i] });
          results.push({ appended: k, dropped: m - k });
        }
      }
      const live = chunk.filter((e) => e.seq >= head);
      let last = base.last;
      if (live.length > 0 || head !== base.head || next !== base.next) {
        const headers: Record<string, string> = { [H_KIND]: live.length > 0 ? 'c' : 'm', [H_NEXT]: String(next), [H_HEAD]: String(head) };
        let payload: Uint8Array = new Uint8Array(0);
        if (live.length > 0) {
          headers[H_FIRST] = String(live[0].seq);
          const w = new ValueWriter(16 + live.reduce((n, e) => n + e.data.byteLength, 0));
          w.varint(live.length);
          for (const e of live) w.raw(e.data);
          payload = w.finish();
        }
        headers[H_WRITE] = `${WRITER}.${++this.writes}`;
        try {
          last = await this.publishOnce(link, stream, subject, payload, headers, base.last);
        } catch (err) {
          this.states.delete(subject);
          if (err instanceof WriteConflict && attempt < 10) continue;
          throw err;
        }
        this.remember(subject, { next, head, last });
      }
      window.forEach((job, i) => (job.kind === 'commit' ? job.resolve() : job.resolve(results[i] as InboxAppendResult)));
      if (head > base.head) this.track(this.cleanUp(link, stream, subject, head, last));
      return;
    }
  }

  /**
   * Publishes a state change exactly once, retrying within the call when no acknowledgement came
   * (the stream leader died): every attempt expects the same last subject sequence, so at most
   * one lands; after a silent attempt the subject's last message tells whether it did (it carries
   * this write's id), whether nothing happened (send again), or whether someone else wrote first
   * (WriteConflict: the attempt in flight can no longer land either).
   */
  private async publishOnce(
    link: JetStreamLink,
    stream: string,
    subject: string,
    payload: Uint8Array,
    headers: Record<string, string>,
    expectLast: number,
  ): Promise<number> {
    const deadline = Date.now() + link.timeoutMs;
    for (;;) {
      try {
        return await link.publish(subject, payload, headersOf(headers), expectLast, link.attemptMs);
      } catch (err) {
        if ((err as { code?: string }).code !== 'TIMEOUT' || link.isClosing || Date.now() > deadline) throw err;
      }
      const m = await link.last(stream, subject);
      if (m?.headers?.get(H_WRITE) === headers[H_WRITE]) return m.seq;
      if ((m?.seq ?? 0) !== expectLast) throw new WriteConflict(`${subject} moved while an append was unanswered`);
    }
  }

  /**
   * Entries between Head and Next that the stream no longer holds: removed behind this store's
   * back (a purge replayed by nats-server before 2.9.18, see {@link cleanUp}, or by hand). The
   * read goes on after them: a warn line says which, since nobody else can.
   */
  private reportMissing(subject: string, [from, to]: [number, number]): void {
    this.logger?.warn(
      `inbox ${subject}: entries ${from} to ${to} are missing from the stream (removed outside this storage); reading goes on after them`,
    );
  }

  private remember(subject: string, state: InboxState): void {
    this.states.delete(subject);
    this.states.set(subject, state);
    if (this.states.size > CACHED_STATES) this.states.delete(this.states.keys().next().value as string);
  }

  private track(p: Promise<void>): void {
    this.cleanups.add(p);
    void p.finally(() => this.cleanups.delete(p));
  }

  /**
   * Removes the messages of a subject whose entries are all behind `head`: walks from the
   * subject's first message to the first chunk with a live entry (or the state message `last`,
   * which stays), then deletes the messages before it one by one. Never a purge: the stream is
   * shared by every session of the partition, and a purge replayed by a NATS cluster restarting
   * (nats-server before 2.9.18) empties the whole stream up to it, every session's backlog with
   * it (JetStreamLink.deleteMessages). Only ever removes dead entries, so it needs no lock
   * against writers, which only add after `last`.
   */
  private async cleanUp(link: JetStreamLink, stream: string, subject: string, head: number, last: number): Promise<void> {
    try {
      const dead: number[] = [];
      let cursor = 0;
      for (let step = 0; step < GC_MAX_STEPS; step++) {
        const m = await link.next(stream, subject, cursor);
        if (m === undefined || m.seq >= last) break;
        if (m.headers?.get(H_KIND) === 'c' && num(m, H_NEXT) > head) break;
        dead.push(m.seq);
        cursor = m.seq + 1;
      }
      await link.deleteMessages(stream, dead);
    } catch (err) {
      this.logger?.warn(`inbox clean-up of ${subject} failed (retried at the next commit): ${(err as Error).message}`);
    }
  }
}
