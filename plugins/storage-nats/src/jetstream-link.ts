import { readFileSync } from 'node:fs';
import {
  AckPolicy,
  connect,
  DeliverPolicy,
  DiscardPolicy,
  Events,
  headers as natsHeaders,
  nanos,
  RetentionPolicy,
  StorageType,
  type ConnectionOptions,
  type ConsumerInfo,
  type JetStreamClient,
  type JetStreamManager,
  type JsMsg,
  type MsgHdrs,
  type NatsConnection,
  type StoredMsg,
  type StreamConfig,
} from 'nats';
import { AckPublisher } from './ack-publisher';
import { describe, NatsStorageError } from './errors';
import type { NatsStorageOptions } from './options';

/** A write whose expected last subject sequence did not hold: someone else wrote first. */
export class WriteConflict extends Error {}

/** Most messages one fetch of a scan asks for. */
const SCAN_BATCH = 1000;

/** init() waits up to this many `timeoutMs` for JetStream to answer (a NATS cluster electing its leader). */
const JETSTREAM_READY_WAITS = 4;

/** Shares of `timeoutMs`: a scan's consumer creation or fetch waits one share, and a scan makes at most this many consumers without progress. */
const CONSUMER_ATTEMPTS = 4;

/** How long a stream's scans walk after a consumer creation on it got no answer (a dead peer still counted). */
const WALK_AFTER_TIMEOUT_MS = 30_000;

/** The JetStream error code of `wrong last sequence`. */
const WRONG_LAST_SEQUENCE = 10071;

/** JetStream error codes of a message delete whose message is gone: `sequence n not found` (clustered), `no message found` (single server). */
const SEQUENCE_NOT_FOUND = 10043;
const MSG_DELETE_FAILED = 10057;

/** Message deletes one {@link JetStreamLink.deleteMessages} has in flight at a time. */
const DELETE_WINDOW = 64;

function apiErrorCode(err: unknown): number | undefined {
  const api = (err as { api_error?: { err_code?: number } } | null)?.api_error;
  return api?.err_code;
}

function notFound(err: unknown): boolean {
  const e = err as { code?: string; api_error?: { code?: number } } | null;
  return e?.code === '404' || e?.api_error?.code === 404;
}

/** A message read from a stream: where it is, its headers and payload. */
export interface ReadMsg {
  readonly subject: string;
  readonly seq: number;
  readonly headers: MsgHdrs | undefined;
  readonly data: Uint8Array;
}

function fromStored(m: StoredMsg): ReadMsg {
  return { subject: m.subject, seq: m.seq, headers: m.header, data: m.data };
}

function fromJs(m: JsMsg): ReadMsg {
  return { subject: m.subject, seq: m.seq, headers: m.headers, data: m.data };
}

/**
 * The connection to NATS and the few JetStream operations the stores are built from: publish
 * (with an expected last subject sequence for compare-and-set), read the last or next message of
 * a subject (from the stream leader, never a possibly stale replica), purge a subject, and scan
 * the messages of a filter with a short-lived consumer. Every operation is bounded by
 * `timeoutMs` and fails with an error that says what failed.
 */
export class JetStreamLink {
  private up = true;
  private closing = false;
  /** Replicas of the streams ensureStream creates. */
  replicas: number;
  private readonly publisher: AckPublisher;
  /** Streams whose scans walk instead of making a consumer, until when (performance.now()): see scan. */
  private readonly walking = new Map<string, number>();

  private constructor(
    private readonly nc: NatsConnection,
    readonly js: JetStreamClient,
    readonly jsm: JetStreamManager,
    /** For consumer creation only, with a share of `timeoutMs` per attempt (see scan). */
    private readonly quickJsm: JetStreamManager,
    private readonly opts: NatsStorageOptions,
  ) {
    this.replicas = opts.replicas;
    this.publisher = new AckPublisher(nc, opts.timeoutMs);
    void this.watchStatus();
  }

  /** Connects once (bounded by `timeoutMs` per server); afterwards the client reconnects forever. */
  static async open(opts: NatsStorageOptions): Promise<JetStreamLink> {
    const tls = opts.tls;
    const options: ConnectionOptions = {
      servers: [...opts.servers],
      name: `bifro-storage-${opts.prefix}`,
      ...(opts.user !== undefined ? { user: opts.user, pass: opts.password } : {}),
      ...(opts.token !== undefined ? { token: opts.token } : {}),
      ...(tls !== undefined
        ? {
            tls: {
              ...(tls.ca !== undefined ? { ca: readFileSync(tls.ca, 'utf8') } : {}),
              ...(tls.cert !== undefined ? { cert: readFileSync(tls.cert, 'utf8') } : {}),
              ...(tls.key !== undefined ? { key: readFileSync(tls.key, 'utf8') } : {}),
            },
          }
        : {}),
      timeout: opts.timeoutMs,
      maxReconnectAttempts: -1,
      reconnectTimeWait: 250,
      pingInterval: 5000,
      maxPingOut: 2,
    };
    let nc: NatsConnection;
    try {
      nc = await withTimeout(connect(options), opts.timeoutMs * Math.max(1, opts.servers.length), 'connect');
    } catch (err) {
      throw new NatsStorageError(
        'BIFRO_STORAGE_NATS_UNREACHABLE',
        `could not connect to NATS (${opts.servers.join(', ')}): ${describe(err)}`,
        { cause: err },
      );
    }
    // JetStream may still be electing its meta leader: the first stream requests wait for it (NatsStorage.init).
    const jsm = await nc.jetstreamManager({ timeout: opts.timeoutMs, checkAPI: false });
    const quick = await nc.jetstreamManager({ timeout: Math.max(200, Math.floor(opts.timeoutMs / CONSUMER_ATTEMPTS)), checkAPI: false });
    return new JetStreamLink(nc, nc.jetstream({ timeout: opts.timeoutMs }), jsm, quick, opts);
  }

  /** The version of the NATS server the connection is on (`2.9.10`), if it said. */
  get serverVersion(): string | undefined {
    return this.nc.info?.version;
  }

  /** Servers of the NATS cluster the connection knows (what it was told at connect), at least 1. */
  knownServers(): number {
    return Math.max(1, this.nc.info?.connect_urls?.length ?? 1);
  }

  private async watchStatus(): Promise<void> {
    for await (const s of this.nc.status()) {
      if (s.type === Events.Disconnect) {
        this.up = false;
        if (!this.closing) this.opts.logger?.warn(`NATS storage disconnected from ${String(s.data)}; reconnecting`);
      } else if (s.type === Events.Reconnect) {
        this.up = true;
        this.opts.logger?.info(`NATS storage reconnected to ${String(s.data)}`);
      }
    }
  }

  /**
   * Runs one storage call: rejects with BIFRO_STORAGE_NATS_TIMEOUT when it takes longer than
   * `timeoutMs` (saying whether NATS is connected), with BIFRO_STORAGE_NATS_FAILED when JetStream
   * refuses it. `what` names the call and its session or topic.
   */
  async call<T>(what: string, fn: () => Promise<T>): Promise<T> {
    if (this.closing) throw new NatsStorageError('BIFRO_STORAGE_NATS_CLOSED', `${what}: the storage is closed`);
    try {
      return await withTimeout(fn(), this.opts.timeoutMs, what);
    } catch (err) {
      if (err instanceof NatsStorageError) throw err;
      const timedOut = err instanceof TimeoutError || (err as { code?: string } | null)?.code === 'TIMEOUT';
      if (timedOut) {
        const state = this.up
          ? `connected to ${this.nc.getServer()}`
          : `NATS disconnected, reconnecting to ${this.opts.servers.join(', ')}`;
        throw new NatsStorageError(
          'BIFRO_STORAGE_NATS_TIMEOUT',
          `${what}: no answer from JetStream within ${this.opts.timeoutMs} ms (${state})`,
          {
            cause: err,
          },
        );
      }
      throw new NatsStorageError('BIFRO_STORAGE_NATS_FAILED', `${what}: ${describe(err)}`, { cause: err });
    }
  }

  /** Creates the stream, or checks that the existing one (another node made it) holds the same subjects. */
  async ensureStream(config: Partial<StreamConfig> & { name: string; subjects: string[] }): Promise<void> {
    const full: Partial<StreamConfig> = {
      retention: RetentionPolicy.Limits,
      storage: StorageType.File,
      num_replicas: this.replicas,
      discard: DiscardPolicy.Old,
      duplicate_window: nanos(1000),
      ...config,
    };
    // A NATS cluster that just started, or just lost a server, answers JetStream API requests
    // once it has a meta leader: wait for it, up to JETSTREAM_READY_WAITS × timeoutMs.
    const deadline = Date.now() + JETSTREAM_READY_WAITS * this.opts.timeoutMs;
    for (;;) {
      try {
        return await this.ensureStreamOnce(config.name, config.subjects, full);
      } catch (err) {
        if (Date.now() > deadline || !/TIMEOUT|503|temporarily unavailable|no responders/i.test(describe(err))) throw err;
        await new Promise((r) => setTimeout(r, 250));
      }
    }
  }

  private async ensureStreamOnce(name: string, subjects: readonly string[], full: Partial<StreamConfig>): Promise<void> {
    const config = { name, subjects };
    // After a lost race to create it, the other node's stream may take a while to appear (R3: its
    // Raft group forms first, slower on a busy machine).
    const raceDeadline = Date.now() + JETSTREAM_READY_WAITS * this.opts.timeoutMs;
    for (let attempt = 0; ; attempt++) {
      try {
        const info = await this.jsm.streams.info(config.name);
        const missing = config.subjects.filter((s) => !info.config.subjects.includes(s));
        if (missing.length > 0)
          throw new NatsStorageError('BIFRO_STORAGE_NATS_LAYOUT', `stream ${config.name} exists without subject ${missing.join(', ')}`);
        return;
      } catch (err) {
        if (!notFound(err)) throw err;
        if (attempt > 0 && Date.now() > raceDeadline)
          throw new NatsStorageError(
            'BIFRO_STORAGE_NATS_FAILED',
            `stream ${config.name}: another node was creating it, and it was still not found ${JETSTREAM_READY_WAITS * this.opts.timeoutMs} ms later`,
            { cause: err },
          );
        if (attempt > 0) {
          await new Promise((r) => setTimeout(r, 200));
          continue;
        }
      }
      try {
        await this.jsm.streams.add(full);
        return;
      } catch (err) {
        // Another node created it between our info and add: read it again.
        if (!/already in use|subjects overlap/.test(describe(err))) throw err;
      }
    }
  }

  /**
   * Runs a request again while JetStream answers 503 (no stream leader yet, e.g. during an
   * election after a server died), for at most `timeoutMs`. A 503 means nobody took the request,
   * so even a write is safe to send again.
   */
  private async unavailableRetry<T>(fn: () => Promise<T>): Promise<T> {
    const deadline = Date.now() + this.opts.timeoutMs;
    for (let attempt = 1; ; attempt++) {
      try {
        return await fn();
      } catch (err) {
        if ((err as { code?: string } | null)?.code !== '503' || Date.now() + 100 * attempt > deadline || this.closing) throw err;
        await new Promise((r) => setTimeout(r, Math.min(500, 50 * attempt)));
      }
    }
  }

  /** A read sent again, each time with a share of `timeoutMs`, when no answer came (a stream leader that just died). */
  private async quickRetry<T>(fn: () => Promise<T>): Promise<T> {
    for (let attempt = 1; ; attempt++) {
      try {
        return await this.unavailableRetry(fn);
      } catch (err) {
        if (attempt >= CONSUMER_ATTEMPTS || (err as { code?: string } | null)?.code !== 'TIMEOUT' || this.closing) throw err;
      }
    }
  }

  get isClosing(): boolean {
    return this.closing;
  }

  get timeoutMs(): number {
    return this.opts.timeoutMs;
  }

  /** A share of `timeoutMs` for one attempt of a request that is retried within the call. */
  get attemptMs(): number {
    return Math.max(200, Math.floor(this.opts.timeoutMs / CONSUMER_ATTEMPTS));
  }

  /** Publishes and resolves with the stream sequence once JetStream acknowledged it; WriteConflict when `expectLast` did not hold. */
  async publish(subject: string, data: Uint8Array, headers?: MsgHdrs, expectLast?: number, timeoutMs?: number): Promise<number> {
    checkSubject(subject);
    let h = headers;
    if (expectLast !== undefined) {
      h = h ?? natsHeaders();
      h.set('Nats-Expected-Last-Subject-Sequence', String(expectLast));
    }
    try {
      return await this.unavailableRetry(() => this.publisher.publish(subject, data, h, timeoutMs));
    } catch (err) {
      if (apiErrorCode(err) === WRONG_LAST_SEQUENCE) throw new WriteConflict(describe(err));
      throw err;
    }
  }

  /** The last message of a subject, from the stream leader; undefined when there is none. */
  async last(stream: string, subject: string): Promise<ReadMsg | undefined> {
    checkSubject(subject);
    try {
      return fromStored(await this.quickRetry(() => this.quickJsm.streams.getMessage(stream, { last_by_subj: subject })));
    } catch (err) {
      if (notFound(err)) return undefined;
      throw err;
    }
  }

  /** The first message of a subject at or after stream sequence `seq`; undefined when there is none. */
  async next(stream: string, subject: string, seq: number): Promise<ReadMsg | undefined> {
    try {
      return fromStored(await this.unavailableRetry(() => this.jsm.streams.getMessage(stream, { next_by_subj: subject, seq } as never)));
    } catch (err) {
      if (notFound(err)) return undefined;
      throw err;
    }
  }

  /**
   * Removes the messages of `filter` (below stream sequence `before` when given), leaving no
   * marker. The KV buckets use it (their streams refuse message deletes), and an inbox's session
   * delete; on nats-server before 2.9.18 a restart of every server can replay it as a purge of
   * the whole stream (see {@link deleteMessages}), which NatsStorage.init warns about.
   */
  async purge(stream: string, filter: string, before?: number): Promise<void> {
    await this.unavailableRetry(() => this.jsm.streams.purge(stream, before === undefined ? { filter } : { filter, seq: before }));
  }

  /**
   * Removes messages by stream sequence (kept on disk until compacted, not erased); one already
   * gone counts as removed. What a stream shared by many subjects uses instead of a filtered
   * purge: nats-server before 2.9.18, recovering a replicated stream after every server of it
   * stopped, replays each purge still in its log as a purge of the whole stream up to the purge's
   * last sequence (nats-io/nats-server#4196), which took the other subjects' messages with it. A
   * delete replays as the delete of that one message.
   */
  async deleteMessages(stream: string, seqs: readonly number[]): Promise<void> {
    for (let i = 0; i < seqs.length; i += DELETE_WINDOW)
      await Promise.all(seqs.slice(i, i + DELETE_WINDOW).map((seq) => this.deleteMessage(stream, seq)));
  }

  private async deleteMessage(stream: string, seq: number): Promise<void> {
    try {
      await this.unavailableRetry(() => this.jsm.streams.deleteMessage(stream, seq, false));
    } catch (err) {
      // Removed already (a clean-up that failed half way, or two nodes cleaning up the same inbox).
      const code = apiErrorCode(err);
      if (code !== SEQUENCE_NOT_FOUND && !(code === MSG_DELETE_FAILED && /no message found/i.test(describe(err)))) throw err;
    }
  }

  /**
   * Hands the messages of `filter` to `each` in stream order (only the last of each subject with
   * `lastPerSubject`), until `each` returns false or none is left. An ephemeral in-memory
   * consumer, deleted afterwards; a filter without messages costs one request.
   */
  async scan(
    stream: string,
    filter: string,
    options: { readonly lastPerSubject?: boolean; readonly headersOnly?: boolean },
    each: (m: ReadMsg) => boolean,
  ): Promise<void> {
    const deadline = Date.now() + this.opts.timeoutMs;
    const seen = new Set<string>();
    let after = 0;
    // Right after a server of the stream died, the meta leader still counts it as a peer for a
    // while (nats-server 2.9 places an R1 consumer on a random one of the stream's peers): the
    // consumer's creation never answers, or it delivers nothing. A consumer that does not come
    // within its share of the time gives way to a walk over the stream leader's messages; one that
    // stops delivering is made again, going on after the last message handed over.
    // After one such timeout the stream's scans walk for WALK_AFTER_TIMEOUT_MS, not waiting again.
    const walkUntil = this.walking.get(stream);
    if (walkUntil !== undefined && performance.now() < walkUntil)
      return this.walk(stream, filter, options.lastPerSubject === true, after, seen, deadline, each);
    for (let attempt = 1; ; attempt++) {
      let name: { name: string; left: number } | undefined;
      try {
        name = await this.createConsumer(stream, filter, options, after);
      } catch (err) {
        if ((err as { code?: string } | null)?.code !== 'TIMEOUT' || this.closing) throw err;
        this.walking.set(stream, performance.now() + WALK_AFTER_TIMEOUT_MS);
        return this.walk(stream, filter, options.lastPerSubject === true, after, seen, deadline, each);
      }
      if (name === undefined) return;
      let progressed = false;
      try {
        for (;;) {
          const it = this.js.fetch(stream, name.name, { batch: Math.min(name.left, SCAN_BATCH), expires: this.attemptMs });
          let got = 0;
          let stop = false;
          for await (const m of it) {
            got++;
            name.left = m.info.pending;
            if (options.lastPerSubject === true) {
              // A consumer made again delivers the subjects it already gave once more.
              if (seen.has(m.subject)) continue;
              seen.add(m.subject);
            }
            after = m.seq;
            progressed = true;
            if (!each(fromJs(m))) stop = true;
            if (stop || name.left === 0) break;
          }
          it.stop();
          if (stop || name.left === 0) return;
          if (got === 0) break;
        }
      } finally {
        this.jsm.consumers.delete(stream, name.name).catch(() => undefined);
      }
      if (Date.now() > deadline || (attempt >= CONSUMER_ATTEMPTS && !progressed))
        throw new TimeoutError(`scan of ${filter} got no message within ${this.opts.timeoutMs} ms`);
    }
  }

  /** An ephemeral in-memory consumer of `filter` (after stream sequence `after` for a plain scan); undefined when it has nothing to deliver. */
  private async createConsumer(
    stream: string,
    filter: string,
    options: { readonly lastPerSubject?: boolean; readonly headersOnly?: boolean },
    after: number,
  ): Promise<{ name: string; left: number } | undefined> {
    const deliver =
      options.lastPerSubject === true
        ? { deliver_policy: DeliverPolicy.LastPerSubject }
        : after > 0
          ? { deliver_policy: DeliverPolicy.StartSequence, opt_start_seq: after + 1 }
          : { deliver_policy: DeliverPolicy.All };
    const config = {
      filter_subject: filter,
      ...deliver,
      ack_policy: AckPolicy.None,
      inactive_threshold: nanos(Math.max(10_000, this.opts.timeoutMs * 2)),
      mem_storage: true,
      num_replicas: 1,
      ...(options.headersOnly === true ? { headers_only: true } : {}),
    };
    const info: ConsumerInfo = await this.unavailableRetry(() => this.quickJsm.consumers.add(stream, config));
    if (info.num_pending > 0) return { name: info.name, left: info.num_pending };
    this.jsm.consumers.delete(stream, info.name).catch(() => undefined);
    return undefined;
  }

  /**
   * Scan without a consumer: the messages of `filter` after stream sequence `after`, one request
   * each to the stream leader (next by subject), so only for when no consumer could be made. With
   * `lastPerSubject` the last message of each subject not `seen` yet, in stream order.
   */
  private async walk(
    stream: string,
    filter: string,
    lastPerSubject: boolean,
    after: number,
    seen: ReadonlySet<string>,
    deadline: number,
    each: (m: ReadMsg) => boolean,
  ): Promise<void> {
    const last = new Map<string, ReadMsg>();
    for (let seq = after + 1; ;) {
      if (Date.now() > deadline) throw new TimeoutError(`walk over ${filter} did not finish within ${this.opts.timeoutMs} ms`);
      const m = await this.next(stream, filter, seq);
      if (m === undefined) break;
      seq = m.seq + 1;
      if (!lastPerSubject) {
        if (!each(m)) return;
      } else if (!seen.has(m.subject)) {
        last.delete(m.subject);
        last.set(m.subject, m);
      }
    }
    for (const m of last.values()) if (!each(m)) return;
  }

  /** Drains the connection (what was published is flushed first); closes it at once when NATS is away. */
  async close(): Promise<void> {
    this.closing = true;
    this.publisher.close();
    if (this.nc.isClosed()) return;
    if (this.up) await withTimeout(this.nc.drain(), this.opts.timeoutMs, 'drain').catch(() => this.nc.close());
    else await this.nc.close();
  }
}

/** Headers from name/value pairs. */
export function headersOf(pairs: Readonly<Record<string, string>>): MsgHdrs {
  const h = natsHeaders();
  for (const [k, v] of Object.entries(pairs)) h.set(k, v);
  return h;
}

class TimeoutError extends Error {}

/** Longest subject written: the server closes a connection whose control line passes 4 KiB. */
const MAX_SUBJECT = 3000;

function checkSubject(subject: string): void {
  if (subject.length > MAX_SUBJECT)
    throw new NatsStorageError(
      'BIFRO_STORAGE_NATS_FAILED',
      `key too long for NATS (${subject.length} > ${MAX_SUBJECT} characters): ${subject.slice(0, 80)}…`,
    );
}

function withTimeout<T>(p: Promise<T>, ms: number, what: string): Promise<T> {
  let timer: NodeJS.Timeout | undefined;
  // Settles later when the timer won: nobody waits for it any more.
  p.catch(() => undefined);
  return Promise.race([
    p,
    new Promise<never>((_, reject) => {
      timer = setTimeout(() => reject(new TimeoutError(`${what} did not finish within ${ms} ms`)), ms);
    }),
  ]).finally(() => clearTimeout(timer));
}
