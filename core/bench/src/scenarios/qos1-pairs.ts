/** QoS 1 pairs: K publisher → subscriber pairs, each on its own topic, with an inflight window. */
import { encodeConnect, encodePublishCycle, makePayload } from '../packets';
import { Qos1Publisher } from '../publishers';
import { cpuMetrics, openMany, warmUpAndMeasure, type Scenario } from '../scenario';

export type Qos1PairsParams = {
  /** Publisher/subscriber pairs. */
  pairs: number;
  /** Unacknowledged QoS 1 PUBLISH packets allowed per publisher. */
  inflight: number;
  /** Payload bytes per message. */
  payload: number;
  /** 1: subscribers keep persistent sessions (clean session 0), so every message goes through the broker's storage before PUBACK. */
  persistent: number;
};

export const qos1Pairs: Scenario<Qos1PairsParams> = {
  name: 'qos1-pairs',
  summary: 'K publisher/subscriber pairs, QoS 1 both ways with an inflight window per publisher; acked publishes/s and deliveries/s',
  defaults: { pairs: 10, inflight: 64, payload: 64, persistent: 0 },
  quick: {},
  extraMs: () => 0,
  async run(ctx, p) {
    if (p.inflight < 1 || p.inflight > 32767) throw new Error(`inflight must be 1..32767, got ${p.inflight}`);
    const topics = Array.from({ length: p.pairs }, (_v, i) => `bench/${ctx.tag}/q1/${i}`);
    const subIds = topics.map((_t, i) => `${ctx.tag}-qs${i}`);
    const pubIds = topics.map((_t, i) => `${ctx.tag}-qp${i}`);
    const subs = await openMany(
      ctx,
      subIds,
      subIds.map((id) => encodeConnect(id, 0, p.persistent === 0)),
      50,
    );
    for (const s of subs) s.autoAck = true;
    await Promise.all(subs.map((s, i) => s.subscribe(topics[i]!, 1, ctx.timing.setupTimeoutMs)));
    const pubClients = await openMany(
      ctx,
      pubIds,
      pubIds.map((id) => encodeConnect(id)),
      50,
    );
    const payload = makePayload(p.payload);
    const cycle = Math.min(0xffff, p.inflight * 2);
    const pubs = pubClients.map((c, i) => new Qos1Publisher(c, encodePublishCycle(topics[i]!, payload, cycle), p.inflight));
    for (const pub of pubs) pub.start();
    try {
      const m = await warmUpAndMeasure(ctx, () => {
        let acked = 0;
        let delivered = 0;
        for (const pub of pubs) acked += pub.acked;
        for (const s of subs) delivered += s.splitter.publishes;
        return { acked, delivered };
      });
      if (m.deltas.acked === 0) throw new Error('no PUBACK received in the measured window');
      if (m.deltas.delivered === 0) throw new Error('no subscriber received a message in the measured window');
      return {
        scenario: this.name,
        params: p,
        metrics: {
          acked: {
            label: `QoS1 ${p.pairs} pairs${p.persistent ? ' persistent' : ''} acked`,
            value: m.deltas.acked / m.seconds,
            unit: 'msg/s',
            better: 'higher',
          },
          delivered: {
            label: `QoS1 ${p.pairs} pairs${p.persistent ? ' persistent' : ''} delivered`,
            value: m.deltas.delivered / m.seconds,
            unit: 'msg/s',
            better: 'higher',
          },
          ...cpuMetrics(m),
        },
        headline: ['acked', 'delivered'],
        notes: [],
      };
    } finally {
      for (const pub of pubs) pub.stop();
    }
  },
};

/** The same pairs with persistent subscriber sessions: QoS 1 through the broker's storage (level by default in Bifro). */
export const qos1Persistent: Scenario<Qos1PairsParams> = {
  ...qos1Pairs,
  name: 'qos1-persistent',
  summary: 'qos1-pairs with persistent subscriber sessions (clean session 0): every message is stored before PUBACK',
  defaults: { ...qos1Pairs.defaults, persistent: 1 },
};
