import { spawn, type ChildProcess } from 'node:child_process';
import { existsSync } from 'node:fs';
import path from 'node:path';
import { REPO } from './test-broker';

const CLI = path.join(REPO, 'core', 'dist', 'cli', 'main.js');

/** A broker running as its own process (`bifro start`), for tests that kill it. */
export interface BrokerProcess {
  readonly child: ChildProcess;
  readonly port: number;
  output(): string;
  /** SIGKILL: no shutdown, no flush. Resolves when the process is gone. */
  kill9(): Promise<void>;
  /** SIGTERM and wait for the exit code. */
  stop(): Promise<number | null>;
}

/** The environment without the caller's BIFRO_* variables. */
function cleanEnv(): NodeJS.ProcessEnv {
  const env: NodeJS.ProcessEnv = {};
  for (const [k, v] of Object.entries(process.env)) if (!k.startsWith('BIFRO_')) env[k] = v;
  return { ...env, BIFRO_LOG_PRETTY: 'false' };
}

/** Run `bifro start` with a config file; resolves once it logged "bifro started", rejects with its output when it exits first. */
export function startBrokerProcess(config: string, args: readonly string[] = []): Promise<BrokerProcess> {
  if (!existsSync(CLI)) throw new Error(`${CLI} is missing: build first (npm run build)`);
  const child = spawn(process.execPath, [CLI, 'start', '--config', config, '--port', '0', ...args], {
    env: cleanEnv(),
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  let out = '';
  const exited = new Promise<number | null>((resolve) => child.once('exit', (code) => resolve(code)));
  return new Promise((resolve, reject) => {
    const timer = setTimeout(() => reject(new Error(`broker not ready in 15 s:\n${out}`)), 15000);
    const onData = (d: Buffer): void => {
      out += d.toString();
      for (const line of out.split('\n')) {
        if (!line.startsWith('{')) continue;
        const entry = JSON.parse(line) as { msg?: string; listeners?: { port: number }[] };
        if (entry.msg?.startsWith('bifro started') && entry.listeners?.[0] !== undefined) {
          clearTimeout(timer);
          child.stdout!.off('data', onData);
          child.stdout!.on('data', (more: Buffer) => (out += more.toString()));
          const port = entry.listeners[0].port;
          resolve({
            child,
            port,
            output: () => out,
            async kill9() {
              child.kill('SIGKILL');
              await exited;
            },
            async stop() {
              child.kill('SIGTERM');
              return exited;
            },
          });
          return;
        }
      }
    };
    child.stdout!.on('data', onData);
    child.stderr!.on('data', (d: Buffer) => (out += d.toString()));
    void exited.then((code) => {
      clearTimeout(timer);
      reject(new Error(`broker exited with ${code} before it was ready:\n${out}`));
    });
  });
}
