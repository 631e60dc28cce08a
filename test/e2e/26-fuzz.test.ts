import { randomInt } from 'node:crypto';
import { expectOthersUnaffected, failedLogins, openFileDescriptors, NO_LOGIN_BACKOFF, USER_TABLE_AUTH } from '../support/isolation';
import { sleep, waitUntil } from '../support/mqtt-helpers';
import { ByteConn, PINGREQ, TYPE, describeFrame, type Version } from '../support/mqtt-bytes';
import {
  frameStatus,
  generateCase,
  describeSeedRuns,
  parseSeed,
  seedRuns,
  readCorpus,
  streamOf,
  writeCorpusCase,
  CORPUS_DIR,
  type CorpusEntry,
  type FuzzCase,
} from '../support/fuzz';
import { startTestBroker, type TestBroker } from '../support/test-broker';

/**
 * Standing defence 2 (issue "Hardening"): a mutation fuzzer. First every input of the committed
 * corpus (test/fixtures/fuzz-corpus/*.hex) is replayed; then, for a time budget, generated cases
 * (valid sequences corrupted by test/support/fuzz.ts), each on a new connection, a few at a time.
 * A case passes when the broker closed the connection or answered a PINGREQ written after it
 * (a case ending inside a packet may also be left waiting), logged no error, and other connections
 * are unaffected (expectOthersUnaffected after every case). A failing case is written to the
 * corpus with its seed and what failed. The process's RSS and file descriptors stay bounded.
 *
 * BIFRO_FUZZ_SECONDS: the budget of generated cases (default 30 s: 40 % fixed seed, 60 % random seed).
 * BIFRO_FUZZ_SEED=<seed>: that seed only, for the whole budget; <seed>:<index>: that one case.
 */

const BUDGET_S = Number(process.env.BIFRO_FUZZ_SECONDS ?? 30);
const FIXED_SEED = 0x5eed2026;
const RANDOM_SEED = randomInt(2 ** 32);
const ENV = parseSeed(process.env.BIFRO_FUZZ_SEED, 'BIFRO_FUZZ_SEED');
const PARALLEL = 3;
/** Failures after which a run stops (each one is already in the corpus). */
const MAX_FAILURES = 10;
/** RSS growth allowed over the run (the broker runs in this process). */
const RSS_GROWTH_LIMIT = 300 * 1024 * 1024;

const RUNS = seedRuns(ENV, BUDGET_S, FIXED_SEED, RANDOM_SEED);
// Printed so a CI failure can be reproduced: BIFRO_FUZZ_SEED=<seed> (or <seed>:<index> from the corpus file).
console.log(`26-fuzz seeds: ${describeSeedRuns(RUNS)}`);

interface StreamResult {
  outcome: 'closed' | 'answered' | 'pending';
  /** The broker accepted the CONNECT (CONNACK 0x00). */
  loggedIn: boolean;
  problem?: string;
  sent: string[];
}

/**
 * Writes `chunks` on a new connection, then a PINGREQ. The broker must close or answer that
 * PINGREQ within 2 s; if the bytes end inside a packet it may also wait (outcome `pending`), and a
 * Remaining Length of five bytes must close (§1.5.5).
 */
async function runStream(port: number, chunks: Buffer[]): Promise<StreamResult> {
  const stream = Buffer.concat(chunks);
  const status = frameStatus(stream);
  const pingreqs = countValidPingreqs(stream);
  const conn = await ByteConn.open(port);
  try {
    for (let i = 0; i < chunks.length; i++) {
      conn.write(chunks[i]!);
      if (i % 8 === 7) await new Promise<void>((r) => setImmediate(r));
    }
    conn.write(PINGREQ);
    const pingresps = (): number => conn.frames.filter((f) => f.type === TYPE.PINGRESP).length;
    const answered = (): boolean => pingresps() > pingreqs;
    const sent = (): string[] => conn.frames.map(describeFrame);
    const loggedIn = (): boolean => conn.frames.some((f) => f.type === TYPE.CONNACK && f.body[1] === 0);
    if (status === 'partial') {
      await conn.until(answered, 300);
      return { outcome: conn.closed ? 'closed' : answered() ? 'answered' : 'pending', loggedIn: loggedIn(), sent: sent() };
    }
    await conn.until(status === 'invalid' ? () => false : answered, 2000);
    if (conn.closed) return { outcome: 'closed', loggedIn: loggedIn(), sent: sent() };
    if (status === 'complete' && answered()) return { outcome: 'answered', loggedIn: loggedIn(), sent: sent() };
    return {
      outcome: 'pending',
      loggedIn: loggedIn(),
      sent: sent(),
      problem:
        status === 'invalid'
          ? `a Remaining Length of five bytes did not close the connection within 2 s (sent ${sent().join(', ') || 'nothing'})`
          : `hang: every packet complete, but the connection neither closed nor answered the PINGREQ within 2 s (sent ${sent().join(', ') || 'nothing'})`,
    };
  } finally {
    conn.destroy();
  }
}

/** PINGREQ frames (first byte exactly 0xC0) in a complete stream: each is answered before the probe is. */
function countValidPingreqs(stream: Buffer): number {
  let n = 0;
  let pos = 0;
  while (pos + 1 < stream.length) {
    let len = 0;
    let mul = 1;
    let i = pos + 1;
    for (let k = 0; k < 4 && i < stream.length; k++) {
      const b = stream[i++]!;
      len += (b & 0x7f) * mul;
      mul *= 128;
      if ((b & 0x80) === 0) break;
    }
    if (stream[pos] === 0xc0 && len === 0) n++;
    pos = i + len;
  }
  return n;
}

describe('26 fuzz', () => {
  let tb: TestBroker;
  let rssBaseline = 0;
  let rssMax = 0;
  let fdBaseline = 0;
  const inflight = new Set<FuzzCase>();
  let aborted = true;
  let checks = 0;

  beforeAll(async () => {
    tb = await startTestBroker(USER_TABLE_AUTH + NO_LOGIN_BACKOFF);
    await expectOthersUnaffected(tb.port);
    await sleep(100);
    rssBaseline = rssMax = process.memoryUsage().rss;
    fdBaseline = openFileDescriptors();
  });

  afterAll(async () => {
    // A broker exception fails the running test and leaves its cases in flight: keep them.
    if (aborted && inflight.size > 0)
      for (const c of inflight)
        writeCorpusCase(c, 'the test was aborted while this case ran (an uncaught exception in the broker?)', [
          `${inflight.size} cases in flight`,
        ]);
    await tb?.stop();
  });

  /** The broker's error-level log lines since `from`. */
  function errorLogs(from: number): string[] {
    return tb.logs
      .slice(from)
      .filter((l) => typeof l.level === 'number' && l.level >= 50)
      .map((l) => `${String(l.msg)}${l.err ? `: ${JSON.stringify(l.err).slice(0, 300)}` : ''}`);
  }

  /** Runs one input and everything checked after it; returns the problems. */
  async function check(chunks: Buffer[]): Promise<{ problems: string[]; result?: StreamResult }> {
    const problems: string[] = [];
    const logFrom = tb.logs.length;
    let result: StreamResult | undefined;
    try {
      result = await runStream(tb.port, chunks);
      if (result.problem !== undefined) problems.push(result.problem);
    } catch (e) {
      problems.push(`the connection failed: ${(e as Error).message}`);
    }
    checks += 1;
    try {
      await expectOthersUnaffected(tb.port, (checks % 2 === 0 ? 5 : 4) as Version);
    } catch (e) {
      problems.push(`other connections affected: ${(e as Error).message}`);
    }
    problems.push(...errorLogs(logFrom).map((m) => `the broker logged an error: ${m}`));
    const rss = process.memoryUsage().rss;
    rssMax = Math.max(rssMax, rss);
    if (rss - rssBaseline > RSS_GROWTH_LIMIT) problems.push(`RSS grew by ${Math.round((rss - rssBaseline) / 2 ** 20)} MiB`);
    return { problems, ...(result ? { result } : {}) };
  }

  const corpus: CorpusEntry[] = readCorpus();

  it('has a corpus to replay', () => {
    expect(corpus.length).toBeGreaterThan(0);
  });

  it.each(corpus.map((e) => [e.file, e] as const))('corpus %s: closed or answered, others unaffected', async (_file, entry) => {
    const { problems, result } = await check(entry.chunks);
    // The defect this corpus started with showed in the next logins: ten more, alternating users.
    problems.push(...(await failedLogins(tb.port, 10)));
    if (problems.length > 0)
      throw new Error(
        `${entry.file} (${entry.headers.what ?? entry.headers.failed ?? ''})\n  outcome: ${result?.outcome} ${result?.sent.join(', ')}\n  ${problems.join('\n  ')}`,
      );
  });

  for (const run of RUNS) {
    const title =
      run.only !== undefined
        ? `replays generated case ${run.seed}:${run.only}`
        : `fuzzes for ${run.seconds.toFixed(0)} s with seed ${run.seed} (BIFRO_FUZZ_SEED=${run.seed} to reproduce)`;
    it(
      title,
      async () => {
        aborted = true;
        const failures: string[] = [];
        let next = run.only ?? 0;
        let done = 0;
        const outcomes = { closed: 0, answered: 0, pending: 0 };
        let loggedIn = 0;
        const deadline = Date.now() + run.seconds * 1000;
        const worker = async (): Promise<void> => {
          for (;;) {
            if (failures.length >= MAX_FAILURES) return;
            if (run.only !== undefined ? next > run.only : Date.now() >= deadline) return;
            const c = generateCase(run.seed, next++);
            inflight.add(c);
            const others = [...inflight].filter((o) => o !== c).map((o) => `${o.seed}:${o.index}`);
            const { problems, result } = await check(c.chunks);
            inflight.delete(c);
            done += 1;
            if (result) outcomes[result.outcome] += 1;
            if (result?.loggedIn) loggedIn += 1;
            if (run.only !== undefined)
              console.log(
                `case ${c.seed}:${c.index}\n  ${c.notes.join('\n  ')}\n  ${streamOf(c).toString('hex')}\n  ${result?.outcome} ${result?.sent.join(', ')}`,
              );
            if (problems.length > 0) {
              const file =
                run.only === undefined
                  ? writeCorpusCase(
                      c,
                      problems.join('; '),
                      others.length > 0 ? [`cases in flight at the same time: ${others.join(', ')}`] : [],
                    )
                  : '(replay, not written)';
              failures.push(`${c.seed}:${c.index} → ${file}\n    ${problems.join('\n    ')}\n    ${c.notes.join('; ')}`);
            }
          }
        };
        await Promise.all(Array.from({ length: run.only !== undefined ? 1 : PARALLEL }, worker));
        aborted = false;
        console.log(
          `26-fuzz seed ${run.seed}: ${done} cases, ${loggedIn} past the login (${outcomes.closed} closed, ${outcomes.answered} answered, ${outcomes.pending} left waiting inside a packet), ` +
            `RSS max +${Math.round((rssMax - rssBaseline) / 2 ** 20)} MiB`,
        );
        if (failures.length > 0)
          throw new Error(`${failures.length} failing case(s), written to ${CORPUS_DIR}:\n  ${failures.join('\n  ')}`);
        if (run.only === undefined) expect(done).toBeGreaterThan(run.seconds * 5);
      },
      (run.seconds + 60) * 1000,
    );
  }

  it('kept memory and file descriptors bounded', async () => {
    expect(rssMax - rssBaseline).toBeLessThan(RSS_GROWTH_LIMIT);
    expect(await waitUntil(() => openFileDescriptors() <= fdBaseline + 20, 5000, 50)).toBe(true);
  });
});
