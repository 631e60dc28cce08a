import { spawn } from 'node:child_process';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import net from 'node:net';
import os from 'node:os';
import path from 'node:path';
import { withClients, type ClientRegistry } from './mqtt-helpers';
import { startTestBroker } from './test-broker';
import { WHEEL_SLOT_MS } from './test-clock';

/**
 * The broker a protocol test talks to. Bifro by default; with `BIFRO_E2E_TARGET=mosquitto` the
 * same test runs against Debian's mosquitto (anonymous, loopback), which is how the suite itself
 * is checked against a reference implementation. Tests of Bifro-only behaviour use
 * startTestBroker directly.
 */
export interface BrokerUnderTest {
  readonly name: 'bifro' | 'mosquitto';
  readonly port: number;
  /**
   * Let `ms` pass for the broker: Bifro's clock is moved forward (no sleep); mosquitto's cannot
   * be, so the test sleeps for real. Resolves once what became due has fired.
   */
  passTime(ms: number): Promise<void>;
  stop(): Promise<void>;
}

export async function startBrokerUnderTest(bifroYaml = ''): Promise<BrokerUnderTest> {
  if (process.env.BIFRO_E2E_TARGET === 'mosquitto') return startMosquitto();
  const tb = await startTestBroker(bifroYaml);
  return { name: 'bifro', port: tb.port, passTime: (ms) => tb.clock.advance(ms), stop: () => tb.stop() };
}

/**
 * Start the broker under test for a describe block (beforeAll / afterAll) with a registry of
 * clients closed after each test. `port` is read once the broker runs.
 */
export function useBrokerUnderTest(bifroYaml = ''): {
  readonly port: number;
  readonly clients: ClientRegistry;
  /** {@link BrokerUnderTest.passTime} of the running broker. */
  passTime(ms: number): Promise<void>;
} {
  let broker: BrokerUnderTest | undefined;
  const port = (): number => broker!.port;
  const clients = withClients(port);
  beforeAll(async () => {
    broker = await startBrokerUnderTest(bifroYaml);
  });
  afterAll(() => broker?.stop());
  return {
    get port() {
      return port();
    },
    clients,
    passTime: (ms) => broker!.passTime(ms),
  };
}

function freePort(): Promise<number> {
  return new Promise((resolve, reject) => {
    const server = net.createServer();
    server.listen(0, '127.0.0.1', () => {
      const { port } = server.address() as net.AddressInfo;
      server.close(() => resolve(port));
    });
    server.on('error', reject);
  });
}

async function startMosquitto(): Promise<BrokerUnderTest> {
  const dir = mkdtempSync(path.join(os.tmpdir(), 'bifro-mosq-'));
  const port = await freePort();
  const conf = path.join(dir, 'mosquitto.conf');
  writeFileSync(
    conf,
    [`listener ${port} 127.0.0.1`, 'allow_anonymous true', 'persistence false', 'max_queued_messages 100000', ''].join('\n'),
  );
  const child = spawn('mosquitto', ['-c', conf], { stdio: 'ignore' });
  const deadline = Date.now() + 5000;
  for (;;) {
    const ok = await new Promise<boolean>((resolve) => {
      const s = net.connect(port, '127.0.0.1', () => {
        s.destroy();
        resolve(true);
      });
      s.on('error', () => resolve(false));
    });
    if (ok) break;
    if (Date.now() > deadline) throw new Error('mosquitto did not start');
    await new Promise((r) => setTimeout(r, 50));
  }
  return {
    name: 'mosquitto',
    port,
    passTime: (ms) => new Promise((resolve) => setTimeout(resolve, ms + WHEEL_SLOT_MS)),
    async stop() {
      child.kill('SIGTERM');
      await new Promise((r) => child.once('exit', r));
      rmSync(dir, { recursive: true, force: true });
    },
  };
}
