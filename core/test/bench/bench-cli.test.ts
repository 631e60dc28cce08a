import { spawn } from 'node:child_process';
import { existsSync } from 'node:fs';
import path from 'node:path';
import { startTestBroker, type TestBroker } from '../../../test/support/test-broker';
import { BenchUsageError, parseBenchArgs, progressLine, scenarioList, type BenchOptions } from '../../bench/src/cli';
import { QUICK_TIMING, defaultWorkers } from '../../bench/src/scenario';

/** The child-process tests run the built CLI: `npm test` builds first; alone, run `npx tsc -b` before jest. */
const REPO = path.resolve(__dirname, '..', '..', '..');
const CLI = path.join(REPO, 'core', 'dist', 'cli', 'main.js');

function run(argv: string[]): BenchOptions {
  const c = parseBenchArgs(argv);
  if (c.kind !== 'run') throw new Error(`expected a run, got ${c.kind}`);
  return c.options;
}

function usageError(argv: string[]): string {
  try {
    parseBenchArgs(argv);
  } catch (err) {
    expect(err).toBeInstanceOf(BenchUsageError);
    return (err as Error).message;
  }
  throw new Error(`no usage error for ${argv.join(' ')}`);
}

describe('bifro bench arguments', () => {
  it('parses a scenario, its parameters and the common options', () => {
    const o = run([
      'fan-in',
      '--publishers',
      '5',
      '--qos=1',
      '--host',
      'localhost',
      '--port',
      '1884',
      '--duration',
      '1.5',
      '--warmup',
      '0',
    ]);
    expect(o.scenario.name).toBe('fan-in');
    expect(o.params).toMatchObject({ publishers: 5, qos: 1, payload: 64, mqtt: 4 });
    expect(o.target).toEqual({ host: 'localhost', port: 1884 });
    expect(o.timing).toMatchObject({ measureMs: 1500, warmupMs: 0 });
    expect([o.workers, o.json, o.progress, o.quick]).toEqual([defaultWorkers(), false, null, false]);

    const l = run([
      'latency',
      '--rate',
      '20000',
      '--mqtt',
      '5',
      '--topic-levels',
      '7',
      '--json',
      '--workers',
      '0',
      '--pid',
      '42',
      '--quiet',
    ]);
    expect(l.params).toMatchObject({ rate: 20000, mqtt: 5, topicLevels: 7 });
    expect(l.target).toEqual({ host: '127.0.0.1', port: 1883, pid: 42 });
    expect([l.workers, l.json, l.progress]).toEqual([0, true, false]);

    expect(run(['idle-connections', '--username', 'bench', '--password', 'pw']).target).toEqual({
      host: '127.0.0.1',
      port: 1883,
      credentials: { username: 'bench', password: 'pw' },
    });
    expect(run(['qos1-pairs', '--persistent']).params.persistent).toBe(1);
    expect(run(['qos1-pairs', '--persistent', '--pairs', '3']).params).toMatchObject({ persistent: 1, pairs: 3 });
    expect(run(['--persistent', 'fan-out']).params).toMatchObject({ persistent: 1, subscribers: 50 });
    expect(run(['fan-out', '--persistent', '0']).params.persistent).toBe(0);
    const q = run(['idle-connections', '--quick']);
    expect(q.params).toMatchObject({ connections: 1000, settle: 300 });
    expect(q.timing.measureMs).toBe(QUICK_TIMING.measureMs);
  });

  it('answers --help and --list, listing every scenario with its parameters', () => {
    expect(parseBenchArgs(['--help']).kind).toBe('help');
    expect(parseBenchArgs(['fan-in', '-h']).kind).toBe('help');
    expect(parseBenchArgs(['--list']).kind).toBe('list');
    const list = scenarioList();
    for (const name of ['fan-in', 'fan-out', 'qos1-pairs', 'qos1-persistent', 'shared-sub', 'latency', 'idle-connections'])
      expect(list).toContain(`${name}: `);
    expect(list).toContain('--topic-levels <n>');
    expect(list).toContain('--mqtt <3|4|5>');
  });

  it('rejects bad input with a clear message', () => {
    expect(usageError([])).toMatch(/name a scenario: fan-in, fan-out/);
    expect(usageError(['nope'])).toMatch(/unknown scenario "nope" \(known: fan-in/);
    expect(usageError(['fan-in', 'fan-out'])).toMatch(/unexpected argument "fan-out"/);
    expect(usageError(['fan-in', '--frobnicate', '1'])).toMatch(/unknown option "--frobnicate"/);
    expect(usageError(['fan-in', '-x'])).toMatch(/unknown option "-x"/);
    expect(usageError(['fan-in', '--pairs', '3'])).toMatch(/fan-in has no parameter --pairs \(its parameters: --publishers/);
    expect(usageError(['fan-in', '--publishers'])).toMatch(/--publishers needs a value/);
    expect(usageError(['fan-in', '--publishers', '--qos', '1'])).toMatch(/--publishers needs a value/);
    expect(usageError(['fan-in', '--publishers', 'many'])).toMatch(/--publishers needs a number, got "many"/);
    expect(usageError(['fan-in', '--publishers', '0'])).toMatch(/--publishers must be 1\.\.100000, got 0/);
    expect(usageError(['fan-in', '--publishers', '2.5'])).toMatch(/--publishers must be a whole number/);
    expect(usageError(['fan-in', '--qos', '3'])).toMatch(/--qos must be one of 0, 1, 2, got 3/);
    expect(usageError(['qos1-pairs', '--qos', '0'])).toMatch(/--qos must be one of 1, 2/);
    expect(usageError(['fan-in', '--mqtt', '6'])).toMatch(/--mqtt must be one of 3, 4, 5/);
    expect(usageError(['fan-in', '--window', '4'])).toMatch(/--window \(4\) must be 0 or at least --batch \(32\)/);
    expect(usageError(['latency', '--payload', '4'])).toMatch(/--payload must be 8\.\./);
    expect(usageError(['latency', '--rate', '0'])).toMatch(/--rate must be 1\.\./);
    expect(usageError(['fan-in', '--port', '0'])).toMatch(/--port must be 1\.\.65535/);
    expect(usageError(['fan-in', '--port', '1883', '--port', '1884'])).toMatch(/--port given twice/);
    expect(usageError(['fan-in', '--workers', '99'])).toMatch(/--workers must be 0\.\.64/);
    expect(usageError(['fan-in', '--duration', '0'])).toMatch(/--duration must be 0\.1\.\./);
    expect(usageError(['idle-connections', '--password', 'x'])).toMatch(/--password needs --username/);
    expect(usageError(['fan-in', '--json=yes'])).toMatch(/--json takes no value/);
    expect(usageError(['fan-in', '--progress', '--quiet'])).toMatch(/contradict/);
  });

  it('formats a progress line', () => {
    const line = progressLine({
      elapsedS: 3,
      phase: 'measure',
      connected: 21,
      connections: 21,
      sentPerS: 1234.4,
      receivedPerS: 1200,
      completedPerS: 0,
      skippedPerS: 0,
    });
    expect(line).toMatch(/^\s+3\.0 s\s+measure\s+sent 1,234\/s\s+received 1,200\/s$/);
    expect(
      progressLine({
        elapsedS: 1,
        phase: 'setup',
        connected: 5,
        connections: 20,
        sentPerS: 0,
        receivedPerS: 0,
        completedPerS: 0,
        skippedPerS: 0,
      }),
    ).toContain('connected 5/20');
  });
});

interface Result {
  readonly code: number | null;
  readonly stdout: string;
  readonly stderr: string;
}

function bifro(args: readonly string[]): Promise<Result> {
  return new Promise((resolve, reject) => {
    const child = spawn(process.execPath, [CLI, ...args], { stdio: ['ignore', 'pipe', 'pipe'] });
    let stdout = '';
    let stderr = '';
    child.stdout.on('data', (d: Buffer) => (stdout += d.toString()));
    child.stderr.on('data', (d: Buffer) => (stderr += d.toString()));
    child.on('error', reject);
    child.on('close', (code) => resolve({ code, stdout, stderr }));
  });
}

describe('bifro bench as a child process', () => {
  let broker: TestBroker;

  beforeAll(async () => {
    if (!existsSync(CLI)) throw new Error(`${CLI} is missing: build first (npm run build, or npx tsc -b)`);
    broker = await startTestBroker();
  });
  afterAll(async () => {
    await broker.stop();
  });

  it('runs fan-in on two worker threads and prints one JSON object', async () => {
    const r = await bifro(
      ['bench', 'fan-in', '--port', String(broker.port), '--publishers', '3', '--duration', '1', '--warmup', '0.2'].concat([
        '--workers',
        '2',
        '--json',
      ]),
    );
    expect(r.stderr).toBe('');
    expect(r.code).toBe(0);
    const out = JSON.parse(r.stdout) as {
      scenario: string;
      params: Record<string, number>;
      metrics: Record<string, { value: number; unit: string; better: string }>;
      headline: string[];
      generator: { workers: number; cpuPercent: number; eventLoopPercent: number[] };
      timing: { durationS: number };
    };
    expect(out.scenario).toBe('fan-in');
    expect(out.params.publishers).toBe(3);
    expect(out.timing.durationS).toBe(1);
    expect(out.headline).toEqual(['received']);
    expect(out.metrics.received!.value).toBeGreaterThan(0);
    expect(out.metrics.received!.unit).toBe('msg/s');
    expect(out.metrics.sent!.value).toBeGreaterThan(0);
    expect(out.generator.workers).toBe(2);
    expect(out.generator.eventLoopPercent).toHaveLength(2);
    expect(out.generator.cpuPercent).toBeGreaterThan(0);
  });

  it('runs latency with a table, progress lines and p50 ≤ p99 ≤ max', async () => {
    const r = await bifro(
      ['bench', 'latency', '--port', String(broker.port), '--rate', '2000', '--publishers', '2'].concat([
        '--duration',
        '1.2',
        '--warmup',
        '0.2',
        '--workers',
        '1',
        '--progress',
      ]),
    );
    expect(r.code).toBe(0);
    expect(r.stderr).toMatch(/bifro bench latency → 127\.0\.0\.1:\d+ \(MQTT 3\.1\.1\)/);
    expect(r.stderr).toMatch(/\d\.\d s\s+measure\s+sent [\d,]+\/s/);
    const ms = (label: string): number => Number(new RegExp(`${label}\\s+([\\d.]+)\\s+ms`).exec(r.stdout)![1]);
    expect(ms('p50')).toBeLessThanOrEqual(ms('p99'));
    expect(ms('p99')).toBeLessThanOrEqual(ms('max'));
    expect(r.stdout).toMatch(/generator: \d+ % of a core \(whole process\), worker event loop busy \d+ %/);
  });

  it('exits 2 with the reason on a usage error, and 1 when the scenario fails', async () => {
    const bad = await bifro(['bench', 'fan-in', '--publishers', 'x']);
    expect(bad.code).toBe(2);
    expect(bad.stderr).toContain('error BIFRO_CLI_USAGE: bifro bench: --publishers needs a number, got "x"');
    const refused = await bifro(['bench', 'fan-in', '--port', '1', '--duration', '0.5', '--workers', '1']);
    expect(refused.code).toBe(1);
    expect(refused.stderr).toMatch(/error: fan-in failed: .*ECONNREFUSED/);
  });
});
