import type { ChildProcess } from 'node:child_process';
import net from 'node:net';

/**
 * What the tests' own server processes (PostgreSQL, nats-server) share: a free 127.0.0.1 port, a
 * pause while polling for readiness, and a kill on exit for servers a crashed test left running.
 */

export function freePort(): Promise<number> {
  return new Promise((resolve, reject) => {
    const server = net.createServer();
    server.once('error', reject);
    server.listen(0, '127.0.0.1', () => {
      const address = server.address();
      server.close(() => (typeof address === 'object' && address !== null ? resolve(address.port) : reject(new Error('no port'))));
    });
  });
}

export function sleep(ms: number): Promise<void> {
  return new Promise((resolve) => setTimeout(resolve, ms));
}

/** Servers still running when the test process exits are killed (a crashed test must not leave them behind). */
const live = new Set<ChildProcess>();
let exitHook = false;

/** Kill `child` (SIGKILL) if it is still running when the test process exits. */
export function killOnExit(child: ChildProcess): void {
  live.add(child);
  child.once('exit', () => live.delete(child));
  if (!exitHook) {
    exitHook = true;
    process.once('exit', () => {
      for (const c of live) c.kill('SIGKILL');
    });
  }
}
