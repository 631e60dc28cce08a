import { DiscardPolicy, type MsgHdrs } from 'nats';
import { headersOf, WriteConflict, type JetStreamLink, type ReadMsg } from './jetstream-link';

/** One entry of a bucket: its value and revision (the stream sequence of the write). */
export interface BucketEntry {
  readonly key: string;
  readonly value: Uint8Array;
  readonly revision: number;
  readonly headers: MsgHdrs | undefined;
}

/** Keys whose last revision written by this process is remembered, so their removal needs no read. */
const REMEMBERED_REVISIONS = 65_536;

/**
 * A JetStream KV bucket (stream `KV_<name>`, subjects `$KV.<name>.<key>`, one message per key),
 * laid out as the `nats kv` tools expect, but read and written here directly: reads go to the
 * stream leader (a direct get may answer from a replica that has not seen the last write), and a
 * removal deletes the key's message by its stream sequence, never a purge and no delete marker:
 * nats-server before 2.9.18, recovering a replicated stream after every server of it stopped,
 * replays a purge as a purge of the whole stream (nats-io/nats-server#4196), which took every
 * other key with it; a message delete replays as itself. A removal by sequence also never takes
 * a value another writer put after the one it meant.
 */
export class KvBucket {
  readonly stream: string;
  private readonly subjectPrefix: string;
  /**
   * False for a stream made by an earlier build with `deny_delete` (which a stream update cannot
   * lift): its removals purge, as they used to.
   */
  private deletes = true;
  /** Key → stream sequence of this process's last write of it (bounded, oldest forgotten first). */
  private readonly written = new Map<string, number>();
  /** Writes under way, per key: a removal waits for them, or the write would land after it. */
  private readonly writing = new Map<string, Promise<number>>();

  constructor(
    private readonly link: JetStreamLink,
    readonly name: string,
  ) {
    this.stream = `KV_${name}`;
    this.subjectPrefix = `$KV.${name}.`;
  }

  /** Creates or checks the stream; resolves with whether it takes message deletes (see {@link deletes}). */
  async open(): Promise<boolean> {
    const config = await this.link.ensureStream({
      name: this.stream,
      subjects: [`${this.subjectPrefix}>`],
      max_msgs_per_subject: 1,
      allow_rollup_hdrs: true,
      deny_delete: false,
      deny_purge: false,
      discard: DiscardPolicy.New,
    });
    this.deletes = config.deny_delete !== true;
    return this.deletes;
  }

  private entry(m: ReadMsg): BucketEntry | undefined {
    // A marker left by the `nats kv` tools reads as absent.
    const op = m.headers?.get('KV-Operation');
    if (op === 'DEL' || op === 'PURGE') return undefined;
    return { key: m.subject.slice(this.subjectPrefix.length), value: m.data, revision: m.seq, headers: m.headers };
  }

  async get(key: string): Promise<BucketEntry | undefined> {
    const m = await this.link.last(this.stream, this.subjectPrefix + key);
    return m === undefined ? undefined : this.entry(m);
  }

  /** Writes and resolves with the revision; with `expect` (0: the key must be absent), WriteConflict when the key moved. */
  async put(key: string, value: Uint8Array, expect?: number, headers?: MsgHdrs): Promise<number> {
    const write = this.link.publish(this.subjectPrefix + key, value, headers, expect);
    this.writing.set(key, write);
    try {
      const revision = await write;
      this.written.delete(key);
      this.written.set(key, revision);
      if (this.written.size > REMEMBERED_REVISIONS) this.written.delete(this.written.keys().next().value as string);
      return revision;
    } finally {
      if (this.writing.get(key) === write) this.writing.delete(key);
    }
  }

  /**
   * Removes a key (after this process's writes of it under way), or every key of a filter
   * (`a.b.>`). A key this process wrote last is deleted by the revision it remembers; one it does
   * not know, or that was written again since, by the revision read first.
   */
  async remove(keyOrFilter: string): Promise<void> {
    if (!this.deletes) return this.link.purge(this.stream, this.subjectPrefix + keyOrFilter);
    if (keyOrFilter.endsWith('>') || keyOrFilter.includes('*')) {
      const revisions: number[] = [];
      await this.scan(keyOrFilter, (e) => (revisions.push(e.revision), true), true);
      await this.link.deleteMessages(this.stream, revisions);
      return;
    }
    await this.writing.get(keyOrFilter)?.catch(() => undefined);
    const known = this.written.get(keyOrFilter);
    this.written.delete(keyOrFilter);
    if (known !== undefined && (await this.link.deleteMessage(this.stream, known))) return;
    const m = await this.link.last(this.stream, this.subjectPrefix + keyOrFilter);
    if (m !== undefined) await this.link.deleteMessage(this.stream, m.seq);
  }

  /** Removes `key` only while it is still at `revision`; WriteConflict when it was written or removed since. */
  async removeAt(key: string, revision: number): Promise<void> {
    if (this.written.get(key) === revision) this.written.delete(key);
    if (!this.deletes) {
      // A delete marker written with compare-and-set, then the subject purged up to it.
      const marker = await this.link.publish(this.subjectPrefix + key, new Uint8Array(0), kvDeleteHeader(), revision);
      await this.link.purge(this.stream, this.subjectPrefix + key, marker + 1);
      return;
    }
    if (!(await this.link.deleteMessage(this.stream, revision)))
      throw new WriteConflict(`${this.subjectPrefix}${key} moved from revision ${revision}`);
  }

  /** The current entries of a key filter, in stream order, until `each` returns false. Headers only: values are empty. */
  scan(filter: string, each: (e: BucketEntry) => boolean, headersOnly = false): Promise<void> {
    return this.link.scan(this.stream, this.subjectPrefix + filter, { lastPerSubject: true, headersOnly }, (m) => {
      const e = this.entry(m);
      return e === undefined ? true : each(e);
    });
  }

  /** Every key of a filter (values are not transferred). */
  async keys(filter: string): Promise<string[]> {
    const out: string[] = [];
    await this.scan(filter, (e) => (out.push(e.key), true), true);
    return out;
  }
}

function kvDeleteHeader(): MsgHdrs {
  return headersOf({ 'KV-Operation': 'DEL' });
}
