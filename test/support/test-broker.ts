import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import pino from 'pino';
import { loadConfig } from '../../core/src/runtime/config';
import { startBroker, type ListenerAddress, type RunningBroker } from '../../core/src/runtime/broker';
import { TestClock } from './test-clock';

export const REPO = path.resolve(__dirname, '..', '..');
export const FIXTURE_PLUGINS = path.join(REPO, 'test', 'fixtures', 'plugins');

export interface TestBroker {
  readonly broker: RunningBroker;
  /** Port of the first listener (the tcp one). */
  readonly port: number;
  /** Every bound listener, in configuration order: the tcp one first, then `opts.listeners`. */
  readonly listeners: readonly ListenerAddress[];
  readonly dir: string;
  /** The settings file the settings-file plugin watches (with `opts.settings`); edit it to change settings while running. */
  readonly settingsFile: string;
  /** Log lines written so far (JSON objects). */
  readonly logs: Record<string, unknown>[];
  /** The broker's clock: `clock.advance(ms)` makes `ms` pass for the broker without sleeping. */
  readonly clock: TestClock;
  stop(): Promise<void>;
}

export interface TestBrokerOptions {
  readonly pluginsDir?: string;
  /**
   * More listeners after the tcp one, each a YAML flow mapping, e.g.
   * `{ name: tls, type: tls, host: 127.0.0.1, port: 0, tls: { cert: "/tmp/x.crt", key: "/tmp/x.key" } }`.
   */
  readonly listeners?: readonly string[];
  /**
   * Run the first-party settings-file plugin (polling every 100 ms) on a file in the broker's
   * temp dir with this initial content; the plugins dir then defaults to the repository's plugins.
   */
  readonly settings?: string;
  /** With `settings`: more entries under `plugins:` (YAML lines indented by two spaces), e.g. a throttler. */
  readonly plugins?: string;
  /**
   * Run in this directory (one an earlier broker of the test ran in with `keepDir`) instead of a
   * new temporary one: its data directory, and so its storage, is reused. `stop()` leaves it; the
   * test removes it.
   */
  readonly dir?: string;
  /** `stop()` leaves the directory (for a later broker started with `dir`); the test removes it. */
  readonly keepDir?: boolean;
}

/**
 * Start a real broker in this process on 127.0.0.1 with an ephemeral port. `yaml` is appended
 * to a config that sets the listeners, data dir and plugins dir (the fixture plugins by default).
 */
export async function startTestBroker(yaml = '', opts: TestBrokerOptions = {}): Promise<TestBroker> {
  const dir = opts.dir ?? mkdtempSync(path.join(os.tmpdir(), 'bifro-e2e-'));
  const file = path.join(dir, 'bifro.yml');
  const settingsFile = path.join(dir, 'settings.yml');
  let pluginsDir = opts.pluginsDir ?? FIXTURE_PLUGINS;
  if (opts.settings !== undefined) {
    writeFileSync(settingsFile, opts.settings);
    pluginsDir = opts.pluginsDir ?? path.join(REPO, 'plugins');
    const more = opts.plugins === undefined ? '' : `${opts.plugins}\n`;
    yaml = `plugins:\n  settings:\n    use: "@bifro/plugin-settings-file"\n    options: { file: ${JSON.stringify(settingsFile)}, pollMs: 100 }\n${more}${yaml}`;
  }
  writeFileSync(
    file,
    [
      `dataDir: ${JSON.stringify(path.join(dir, 'data'))}`,
      `pluginsDir: ${JSON.stringify(pluginsDir)}`,
      'listeners:',
      '  - { name: tcp, type: tcp, host: 127.0.0.1, port: 0 }',
      ...(opts.listeners ?? []).map((l) => `  - ${l}`),
      yaml,
    ].join('\n'),
  );
  const config = await loadConfig({ file, cwd: dir, env: {} });
  const logs: Record<string, unknown>[] = [];
  const logger = pino(
    { level: 'debug' },
    {
      write(line: string) {
        logs.push(JSON.parse(line) as Record<string, unknown>);
      },
    },
  );
  const clock = new TestClock();
  const broker = await startBroker(config, logger, { clock: clock.now });
  return {
    broker,
    port: broker.listeners[0]!.port,
    listeners: broker.listeners,
    dir,
    settingsFile,
    logs,
    clock,
    async stop() {
      await broker.stop('test done');
      if (opts.dir === undefined && opts.keepDir !== true) rmSync(dir, { recursive: true, force: true });
    },
  };
}
