import { createHmac, randomBytes } from 'node:crypto';

/**
 * Remembers successful password checks for a short time, so that a storm of reconnects with the
 * same device credentials costs one KDF, not one per CONNECT. Keyed by the login name and an
 * HMAC-SHA256 of the password under a random key of this process (no password or plain hash is
 * kept). Bounded: the oldest entry goes first. Cleared whenever the password file is reloaded.
 * Failed checks are never remembered.
 */
export class VerifyCache<V> {
  private readonly entries = new Map<string, { readonly value: V; readonly expires: number }>();
  private readonly key = randomBytes(32);

  constructor(
    private readonly ttlMs: number,
    private readonly maxEntries: number,
    private readonly now: () => number = Date.now,
  ) {}

  get enabled(): boolean {
    return this.ttlMs > 0;
  }

  get size(): number {
    return this.entries.size;
  }

  /** The cache key of a login and password. */
  keyOf(login: string, password: Uint8Array): string {
    return `${login}\u0000${createHmac('sha256', this.key).update(password).digest('base64')}`;
  }

  get(key: string): V | undefined {
    const hit = this.entries.get(key);
    if (hit === undefined) return undefined;
    if (hit.expires <= this.now()) {
      this.entries.delete(key);
      return undefined;
    }
    return hit.value;
  }

  set(key: string, value: V): void {
    if (!this.enabled) return;
    this.entries.delete(key);
    this.entries.set(key, { value, expires: this.now() + this.ttlMs });
    while (this.entries.size > this.maxEntries) {
      const oldest = this.entries.keys().next().value as string;
      this.entries.delete(oldest);
    }
  }

  clear(): void {
    this.entries.clear();
  }
}

/**
 * At most `limit` KDFs at once (node's thread pool has 4 threads by default, shared with file
 * I/O and DNS), queued fairly per tenant: a free slot goes to the tenants' queues in turn (round
 * robin), so a flood of logins in one tenant delays that tenant's checks, not another's. Each
 * tenant's queue holds at most `maxWaitingPerTenant`: past that a check of the tenant is refused at
 * once rather than queued for longer than the broker's call timeout.
 */
export class KdfLimiter {
  private running = 0;
  /** Waiting starts by tenant, in turn order: the first key is served next, then goes to the back. */
  private readonly queues = new Map<string, Array<() => void>>();

  constructor(
    private readonly limit: number,
    private readonly maxWaitingPerTenant: number,
  ) {}

  /** Checks waiting now, all tenants together. */
  get waiting(): number {
    let n = 0;
    for (const queue of this.queues.values()) n += queue.length;
    return n;
  }

  /** Runs `task` for `tenant` when a slot is free and its turn comes; undefined when the tenant's queue is full. */
  run<T>(tenant: string, task: () => Promise<T>): Promise<T> | undefined {
    const queue = this.queues.get(tenant);
    if (this.running >= this.limit && (queue?.length ?? 0) >= this.maxWaitingPerTenant) return undefined;
    return new Promise<T>((resolve, reject) => {
      const start = (): void => {
        this.running++;
        task()
          .then(resolve, reject)
          .finally(() => {
            this.running--;
            this.next();
          });
      };
      if (this.running < this.limit) start();
      else if (queue === undefined) this.queues.set(tenant, [start]);
      else queue.push(start);
    });
  }

  /** Starts the first waiting check of the tenant whose turn it is; that tenant goes to the back. */
  private next(): void {
    const first = this.queues.entries().next();
    if (first.done === true) return;
    const [tenant, queue] = first.value;
    const start = queue.shift()!;
    this.queues.delete(tenant);
    if (queue.length > 0) this.queues.set(tenant, queue);
    start();
  }
}
