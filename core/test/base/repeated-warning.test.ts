import { RepeatedWarning } from '../../src/base/repeated-warning';
import { capturingLogger, type LogLine } from '../plugin-host/plugin-host-fixtures';

/** Waits for the warning's sweep (every `quietMs` here) to have run at least once more. */
const sweep = (): Promise<void> => new Promise((r) => setTimeout(r, 80));

describe('RepeatedWarning: one line per episode', () => {
  let now: number;
  let lines: LogLine[];
  let warning: RepeatedWarning;
  beforeEach(() => {
    now = 1_000_000;
    const captured = capturingLogger();
    lines = captured.lines;
    warning = new RepeatedWarning(
      captured.logger,
      (key) => `forwarding to node ${key}`,
      () => now,
      50,
      200,
    );
  });
  afterEach(() => warning.stop());
  const messages = (): string[] => lines.map((l) => `${l.level} ${String(l.msg)}`);

  it('logs the first occurrence with its fields, counts the rest, and says when the episode ended', async () => {
    for (let i = 0; i < 100; i++) warning.report('b', { node: 'b', i }, 'forwarding 1 message(s) to node b failed');
    expect(messages()).toEqual(['40 forwarding 1 message(s) to node b failed']);
    expect(lines[0]).toMatchObject({ node: 'b', i: 0 });
    expect(warning.count('b')).toBe(100);
    now += 60;
    await sweep();
    expect(messages()).toEqual([
      '40 forwarding 1 message(s) to node b failed',
      '30 forwarding to node b: no failure for 0.05 s, 100 in all',
    ]);
    expect(lines[1]).toMatchObject({ occurrences: 100, afterMs: 60 });
    expect(warning.count('b')).toBe(0);
    // The next failure opens a new episode, logged again.
    warning.report('b', { node: 'b' }, 'forwarding 1 message(s) to node b failed');
    expect(lines).toHaveLength(3);
  });

  it('reminds with the count while an episode lasts', async () => {
    for (let i = 0; i < 11; i++) warning.report('b', { node: 'b', i }, 'failed');
    now += 200;
    warning.report('b', { node: 'b', i: 11 }, 'failed');
    await sweep();
    const reminder = lines.find((l) => String(l.msg).includes('still failing'));
    expect(reminder).toMatchObject({ level: 40, node: 'b', i: 11, occurrences: 12, sinceMs: 200 });
    expect(String(reminder?.msg)).toBe('forwarding to node b: still failing, 12 times so far');
    expect(lines.filter((l) => l.msg === 'failed')).toHaveLength(1);
  });

  it('keeps episodes of different keys apart; a lone occurrence ends without a line', async () => {
    warning.report('b', {}, 'to b failed');
    warning.report('c', {}, 'to c failed');
    warning.report('c', {}, 'to c failed');
    expect(messages()).toEqual(['40 to b failed', '40 to c failed']);
    now += 60;
    await sweep();
    expect(messages()).toEqual(['40 to b failed', '40 to c failed', '30 forwarding to node c: no failure for 0.05 s, 2 in all']);
  });
});
