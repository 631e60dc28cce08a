import net from 'node:net';

/**
 * A TCP proxy between one broker node and one nats-server, to cut the node off from NATS (a
 * network partition) while everything else keeps reaching NATS. `blackhole()`: nothing is
 * forwarded in either direction (the sockets stay open, as behind a dropped link) and new
 * connections are held without being connected upstream; `heal()`: forwarding resumes, held
 * connections are connected.
 *
 * A NATS client learns the other servers of a NATS cluster from the `connect_urls` of the
 * server's INFO and would reconnect around the proxy, straight to them. The proxy rewrites those
 * URLs into the node's own proxies of the same servers (`rewrite`), so the node's NATS
 * connections (the broker's and its storage's) only ever go through its proxies, and still see
 * as many servers as there are (the replicas cap of docs/cluster.md counts them).
 */
export class NatsProxy {
  private server: net.Server | undefined;
  private readonly pairs = new Set<{ client: net.Socket; upstream: net.Socket | undefined }>();
  private held: { client: net.Socket; connect: () => void }[] = [];
  private cut = false;
  port = 0;

  constructor(
    private readonly upstreamPort: number,
    /** Maps a `host:port` of connect_urls to the one this node should use (undefined: leave it out). */
    private readonly rewrite: (hostPort: string) => string | undefined,
  ) {}

  async start(): Promise<void> {
    const server = net.createServer((client) => this.accept(client));
    this.server = server;
    await new Promise<void>((resolve, reject) => {
      server.once('error', reject);
      server.listen(0, '127.0.0.1', () => resolve());
    });
    this.port = (server.address() as net.AddressInfo).port;
  }

  get url(): string {
    return `nats://127.0.0.1:${this.port}`;
  }

  get blackholed(): boolean {
    return this.cut;
  }

  blackhole(): void {
    this.cut = true;
    for (const p of this.pairs) {
      p.client.pause();
      p.upstream?.pause();
    }
  }

  heal(): void {
    this.cut = false;
    for (const p of this.pairs) {
      p.client.resume();
      p.upstream?.resume();
    }
    const held = this.held;
    this.held = [];
    for (const h of held) if (!h.client.destroyed) h.connect();
  }

  async stop(): Promise<void> {
    for (const p of this.pairs) {
      p.client.destroy();
      p.upstream?.destroy();
    }
    this.pairs.clear();
    for (const h of this.held) h.client.destroy();
    this.held = [];
    const server = this.server;
    this.server = undefined;
    if (server !== undefined) await new Promise<void>((resolve) => server.close(() => resolve()));
  }

  private accept(client: net.Socket): void {
    client.setNoDelay(true);
    client.pause();
    const pair: { client: net.Socket; upstream: net.Socket | undefined } = { client, upstream: undefined };
    this.pairs.add(pair);
    const close = (): void => {
      this.pairs.delete(pair);
      client.destroy();
      pair.upstream?.destroy();
    };
    client.on('error', close);
    client.on('close', close);
    const connect = (): void => {
      const upstream = net.connect(this.upstreamPort, '127.0.0.1');
      pair.upstream = upstream;
      upstream.setNoDelay(true);
      upstream.on('error', close);
      upstream.on('close', close);
      const info = new InfoRewriter((chunk) => client.write(chunk), this.rewrite);
      upstream.on('data', (d: Buffer) => info.push(d));
      client.on('data', (d: Buffer) => upstream.write(d));
      if (this.cut) upstream.pause();
      else client.resume();
    };
    if (this.cut) this.held.push({ client, connect });
    else connect();
  }
}

/**
 * Reads the server → client direction of the NATS protocol (`INFO {json}`, `MSG`/`HMSG` with a
 * payload of the given size, and one-line control messages) and rewrites `connect_urls` of every
 * INFO; everything else passes unchanged.
 */
export class InfoRewriter {
  private pending: Buffer = Buffer.alloc(0);
  /** Payload bytes (with their CRLF) still to pass before the next protocol line. */
  private payload = 0;

  constructor(
    private readonly out: (chunk: Buffer) => void,
    private readonly rewrite: (hostPort: string) => string | undefined,
  ) {}

  push(data: Buffer): void {
    let buf = this.pending.length > 0 ? Buffer.concat([this.pending, data]) : data;
    this.pending = Buffer.alloc(0);
    while (buf.length > 0) {
      if (this.payload > 0) {
        const n = Math.min(this.payload, buf.length);
        this.out(buf.subarray(0, n));
        this.payload -= n;
        buf = buf.subarray(n);
        continue;
      }
      const eol = buf.indexOf('\r\n');
      if (eol < 0) {
        this.pending = Buffer.from(buf);
        return;
      }
      const line = buf.subarray(0, eol).toString('latin1');
      const rest = buf.subarray(eol + 2);
      if (line.startsWith('INFO ')) {
        this.out(Buffer.from(`INFO ${this.rewriteInfo(line.slice(5))}\r\n`, 'latin1'));
      } else {
        this.out(buf.subarray(0, eol + 2));
        if (line.startsWith('MSG ') || line.startsWith('HMSG ')) {
          const parts = line.trim().split(/\s+/);
          this.payload = Number(parts[parts.length - 1]) + 2;
        }
      }
      buf = rest;
    }
  }

  private rewriteInfo(json: string): string {
    let info: Record<string, unknown>;
    try {
      info = JSON.parse(json) as Record<string, unknown>;
    } catch {
      return json;
    }
    if (Array.isArray(info.connect_urls))
      info.connect_urls = info.connect_urls
        .map((u) => (typeof u === 'string' ? this.rewrite(u) : undefined))
        .filter((u): u is string => u !== undefined);
    delete info.ws_connect_urls;
    return JSON.stringify(info);
  }
}
