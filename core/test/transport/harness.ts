import net from 'node:net';
import type { Duplex } from 'node:stream';
import type { ConnectionOrigin } from '../../src/transport/connection-origin';
import type { ListenerConfig } from '../../src/base/config-types';
import { bindListener, type BindOptions, type BoundListener } from '../../src/transport/listeners';

/** One connection as the MQTT layer would get it. */
export interface Accepted {
  readonly stream: Duplex;
  readonly origin: ConnectionOrigin;
  /** Everything received on the stream so far. */
  received(): Buffer;
  /** Resolves once at least `n` bytes arrived. */
  waitBytes(n: number, timeoutMs?: number): Promise<Buffer>;
  /** Resolves when the stream closed. */
  readonly closed: Promise<void>;
}

/** A bound listener plus what it accepted; stands in for the MQTT server. */
export interface Harness {
  readonly listener: BoundListener;
  readonly accepted: Accepted[];
  /** The next accepted connection (or the ones already accepted, in order). */
  nextAccepted(timeoutMs?: number): Promise<Accepted>;
  /** Destroy accepted streams (as the MQTT server does) and close the listener. */
  close(): Promise<void>;
}

export function listenerConfig(overrides: Partial<ListenerConfig> & Pick<ListenerConfig, 'type'>): ListenerConfig {
  return { name: `test-${overrides.type}`, host: '127.0.0.1', port: 0, proxyProtocol: false, ...overrides };
}

function track(stream: Duplex, origin: ConnectionOrigin): Accepted {
  const chunks: Buffer[] = [];
  let waiters: (() => void)[] = [];
  const wake = (): void => {
    const w = waiters;
    waiters = [];
    for (const f of w) f();
  };
  stream.on('data', (chunk: Buffer) => {
    chunks.push(chunk);
    wake();
  });
  stream.on('error', () => undefined);
  const closed = new Promise<void>((resolve) => stream.once('close', () => resolve()));
  const received = (): Buffer => Buffer.concat(chunks);
  return {
    stream,
    origin,
    received,
    closed,
    async waitBytes(n, timeoutMs = 3000) {
      const deadline = Date.now() + timeoutMs;
      while (received().length < n) {
        if (Date.now() >= deadline) throw new Error(`only ${received().length} of ${n} bytes arrived`);
        await new Promise<void>((resolve) => {
          const t = setTimeout(resolve, deadline - Date.now());
          waiters.push(() => {
            clearTimeout(t);
            resolve();
          });
        });
      }
      return received();
    },
  };
}

export async function startHarness(config: ListenerConfig, options: BindOptions = {}): Promise<Harness> {
  const accepted: Accepted[] = [];
  let taken = 0;
  let waiters: (() => void)[] = [];
  const listener = await bindListener(
    config,
    (stream, origin) => {
      accepted.push(track(stream, origin));
      const w = waiters;
      waiters = [];
      for (const f of w) f();
    },
    options,
  );
  return {
    listener,
    accepted,
    async nextAccepted(timeoutMs = 3000) {
      if (accepted.length <= taken) {
        await new Promise<void>((resolve, reject) => {
          const t = setTimeout(() => reject(new Error('no connection accepted')), timeoutMs);
          waiters.push(() => {
            clearTimeout(t);
            resolve();
          });
        });
      }
      return accepted[taken++]!;
    },
    async close() {
      for (const a of accepted) a.stream.destroy();
      await listener.close();
    },
  };
}

/** Connect a plain TCP socket. */
export function tcpConnect(port: number): Promise<net.Socket> {
  return new Promise((resolve, reject) => {
    const socket = net.connect(port, '127.0.0.1', () => resolve(socket));
    socket.once('error', reject);
  });
}

/** Resolves true when the socket closed within the time. */
export function closedWithin(socket: net.Socket, timeoutMs: number): Promise<boolean> {
  if (socket.destroyed) return Promise.resolve(true);
  return new Promise((resolve) => {
    const t = setTimeout(() => resolve(false), timeoutMs);
    socket.on('error', () => undefined);
    socket.once('close', () => {
      clearTimeout(t);
      resolve(true);
    });
  });
}

/** Everything a socket receives until it closes (or the time runs out). */
export function readAll(socket: net.Socket, timeoutMs = 3000): Promise<string> {
  return new Promise((resolve) => {
    const chunks: Buffer[] = [];
    const done = (): void => resolve(Buffer.concat(chunks).toString('latin1'));
    const t = setTimeout(done, timeoutMs);
    socket.on('data', (c: Buffer) => chunks.push(c));
    socket.on('error', () => undefined);
    socket.once('close', () => {
      clearTimeout(t);
      done();
    });
  });
}

/**
 * A PROXY-protocol speaking relay in front of `targetPort`, as a load balancer: it waits for the
 * client's first bytes and sends them in the same write as the header (the hard case for the
 * listener), then relays both ways.
 */
export async function startProxyRelay(targetPort: number, header: Buffer): Promise<{ port: number; close(): Promise<void> }> {
  const sockets = new Set<net.Socket>();
  const server = net.createServer((client) => {
    sockets.add(client);
    client.on('error', () => undefined);
    client.once('data', (first: Buffer) => {
      client.pause();
      const upstream = net.connect(targetPort, '127.0.0.1', () => {
        upstream.write(Buffer.concat([header, first]));
        client.pipe(upstream);
        upstream.pipe(client);
      });
      sockets.add(upstream);
      upstream.on('error', () => client.destroy());
      upstream.on('close', () => client.destroy());
      client.on('close', () => upstream.destroy());
    });
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  return {
    port: (server.address() as net.AddressInfo).port,
    close: () =>
      new Promise<void>((resolve) => {
        for (const s of sockets) s.destroy();
        server.close(() => resolve());
      }),
  };
}
