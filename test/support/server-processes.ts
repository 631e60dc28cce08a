import type { ChildProcess } from 'node:child_process';
import { readdirSync, readFileSync } from 'node:fs';
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

/**
 * SIGSTOP `pid` and resolve once every thread of it is stopped (state T in /proc), so nothing
 * sent after this resolves can still be answered: the kernel delivers a stop to a thread only
 * when that thread next runs, and on a loaded machine that can be after the test's next request.
 */
export async function pauseProcess(pid: number): Promise<void> {
  process.kill(pid, 'SIGSTOP');
  const deadline = Date.now() + 10_000;
  while (!allThreadsStopped(pid)) {
    if (Date.now() > deadline) throw new Error(`process ${pid} did not stop within 10 s of SIGSTOP`);
    await sleep(5);
  }
}

function allThreadsStopped(pid: number): boolean {
  const tasks = readdirSync(`/proc/${pid}/task`);
  return tasks.every((tid) => {
    try {
      // The state follows the command name, which is in parentheses and may hold spaces.
      const stat = readFileSync(`/proc/${pid}/task/${tid}/stat`, 'utf8');
      return /^[tT]$/.test(stat.slice(stat.lastIndexOf(')') + 2, stat.lastIndexOf(')') + 3));
    } catch {
      return true; // the thread ended
    }
  });
}
