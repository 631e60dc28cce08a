import { DiscardPolicy, type MsgHdrs } from 'nats';
import { headersOf, type JetStreamLink, type ReadMsg } from './jetstream-link';

/** One entry of a bucket: its value and revision (the stream sequence of the write). */
export interface BucketEntry {
  readonly key: string;
  readonly value: Uint8Array;
  readonly revision: number;
}

/**
 * A JetStream KV bucket (stream `KV_<name>`, subjects `$KV.<name>.<key>`, one message per key),
 * laid out as the `nats kv` tools expect, but read and written here directly: reads go to the
 * stream leader (a direct get may answer from a replica that has not seen the last write), and a
 * delete purges the key's subject instead of leaving a delete marker behind for every key ever
 * removed.
 */
export class KvBucket {
  readonly stream: string;
  private readonly subjectPrefix: string;

  constructor(
    private readonly link: JetStreamLink,
    readonly name: string,
  ) {
    this.stream = `KV_${name}`;
    this.subjectPrefix = `$KV.${name}.`;
  }

  async open(): Promise<void> {
    await this.link.ensureStream({
      name: this.stream,
      subjects: [`${this.subjectPrefix}>`],
      max_msgs_per_subject: 1,
      allow_rollup_hdrs: true,
      deny_delete: true,
      deny_purge: false,
      discard: DiscardPolicy.New,
    });
  }

  private entry(m: ReadMsg): BucketEntry | undefined {
    // A marker left by the `nats kv` tools reads as absent.
    const op = m.headers?.get('KV-Operation');
    if (op === 'DEL' || op === 'PURGE') return undefined;
    return { key: m.subject.slice(this.subjectPrefix.length), value: m.data, revision: m.seq };
  }

  async get(key: string): Promise<BucketEntry | undefined> {
    const m = await this.link.last(this.stream, this.subjectPrefix + key);
    return m === undefined ? undefined : this.entry(m);
  }

  /** Writes and resolves with the revision; with `expect` (0: the key must be absent), WriteConflict when the key moved. */
  put(key: string, value: Uint8Array, expect?: number): Promise<number> {
    return this.link.publish(this.subjectPrefix + key, value, undefined, expect);
  }

  /** Removes a key, or every key of a filter (`a.b.>`), without markers. */
  remove(keyOrFilter: string): Promise<void> {
    return this.link.purge(this.stream, this.subjectPrefix + keyOrFilter);
  }

  /**
   * Removes `key` only while it is still at `revision`: a delete marker written with compare-and-set,
   * then the subject purged up to that marker, so a write that came after it stays.
   */
  async removeAt(key: string, revision: number): Promise<void> {
    const marker = await this.link.publish(this.subjectPrefix + key, new Uint8Array(0), kvDeleteHeader(), revision);
    await this.link.purge(this.stream, this.subjectPrefix + key, marker + 1);
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
