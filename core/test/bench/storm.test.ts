import path from 'node:path';
import { findMosquitto, launchBroker, type BrokerName } from '../../bench/src/broker-process';
import { runStorm } from '../../bench/src/storm';

/**
 * The fleet reconnect storm (`npm run bench:storm`) run briefly against the built broker and,
 * when installed, mosquitto: sanity only, no timing assertions. Every device gets its CONNACK with
 * its session present and every queued QoS 1 message, none refused.
 */
const REPO = path.resolve(__dirname, '..', '..', '..');
const mosquitto = findMosquitto() !== null;
/** mosquitto in both modes `bench:storm --mosquitto-persistence` offers. */
const brokers: { name: BrokerName; mosquittoPersistence: boolean }[] = [
  { name: 'bifro', mosquittoPersistence: false },
  ...(mosquitto
    ? [
        { name: 'mosquitto' as const, mosquittoPersistence: false },
        { name: 'mosquitto' as const, mosquittoPersistence: true },
      ]
    : []),
];

describe('bench:storm', () => {
  it.each(brokers)(
    '$name (mosquitto persistence $mosquittoPersistence): every device resumes its session and gets every queued message',
    async ({ name, mosquittoPersistence }) => {
      const broker = await launchBroker(name, { repoRoot: REPO, cpus: null, mosquittoPersistence });
      try {
        const r = await runStorm(broker, { devices: 40, messages: 3, spreadMs: 200, timeoutMs: 15_000 });
        expect({ refused: r.refused, lost: r.lost, sessionsLost: r.sessionsLost }).toEqual({ refused: 0, lost: 0, sessionsLost: 0 });
        expect(Number.isFinite(r.allConnackedMs)).toBe(true);
        expect(Number.isFinite(r.allDeliveredMs)).toBe(true);
        expect(r.allDeliveredMs).toBeGreaterThanOrEqual(0);
        expect(r.connackP99Ms).toBeGreaterThanOrEqual(r.connackP50Ms);
      } finally {
        await broker.stop();
      }
    },
    60_000,
  );
});
