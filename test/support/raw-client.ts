import net from 'node:net';
import mqtt, { type Packet } from 'mqtt-packet';

/**
 * A client that speaks raw bytes, for what a client library would hide: malformed input, exact
 * packet checks, packets in the wrong order.
 */
export class RawClient {
  readonly packets: Packet[] = [];
  closed = false;
  private readonly parser: mqtt.Parser;
  private waiters: (() => void)[] = [];

  private constructor(
    readonly socket: net.Socket,
    protocolVersion: 3 | 4 | 5,
  ) {
    this.parser = mqtt.parser({ protocolVersion });
    this.parser.on('packet', (p: Packet) => {
      this.packets.push(p);
      this.wake();
    });
    socket.on('data', (d: Buffer) => this.parser.parse(d));
    socket.on('close', () => {
      this.closed = true;
      this.wake();
    });
    socket.on('error', () => undefined);
  }

  static connect(port: number, protocolVersion: 3 | 4 | 5 = 4): Promise<RawClient> {
    return new Promise((resolve, reject) => {
      const socket = net.connect(port, '127.0.0.1', () => {
        resolve(new RawClient(socket, protocolVersion));
      });
      socket.once('error', reject);
    });
  }

  write(bytes: Buffer | number[]): void {
    this.socket.write(Buffer.isBuffer(bytes) ? bytes : Buffer.from(bytes));
  }

  send(packet: Packet, protocolVersion: 3 | 4 | 5 = 4): void {
    this.socket.write(mqtt.generate(packet, { protocolVersion }));
  }

  /** The next packet not yet taken, or undefined when the connection closed first / the time ran out. */
  async next(timeoutMs = 2000): Promise<Packet | undefined> {
    const deadline = Date.now() + timeoutMs;
    while (this.packets.length === 0 && !this.closed && Date.now() < deadline) {
      await new Promise<void>((resolve) => {
        const t = setTimeout(resolve, deadline - Date.now());
        this.waiters.push(() => {
          clearTimeout(t);
          resolve();
        });
      });
    }
    return this.packets.shift();
  }

  /** Resolves true when the broker closed the connection within the time. */
  async waitClosed(timeoutMs = 2000): Promise<boolean> {
    const deadline = Date.now() + timeoutMs;
    while (!this.closed && Date.now() < deadline) {
      await new Promise<void>((resolve) => {
        const t = setTimeout(resolve, deadline - Date.now());
        this.waiters.push(() => {
          clearTimeout(t);
          resolve();
        });
      });
    }
    return this.closed;
  }

  destroy(): void {
    this.socket.destroy();
  }

  private wake(): void {
    const w = this.waiters;
    this.waiters = [];
    for (const f of w) f();
  }
}
