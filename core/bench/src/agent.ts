/**
 * The part of a scenario one worker thread runs (or the main thread with `--workers 0`): its
 * share of the plan's connections, publishers and subscribers. It talks to the coordinator by
 * messages (setup → ready, start, stop → report) and publishes its counters in the shared state.
 */
import { BenchClient, type Endpoint } from './bench-client';
import { publishPayloadStart } from './frame-splitter';
import { FlowWindow, SharedLedger } from './flow-window';
import { Histogram, type HistogramData } from './histogram';
import {
  DISCONNECT,
  PINGREQ,
  encodeConnect,
  encodePublishBatch,
  encodePublishCycle,
  makePayload,
  nowNs,
  type MqttVersion,
} from './packets';
import { shareOf, type Plan, type Share } from './plan';
import { Pacer, Qos0Publisher, QosPublisher } from './publishers';
import { Phase, SharedState, Slot } from './shared-state';

export interface AgentInit {
  readonly target: Endpoint;
  readonly setupTimeoutMs: number;
  readonly plan: Plan;
  readonly worker: number;
  readonly workers: number;
  readonly buffer: SharedArrayBuffer;
}

/** setup → ready; start; halt (stop publishing) → halted; stop (close everything) → report. */
export type ToAgent = { readonly type: 'setup' } | { readonly type: 'start' } | { readonly type: 'halt' } | { readonly type: 'stop' };

export interface AgentReport {
  readonly latency: HistogramData | null;
  /** Flow window stalls this worker detected. */
  readonly stalls: number;
  readonly notes: readonly string[];
}

export type FromAgent =
  | { readonly type: 'hello' }
  | { readonly type: 'ready'; readonly connackMs: readonly number[]; readonly notes: readonly string[] }
  | { readonly type: 'failed'; readonly reason: string }
  | { readonly type: 'halted' }
  | { readonly type: 'report'; readonly report: AgentReport };

/** Up to this many subscribers, each chunk a subscriber reads re-checks the flow window (the check reads every subscriber's count). */
const POKE_LIMIT = 64;

/** Time allowed to delete persistent sessions at the end (reconnecting with a clean session). */
const CLEANUP_MS = 3000;

interface Startable {
  start(): void;
  stop(): void;
}

export class Agent {
  private readonly state: SharedState;
  private readonly share: Share;
  private readonly version: MqttVersion;
  private readonly clients: BenchClient[] = [];
  private readonly subscribers: BenchClient[] = [];
  private readonly publishers: BenchClient[] = [];
  private readonly loops: Startable[] = [];
  private readonly notes: string[] = [];
  private readonly histogram: Histogram | null;
  private window: FlowWindow | null = null;
  private pacer: Pacer | null = null;
  private pinger: NodeJS.Timeout | null = null;
  private inflight: number;
  private failed = false;
  private stopping = false;
  /** Receivers wake waiting publishers after each chunk (else publishers poll the window). */
  private readonly pokes: boolean;

  constructor(
    private readonly init: AgentInit,
    private readonly post: (msg: FromAgent) => void,
  ) {
    const { plan } = init;
    this.state = new SharedState(init.buffer, plan.subscribers.length);
    this.share = shareOf(plan, init.worker, init.workers);
    this.version = plan.version;
    this.inflight = plan.publish.inflight;
    this.histogram = plan.latency ? new Histogram() : null;
    this.pokes = plan.subscribers.length <= POKE_LIMIT;
  }

  handle(msg: ToAgent): void {
    let run: Promise<void>;
    switch (msg.type) {
      case 'setup':
        run = this.setup();
        break;
      case 'start':
        run = this.start();
        break;
      case 'halt':
        this.halt();
        run = Promise.resolve();
        this.post({ type: 'halted' });
        break;
      case 'stop':
        run = this.stop();
        break;
    }
    run.catch((err: unknown) => this.fail(err instanceof Error ? err.message : String(err)));
  }

  /** Closes every connection at once (the coordinator gave up). */
  abort(): void {
    this.stopping = true;
    this.halt();
    for (const c of this.clients) c.close();
  }

  private fail(reason: string): void {
    if (this.failed || this.stopping) return;
    this.failed = true;
    this.post({ type: 'failed', reason });
  }

  private async open(id: string, clean: boolean): Promise<BenchClient> {
    if (this.failed || this.stopping) throw new Error('stopped');
    const { plan, target, setupTimeoutMs } = this.init;
    const client = await BenchClient.open(
      target,
      id,
      encodeConnect(id, plan.keepalive, clean, this.version, plan.credentials),
      setupTimeoutMs,
      this.version,
    );
    if (this.failed || this.stopping) {
      client.close();
      throw new Error('stopped');
    }
    this.clients.push(client);
    this.state.add(Slot.CONNECTED, 1);
    client.onLost = (reason) => this.fail(`${id}: ${reason}`);
    return client;
  }

  /** Opens `count` connections with at most `concurrency` handshakes at a time. */
  private async openMany(count: number, open: (i: number) => Promise<BenchClient>): Promise<BenchClient[]> {
    const out = new Array<BenchClient>(count);
    const concurrency = Math.max(1, Math.ceil(this.init.plan.concurrency / this.init.workers));
    let next = 0;
    const lane = async (): Promise<void> => {
      while (next < count) {
        const i = next++;
        out[i] = await open(i);
      }
    };
    const lanes: Promise<void>[] = [];
    for (let l = 0; l < Math.min(concurrency, count); l++) lanes.push(lane());
    await Promise.all(lanes);
    return out;
  }

  private async setup(): Promise<void> {
    const { plan, setupTimeoutMs } = this.init;
    const subs = this.share.subscribers.map((i) => plan.subscribers[i]!);
    const subClients = await this.openMany(subs.length, (k) => this.open(subs[k]!.id, subs[k]!.clean));
    for (let k = 0; k < subClients.length; k++) {
      const client = subClients[k]!;
      const slot = this.share.subscribers[k]!;
      const spec = subs[k]!;
      if (spec.filter.startsWith('$share/') && !client.limits.sharedSubscriptions)
        throw new Error('the broker announced in CONNACK that it does not support shared subscriptions');
      client.autoAck = spec.qos > 0;
      client.onChunk = this.pokes
        ? () => {
            this.state.setReceived(slot, client.splitter.publishes);
            this.window?.poke();
          }
        : () => this.state.setReceived(slot, client.splitter.publishes);
      if (this.histogram !== null) this.recordLatency(client, this.histogram);
      this.subscribers.push(client);
    }
    await Promise.all(subClients.map((c, k) => c.subscribe(subs[k]!.filter, subs[k]!.qos, setupTimeoutMs)));

    const pubs = this.share.publishers.map((j) => plan.publishers[j]!);
    const pubClients = await this.openMany(pubs.length, (k) => this.open(pubs[k]!.id, true));
    for (const c of pubClients) {
      if (plan.publish.qos > c.limits.maximumQoS)
        throw new Error(`the broker accepts PUBLISH up to QoS ${c.limits.maximumQoS} only (CONNACK maximum QoS), not ${plan.publish.qos}`);
      if (c.limits.receiveMaximum < this.inflight) {
        this.notes.push(`inflight lowered from ${this.inflight} to the broker's receive maximum ${c.limits.receiveMaximum}`);
        this.inflight = c.limits.receiveMaximum;
      }
      this.publishers.push(c);
    }

    const idle = this.share.idle;
    const idleClients =
      plan.idle === null ? [] : await this.openMany(idle.length, (k) => this.open(`${plan.idle!.prefix}${idle[k]}`, plan.idle!.clean));
    this.post({ type: 'ready', connackMs: idleClients.map((c) => c.connackMs), notes: this.notes.splice(0) });
  }

  /** Latency subscribers read the send time at the start of each payload. */
  private recordLatency(client: BenchClient, histogram: Histogram): void {
    const version = this.version;
    const state = this.state;
    client.splitter.inspectPublishes = true;
    client.onPublish = (first, buf, start, end) => {
      if (state.phase !== Phase.MEASURE) return;
      const at = publishPayloadStart(first, buf, start, end, version);
      if (at < 0 || at + 8 > end) return;
      histogram.record((nowNs() - buf.readDoubleBE(at)) / 1000);
    };
  }

  private async start(): Promise<void> {
    const { plan, workers } = this.init;
    const state = this.state;
    if (plan.window !== null) {
      const completed = plan.window.completion === 'sum' ? () => state.receivedSum() : () => state.receivedMin();
      // Receivers in other threads cannot wake this thread's publishers, and with many receivers
      // reading the completion after every chunk would cost more than it saves: poll every millisecond.
      const poll = workers > 1 || !this.pokes;
      this.window = new FlowWindow(plan.window.size, completed, 250, new SharedLedger(state), poll ? 1 : 0);
      this.window.start();
    }
    const { qos, payload: size, batch } = plan.publish;
    const payload = makePayload(size);
    const paced: (Qos0Publisher | QosPublisher)[] = [];
    for (let k = 0; k < this.publishers.length; k++) {
      const client = this.publishers[k]!;
      const topic = plan.publishers[this.share.publishers[k]!]!.topic;
      let loop: Qos0Publisher | QosPublisher;
      if (qos === 0) {
        const packets = encodePublishBatch(topic, payload, batch, this.version);
        const stampAt = plan.latency ? packets.length / batch - size : -1;
        loop = new Qos0Publisher(client, packets, batch, this.window, { state, stampAt });
      } else {
        const cycle = encodePublishCycle(topic, payload, Math.min(0xffff, this.inflight * 2), this.version, qos);
        const stampAt = plan.latency ? cycle[0]!.length - size : -1;
        loop = new QosPublisher(client, cycle, this.inflight, { qos, window: this.window, state, stampAt });
      }
      paced.push(loop);
      this.loops.push(loop);
    }
    if (plan.rate > 0 && plan.publishers.length > 0) {
      this.pacer = new Pacer(plan.rate / plan.publishers.length, paced, state);
      this.pacer.start();
    }
    for (const l of this.loops) l.start();
    if (plan.keepalive > 0) {
      this.pinger = setInterval(
        () => {
          for (const c of this.clients) if (!c.closed) c.socket.write(PINGREQ);
        },
        (plan.keepalive * 1000) / 2,
      );
    }
  }

  private halt(): void {
    this.pacer?.stop();
    for (const l of this.loops) l.stop();
    this.window?.stop();
    if (this.pinger !== null) clearInterval(this.pinger);
    this.pinger = null;
  }

  private async stop(): Promise<void> {
    this.stopping = true;
    this.halt();
    const report: AgentReport = {
      latency: this.histogram === null ? null : this.histogram.data(),
      stalls: this.window?.stalls ?? 0,
      notes: this.notes,
    };
    for (const c of this.clients) c.close();
    await this.deletePersistentSessions();
    this.post({ type: 'report', report });
  }

  /** Reconnects every persistent client with a clean session, which deletes its session on the broker. */
  private async deletePersistentSessions(): Promise<void> {
    const { plan, target } = this.init;
    const ids: string[] = [];
    for (const i of this.share.subscribers) if (!plan.subscribers[i]!.clean) ids.push(plan.subscribers[i]!.id);
    if (plan.idle !== null && !plan.idle.clean) for (const k of this.share.idle) ids.push(`${plan.idle.prefix}${k}`);
    if (ids.length === 0) return;
    const deadline = Date.now() + CLEANUP_MS;
    let next = 0;
    let left = 0;
    const lane = async (): Promise<void> => {
      while (next < ids.length) {
        const id = ids[next++]!;
        const ms = deadline - Date.now();
        if (ms <= 0) {
          left++;
          continue;
        }
        try {
          const c = await BenchClient.open(target, id, encodeConnect(id, 0, true, this.version, plan.credentials), ms, this.version);
          c.socket.end(DISCONNECT);
        } catch {
          left++;
        }
      }
    };
    await Promise.all(Array.from({ length: Math.min(20, ids.length) }, () => lane()));
    if (left > 0) this.notes.push(`${left} persistent session(s) could not be deleted at the end (they expire on the broker's terms)`);
  }
}
