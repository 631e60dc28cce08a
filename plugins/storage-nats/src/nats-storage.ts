import type { Storage } from '@bifro/spi';
import semver from 'semver';
import { NatsBanStore } from './ban-store';
import { describe, NatsStorageError } from './errors';
import { NatsInboxStore } from './inbox-store';
import { NatsInflightStore } from './inflight-store';
import { JetStreamLink, WriteConflict } from './jetstream-link';
import { KvBucket } from './kv-bucket';
import { Layout } from './layout';
import type { NatsStorageOptions } from './options';
import { NatsRetainStore } from './retain-store';
import { NatsSessionStore } from './session-store';
import { StoreContext } from './store-context';

/** Version of the layout written to `<prefix>_meta` (key `layout`); a plugin refuses a layout it does not know. */
export const LAYOUT_FORMAT = 1;

/** Streams created or checked at once during init. */
const OPEN_CONCURRENCY = 8;

/**
 * The first nats-server that replays a purge as the purge it was when it recovers a replicated
 * stream; earlier ones purge the whole stream up to it (nats-io/nats-server#4196).
 */
const PURGE_REPLAY_FIXED = '2.9.18';

/** Whether a nats-server version (`2.9.10`, `v2.9.9-beta`) predates {@link PURGE_REPLAY_FIXED}; false when unknown. */
export function replaysPurgesWhole(version: string | undefined): boolean {
  const v = semver.coerce(version ?? '');
  return v !== null && semver.lt(v, PURGE_REPLAY_FIXED);
}

/**
 * Storage on NATS JetStream, shared by every node of a cluster (docs/storage-nats.md). init()
 * connects (rejecting with BIFRO_STORAGE_NATS_UNREACHABLE when no server answers within
 * `timeoutMs`), checks the layout under `prefix` and opens or creates its streams; close()
 * drains the connection. Every write resolves after its JetStream acknowledgement.
 */
export class NatsStorage implements Storage {
  readonly durable = true;
  /** Every node of a cluster opens the same streams and buckets: sessions move between nodes (SPI 1.4.0). */
  readonly shared = true;
  readonly sessions: NatsSessionStore;
  readonly inbox: NatsInboxStore;
  readonly inflight: NatsInflightStore;
  readonly retained: NatsRetainStore;
  readonly bans: NatsBanStore;
  private readonly ctx: StoreContext;
  /** Replicas in use: the option, capped at the servers NATS told about (known after init). */
  replicas = 0;

  constructor(readonly options: NatsStorageOptions) {
    this.ctx = new StoreContext(new Layout(options.prefix, options.partitions));
    this.inbox = new NatsInboxStore(this.ctx, options.logger);
    this.inflight = new NatsInflightStore(this.ctx);
    this.sessions = new NatsSessionStore(this.ctx, {
      clearInbox: (t, c) => this.inbox.clear(t, c),
      clearInflight: (t, c) => this.inflight.clear(t, c),
    });
    this.retained = new NatsRetainStore(this.ctx);
    this.bans = new NatsBanStore(this.ctx);
  }

  async init(): Promise<void> {
    const o = this.options;
    const link = await JetStreamLink.open(o);
    this.replicas = Math.min(o.replicas, link.knownServers());
    if (this.replicas < o.replicas)
      o.logger?.warn(`NATS storage: replicas ${o.replicas} capped at ${this.replicas}, the number of NATS servers in the cluster`);
    link.replicas = this.replicas;
    // Inboxes never purge (their clean-up deletes messages one by one), but the KV buckets do.
    if (this.replicas > 1 && replaysPurgesWhole(link.serverVersion))
      o.logger?.warn(
        `NATS storage: nats-server ${link.serverVersion} may lose session records, inflight state and retained messages when every server of the NATS cluster restarts at once (it replays a key's removal as a purge of the whole bucket, nats-io/nats-server#4196); run nats-server 2.9.18 or later`,
      );
    try {
      await this.open(link);
    } catch (err) {
      await link.close();
      if (err instanceof NatsStorageError) throw err;
      throw new NatsStorageError('BIFRO_STORAGE_NATS_FAILED', `opening the streams under prefix ${o.prefix}: ${describe(err)}`, {
        cause: err,
      });
    }
    this.ctx.link = link;
    o.logger?.info(`NATS storage open: prefix ${o.prefix}, ${o.partitions} partitions, ${this.replicas} replicas`);
  }

  private async open(link: JetStreamLink): Promise<void> {
    const { layout } = this.ctx;
    const meta = new KvBucket(link, layout.metaBucket);
    await meta.open();
    await this.checkLayout(meta);
    const parts = Array.from({ length: layout.partitions }, (_, p) => p);
    const sessions = parts.map((p) => new KvBucket(link, layout.sessionsBucket(p)));
    const inflight = parts.map((p) => new KvBucket(link, layout.inflightBucket(p)));
    const retained = parts.map((p) => new KvBucket(link, layout.retainedBucket(p)));
    const bans = new KvBucket(link, layout.bansBucket);
    const tasks: Array<() => Promise<void>> = [
      ...[...sessions, ...inflight, ...retained, bans].map((b) => () => b.open()),
      ...parts.map((p) => () => link.ensureStream({ name: layout.inboxStream(p), subjects: [layout.inboxSubjects(p)] })),
    ];
    await Promise.all(
      Array.from({ length: OPEN_CONCURRENCY }, async () => {
        for (let t = tasks.shift(); t !== undefined; t = tasks.shift()) await t();
      }),
    );
    Object.assign(this.ctx, { sessions, inflight, retained, bans });
  }

  /** The first node writes the layout; every later one must find the same partitions. */
  private async checkLayout(meta: KvBucket): Promise<void> {
    const wanted = { format: LAYOUT_FORMAT, partitions: this.options.partitions };
    for (;;) {
      const e = await meta.get('layout');
      if (e === undefined) {
        try {
          await meta.put('layout', Buffer.from(JSON.stringify(wanted)), 0);
          return;
        } catch (err) {
          if (err instanceof WriteConflict) continue;
          throw err;
        }
      }
      const found = JSON.parse(Buffer.from(e.value).toString('utf8')) as { format?: number; partitions?: number };
      if (found.format !== LAYOUT_FORMAT || found.partitions !== wanted.partitions)
        throw new NatsStorageError(
          'BIFRO_STORAGE_NATS_LAYOUT',
          `prefix ${this.options.prefix} holds layout format ${found.format} with ${found.partitions} partitions; this node is configured with format ${LAYOUT_FORMAT} and ${wanted.partitions} partitions`,
        );
      return;
    }
  }

  async close(): Promise<void> {
    const link = this.ctx.link;
    if (link === undefined) return;
    await this.inbox.settle();
    this.ctx.link = undefined;
    await link.close();
  }
}
