import { NatsStorageError } from './errors';
import type { JetStreamLink } from './jetstream-link';
import type { KvBucket } from './kv-bucket';
import type { Layout } from './layout';

/** What the stores share: the link and the buckets, there between init() and close(). */
export class StoreContext {
  link: JetStreamLink | undefined;
  sessions: KvBucket[] = [];
  inflight: KvBucket[] = [];
  retained: KvBucket[] = [];
  bans: KvBucket | undefined;

  constructor(readonly layout: Layout) {}

  /** Runs one storage call under the link's timeout; BIFRO_STORAGE_NATS_CLOSED outside init()..close(). */
  call<T>(label: string, fn: (link: JetStreamLink) => Promise<T>): Promise<T> {
    // Ids and topics can be long: an error message names them by their start.
    const what = label.length <= 200 ? label : `${label.slice(0, 197)}...`;
    const link = this.link;
    if (link === undefined) return Promise.reject(new NatsStorageError('BIFRO_STORAGE_NATS_CLOSED', `${what}: the storage is not open`));
    return link.call(what, () => fn(link));
  }
}

/** A Buffer view of bytes read from NATS (the value codec reads Buffers), without copying. */
export function asBuffer(data: Uint8Array): Buffer {
  return Buffer.from(data.buffer, data.byteOffset, data.byteLength);
}
