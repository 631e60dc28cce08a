import { randomBytes } from 'node:crypto';
import type { KV, KvEntry } from 'nats';
import type { Logger } from '../base/logger';
import { describeError } from '../base/errors';
import { probeKey, ROUTES_BUCKET, type RouteWriter } from './routes';

/** How long one confirmation waits for its probe to come back before it starts again. */
const PROBE_WAIT_MS = 3000;
/** A pause between failed confirmation attempts. */
const RETRY_MS = 500;
/** An unconfirmed spell shorter than this is logged at debug only (every reconnect has one). */
const QUIET_SPELL_MS = 1000;

/**
 * Whether this node's view of the routes can be trusted for QoS 1/2 (docs/cluster.md § Routes
 * that heal). A message acknowledged on a route table missing a subscriber's route would be
 * acknowledged for nobody, so after anything that may have left the table or the bucket behind
 * — the first connection, a lost NATS connection, a new watch of the bucket, a lapsed lease (a
 * pause, an outage) — the node refuses QoS 1/2 publishes until it has
 *
 * 1. re-asserted its own routes (listed its keys, written what is missing, deleted what it no
 *    longer serves), so other nodes can find its sessions again, and
 * 2. seen a probe it put in the bucket after that come back through its watch: the watch then
 *    delivered every route written before, so the table is as current as the bucket was.
 *
 * Each trigger starts a new attempt; an attempt that fails or times out is tried again.
 */
export class RouteConfirmation {
  private confirmed = false;
  private kv: KV | undefined;
  /** Bumped by every trigger: an attempt of an older generation gives up. */
  private generation = 0;
  private running = false;
  private readonly key: string;
  private probe: { value: string; seen: () => void } | undefined;
  /** Since when (ms, the broker's clock) the table has been unconfirmed, and why. */
  private since: number;
  private why = 'the node started';
  private retry: NodeJS.Timeout | undefined;
  private stopped = false;

  constructor(
    private readonly nodeId: string,
    private readonly writer: RouteWriter,
    private readonly logger: Logger,
    private readonly clock: () => number,
    /** A probe NATS took did not come back: the watch delivers nothing (a consumer lost in a NATS restart) and is opened again. */
    private readonly rewatch: () => void,
  ) {
    this.key = probeKey(nodeId);
    this.since = clock();
  }

  /** The table holds every route written to the bucket up to a moment after the last trigger. */
  get current(): boolean {
    return this.confirmed;
  }

  /** The table may be missing routes from now on: QoS 1/2 is refused until confirmed again. */
  lose(why: string): void {
    this.generation++;
    if (!this.confirmed) return;
    this.confirmed = false;
    this.since = this.clock();
    this.why = why;
    this.logger.debug({ why }, `routes unconfirmed (${why}): QoS 1/2 publishes are refused until they are confirmed`);
  }

  /** The bucket is watched (anew): confirm once its watch and this node's writes are through. */
  attach(kv: KV): void {
    this.kv = kv;
    this.lose('a new watch of the routes');
    this.confirm();
  }

  /** Starts a confirmation (after a reconnect, a lease taken again); one runs at a time. */
  confirm(): void {
    if (this.stopped || this.kv === undefined) return;
    this.generation++;
    if (this.retry !== undefined) {
      clearTimeout(this.retry);
      this.retry = undefined;
    }
    if (!this.running) void this.run();
  }

  /** An entry of the routes watch: the probe coming back confirms. */
  observed(e: KvEntry): void {
    const probe = this.probe;
    if (probe === undefined || e.key !== this.key || e.operation !== 'PUT') return;
    if (Buffer.from(e.value).toString() === probe.value) probe.seen();
  }

  private async run(): Promise<void> {
    this.running = true;
    try {
      while (!this.stopped) {
        const generation = this.generation;
        const ok = await this.attempt(generation);
        if (this.stopped) return;
        if (generation !== this.generation) continue;
        if (ok) {
          this.confirmed = true;
          const spell = this.clock() - this.since;
          this.logger[spell >= QUIET_SPELL_MS ? 'info' : 'debug'](
            { unconfirmedMs: spell, why: this.why },
            `routes confirmed after ${spell} ms (${this.why}): QoS 1/2 publishes are accepted again`,
          );
          return;
        }
        this.retry = setTimeout(() => {
          this.retry = undefined;
          this.confirm();
        }, RETRY_MS);
        return;
      }
    } finally {
      this.running = false;
    }
  }

  /** Re-asserts this node's routes, then puts a probe and waits for the watch to deliver it. */
  private async attempt(generation: number): Promise<boolean> {
    const kv = this.kv;
    if (kv === undefined) return false;
    if (!(await this.writer.reconcile()) || generation !== this.generation) return false;
    // JSON like the routes, so a tool reading the bucket parses every value.
    const value = JSON.stringify({ node: this.nodeId, probe: randomBytes(9).toString('base64url') });
    let seen: () => void = () => undefined;
    const back = new Promise<boolean>((resolve) => {
      seen = () => resolve(true);
      setTimeout(() => resolve(false), PROBE_WAIT_MS).unref();
    });
    this.probe = { value, seen };
    try {
      await kv.put(this.key, value);
    } catch (err) {
      this.logger.debug({ err: describeError(err) }, `cannot put this node's probe in ${ROUTES_BUCKET}; trying again`);
      return false;
    }
    const ok = await back;
    if (this.probe?.value === value) this.probe = undefined;
    if (!ok && generation === this.generation && !this.stopped) {
      this.logger.info(`a probe put in ${ROUTES_BUCKET} did not come back through the watch in ${PROBE_WAIT_MS} ms; watching again`);
      this.rewatch();
    }
    return ok && generation === this.generation;
  }

  stop(): void {
    this.stopped = true;
    this.probe?.seen();
    if (this.retry !== undefined) clearTimeout(this.retry);
  }
}
