/** Fan-out QoS 0: one publisher, M subscribers on the same topic. */
import { FlowWindow } from '../flow-window';
import { encodeConnect, encodePublishBatch, makePayload } from '../packets';
import { Qos0Publisher } from '../publishers';
import { cpuMetrics, openMany, warmUpAndMeasure, type Scenario } from '../scenario';

export type FanOutParams = {
  /** Subscribing connections. */
  subscribers: number;
  /** Payload bytes per message. */
  payload: number;
  /** Messages the publisher writes at once (one pre-encoded buffer). */
  batch: number;
  /** Published messages allowed ahead of the slowest subscriber. */
  window: number;
};

export const fanOut: Scenario<FanOutParams> = {
  name: 'fan-out',
  summary: '1 publisher → M subscribers on the same topic, QoS 0; deliveries/s summed over subscribers',
  defaults: { subscribers: 50, payload: 64, batch: 16, window: 1000 },
  quick: {},
  extraMs: () => 0,
  async run(ctx, p) {
    const topic = `bench/${ctx.tag}/out`;
    const ids = Array.from({ length: p.subscribers }, (_v, i) => `${ctx.tag}-os${i}`);
    const subs = await openMany(
      ctx,
      ids,
      ids.map((id) => encodeConnect(id)),
      50,
    );
    await Promise.all(subs.map((s) => s.subscribe(topic, 0, ctx.timing.setupTimeoutMs)));
    const pub = await ctx.open(`${ctx.tag}-op`, encodeConnect(`${ctx.tag}-op`));
    const slowest = (): number => {
      let min = Number.MAX_SAFE_INTEGER;
      for (const s of subs) if (s.splitter.publishes < min) min = s.splitter.publishes;
      return min;
    };
    const delivered = (): number => {
      let sum = 0;
      for (const s of subs) sum += s.splitter.publishes;
      return sum;
    };
    const window = new FlowWindow(p.window, slowest);
    for (const s of subs) s.onChunk = () => window.poke();
    const loop = new Qos0Publisher(pub, encodePublishBatch(topic, makePayload(p.payload), p.batch), p.batch, window);
    window.start();
    loop.start();
    try {
      const m = await warmUpAndMeasure(ctx, () => ({ delivered: delivered(), sent: window.sent }));
      if (m.deltas.delivered === 0) throw new Error('no subscriber received a message in the measured window');
      return {
        scenario: this.name,
        params: p,
        metrics: {
          delivered: {
            label: `fan-out QoS0 1→${p.subscribers}`,
            value: m.deltas.delivered / m.seconds,
            unit: 'deliveries/s',
            better: 'higher',
          },
          sent: { label: 'published', value: m.deltas.sent / m.seconds, unit: 'msg/s', better: 'higher' },
          lost: { label: 'written off after stalls', value: window.lost, unit: 'msg', better: 'lower' },
          ...cpuMetrics(m),
        },
        headline: ['delivered'],
        notes: window.stalls > 0 ? [`${window.stalls} stall(s): ${window.lost} published messages did not reach every subscriber`] : [],
      };
    } finally {
      loop.stop();
      window.stop();
    }
  },
};
