/**
 * What a scenario asks the load generator to do, as plain data a worker thread receives: the
 * connections (subscribers, publishers, idle clients), how publishers publish, and how the
 * connections are spread over the workers.
 */
import type { MqttVersion, QoS } from './packets';

export interface SubscriberPlan {
  readonly id: string;
  readonly filter: string;
  readonly qos: QoS;
  /** false: a persistent session (clean session 0 / clean start 0). */
  readonly clean: boolean;
}

export interface PublisherPlan {
  readonly id: string;
  readonly topic: string;
}

export interface PublishPlan {
  readonly qos: QoS;
  /** Payload bytes per message. */
  readonly payload: number;
  /** QoS 0: messages written at once (one pre-encoded buffer). */
  readonly batch: number;
  /** QoS 1/2: PUBLISH packets not yet completed, per publisher (lowered to the broker's receive maximum). */
  readonly inflight: number;
}

export interface IdlePlan {
  /** Client ids are `${prefix}${i}`. */
  readonly prefix: string;
  readonly count: number;
  readonly clean: boolean;
}

/** What every CONNECT of the run authenticates with. */
export interface Credentials {
  readonly username: string;
  readonly password?: string;
}

export interface Plan {
  readonly version: MqttVersion;
  /** User name and password in every CONNECT; none when absent. */
  readonly credentials?: Credentials;
  /** Keepalive (s) in every CONNECT; with > 0 the generator sends PINGREQ at half that interval. */
  readonly keepalive: number;
  /** Handshakes in progress at a time, over all workers. */
  readonly concurrency: number;
  readonly subscribers: readonly SubscriberPlan[];
  readonly publishers: readonly PublisherPlan[];
  readonly publish: PublishPlan;
  readonly idle: IdlePlan | null;
  /** Total messages/s over all publishers; 0 = as fast as the windows allow. */
  readonly rate: number;
  /**
   * End-to-end flow window over every publisher: messages published but not yet received, counted
   * against the sum of the subscribers' counts or against the subscriber that received least.
   */
  readonly window: { readonly size: number; readonly completion: 'sum' | 'min' } | null;
  /** Publishers write the send time into each payload; subscribers record the latency. */
  readonly latency: boolean;
}

/** Every connection the plan opens. */
export function connectionCount(plan: Plan): number {
  return plan.subscribers.length + plan.publishers.length + (plan.idle?.count ?? 0);
}

/** The indexes of the subscribers, publishers and idle clients one worker runs, round robin. */
export interface Share {
  readonly subscribers: readonly number[];
  readonly publishers: readonly number[];
  readonly idle: readonly number[];
}

export function shareOf(plan: Plan, worker: number, workers: number): Share {
  const subscribers: number[] = [];
  const publishers: number[] = [];
  const idle: number[] = [];
  for (let i = worker; i < plan.subscribers.length; i += workers) subscribers.push(i);
  // Publishers continue the round robin where the subscribers stopped, so one subscriber and
  // many publishers (fan-in) do not all land on worker 0.
  const offset = plan.subscribers.length % workers;
  for (let j = 0; j < plan.publishers.length; j++) if ((j + offset) % workers === worker) publishers.push(j);
  for (let k = worker; k < (plan.idle?.count ?? 0); k += workers) idle.push(k);
  return { subscribers, publishers, idle };
}
