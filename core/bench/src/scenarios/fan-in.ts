/** Fan-in QoS 0: N publishers, each on its own topic, one subscriber on a wildcard filter. */
import { FlowWindow } from '../flow-window';
import { encodeConnect, encodePublishBatch, makePayload } from '../packets';
import { Qos0Publisher } from '../publishers';
import { cpuMetrics, openMany, warmUpAndMeasure, type Scenario } from '../scenario';

export type FanInParams = {
  /** Publishing connections. */
  publishers: number;
  /** Payload bytes per message. */
  payload: number;
  /** Messages a publisher writes at once (one pre-encoded buffer). */
  batch: number;
  /** Messages allowed in flight between all publishers and the subscriber. */
  window: number;
};

export const fanIn: Scenario<FanInParams> = {
  name: 'fan-in',
  summary: 'N publishers → 1 subscriber on a wildcard filter, QoS 0; messages/s received by the subscriber',
  defaults: { publishers: 20, payload: 64, batch: 32, window: 10000 },
  quick: {},
  extraMs: () => 0,
  async run(ctx, p) {
    const base = `bench/${ctx.tag}/in`;
    const sub = await ctx.open(`${ctx.tag}-is`, encodeConnect(`${ctx.tag}-is`));
    await sub.subscribe(`${base}/+`, 0, ctx.timing.setupTimeoutMs);
    const ids = Array.from({ length: p.publishers }, (_v, i) => `${ctx.tag}-ip${i}`);
    const pubs = await openMany(
      ctx,
      ids,
      ids.map((id) => encodeConnect(id)),
      50,
    );
    const window = new FlowWindow(p.window, () => sub.splitter.publishes);
    sub.onChunk = () => window.poke();
    const payload = makePayload(p.payload);
    const loops = pubs.map((c, i) => new Qos0Publisher(c, encodePublishBatch(`${base}/${i}`, payload, p.batch), p.batch, window));
    window.start();
    for (const l of loops) l.start();
    try {
      const m = await warmUpAndMeasure(ctx, () => ({ received: sub.splitter.publishes, sent: window.sent }));
      if (m.deltas.received === 0) throw new Error('the subscriber received no message in the measured window');
      return {
        scenario: this.name,
        params: p,
        metrics: {
          received: { label: `fan-in QoS0 ${p.publishers}→1`, value: m.deltas.received / m.seconds, unit: 'msg/s', better: 'higher' },
          sent: { label: 'published', value: m.deltas.sent / m.seconds, unit: 'msg/s', better: 'higher' },
          lost: { label: 'written off after stalls', value: window.lost, unit: 'msg', better: 'lower' },
          ...cpuMetrics(m),
        },
        headline: ['received'],
        notes: window.stalls > 0 ? [`${window.stalls} stall(s): ${window.lost} QoS 0 messages never arrived`] : [],
      };
    } finally {
      for (const l of loops) l.stop();
      window.stop();
    }
  },
};
