import type { Duplex } from 'node:stream';
import type { ClientInfo, Storage } from '@bifro/spi';
import type { BrokerConfig } from '../base/config-types';
import type { Clock } from '../base/clock';
import type { Logger } from '../base/logger';
import { describeError } from '../base/errors';
import type { Engine } from '../broker/engine';
import type { NodeDrain } from '../broker/node-drain';
import type { Topology, TopologyStart } from '../broker/topology';
import type { BatchReply, ClusterView, ReceivedMessage, RunningCluster } from '../cluster/cluster-view';
import type { PublishProperties } from '../codec/publish-codec';
import { CORE_VERSION } from '../plugin-host/core-version';
import { MqttConnection } from '../protocol/connection';
import type { ClusterRouter } from '../routing/cluster-router';
import { servedHere, type SharedGroupMatch, type SharedGroupRef } from '../routing/shared-group';
import { PROTOCOL_TOPIC_LIMITS, validateTopicName } from '../routing/topic';
import { TopicTrie } from '../routing/topic-trie';
import { isReservedTopic } from '../security/secure-defaults';
import { CountedWaiter } from '../session/counted-waiter';
import { Message } from '../session/message';
import type { Session, SessionWill, WriteWaiter } from '../session/session';
import type { ConnectionOrigin } from '../transport/connection-origin';
import { ClusterSessions } from './cluster-sessions';

/** How long a SUBACK waits at most for the routes of its subscriptions to be written (NATS away: it goes anyway). */
const ANNOUNCE_WAIT_MS = 2000;

/** What a cluster node is built from, before the engine exists. */
export interface ClusterTopologyOptions {
  readonly config: BrokerConfig;
  readonly logger: Logger;
  readonly clock: Clock;
  /** The routing seam, counting the routes this node announces. */
  readonly router: ClusterRouter<Session>;
  /** A draining node's answers override the balancer plugin's (docs/cluster.md § Drain and removal). */
  readonly drain: NodeDrain;
  readonly storage: Storage;
  /** The storage plugin's name, for the warning about storage the nodes do not share. */
  readonly storageName: string | undefined;
}

/**
 * A node of a cluster on NATS JetStream (docs/cluster.md, D37). Everything that makes a broker a
 * cluster node is here and in `cluster/`: the session registry with leases and fencing
 * ({@link ClusterSessions}, `cluster/session-owners.ts`), routes and their confirmation,
 * cross-node delivery both ways, drain. Until {@link start} (the listeners just bound) it serves
 * like a standalone broker.
 */
export class ClusterTopology implements Topology {
  private engine: Engine | undefined;
  private running: RunningCluster | undefined;
  private sessions: ClusterSessions | undefined;

  constructor(private readonly opts: ClusterTopologyOptions) {}

  /** The engine it serves; called once, by the composition root. */
  bind(engine: Engine): void {
    this.engine = engine;
  }

  accept(socket: Duplex, origin: ConnectionOrigin): void {
    new MqttConnection(socket, origin, this.engine!);
  }

  serving(): boolean {
    return this.sessions === undefined || this.sessions.holdsLease();
  }

  claim(client: ClientInfo, clean: boolean, persistent: boolean, will: SessionWill | undefined): true | Promise<boolean> {
    return this.sessions === undefined ? true : this.sessions.claim(client, clean, persistent, will);
  }

  abandoned(client: ClientInfo): void {
    this.sessions?.abandoned(client);
  }

  groupsHere(groups: readonly SharedGroupMatch<Session>[], fromNode: readonly SharedGroupRef[] | undefined): boolean[] | undefined {
    return this.running === undefined ? undefined : servedHere(groups, fromNode);
  }

  forward(
    tenantId: string,
    msg: Message,
    waiter: WriteWaiter | undefined,
    groups: readonly SharedGroupMatch<Session>[],
    here: boolean[] | undefined,
  ): number {
    return this.running === undefined ? 0 : this.running.forward(tenantId, msg, waiter, groups, here);
  }

  announced(): Promise<void> | undefined {
    const running = this.running;
    if (running === undefined) return undefined;
    return new Promise<void>((resolve) => {
      const timer = setTimeout(resolve, ANNOUNCE_WAIT_MS);
      void running.routesWritten().then(() => {
        clearTimeout(timer);
        resolve();
      });
    });
  }

  /**
   * With storage the nodes share, which holds every node's sessions, nothing: a node takes back
   * only its own, from the registry, once it joined. With a storage of its own, its sessions.
   */
  restore(): Promise<number> {
    if (this.opts.storage.shared === true) return Promise.resolve(0);
    this.opts.logger.warn(
      { plugin: this.opts.storageName },
      'cluster mode with storage the nodes do not share (plugins.storage): a persistent session stays on its node, and moves without its inbox; remove plugins.storage to use @bifro/plugin-storage-nats',
    );
    return this.engine!.sessions.restore();
  }

  /**
   * Joins the cluster: membership, routes, forwarding (loaded only now: a standalone broker never
   * requires NATS). The node id: `cluster.nodeId`, else `<nodeId>-<port of the first listener as
   * bound>`, unique among brokers sharing a host and the same across restarts on fixed ports.
   */
  start({ bound, startedAt, load }: TopologyStart): ClusterView {
    const { config, logger, clock, drain, storage } = this.opts;
    const engine = this.engine!;
    const clusterConfig = config.cluster!;
    const nodeId = clusterConfig.nodeId ?? `${config.nodeId}-${bound[0]?.port ?? 0}`;
    // Storage a whole cluster shares holds every node's sessions: a node takes back only its own, from the registry.
    const sharedStorage = storage.shared === true;
    // eslint-disable-next-line @typescript-eslint/no-require-imports
    const { startCluster } = require('../cluster') as typeof import('../cluster');
    const running = startCluster({
      cluster: clusterConfig,
      nodeId,
      version: CORE_VERSION,
      startedAt,
      listeners: bound.map((l) => `${l.host}:${l.port}`),
      load,
      logger,
      localRoutes: this.opts.router,
      newIndex: () => new TopicTrie<string>(),
      deliver: (messages, done) => this.deliverFromNode(messages, done),
      deliverHere: (message, delivered, accept) => this.deliverHere(message, delivered, accept),
      localSubscribers: (tenantId, topic) => engine.router.match(tenantId, topic).direct.map((m) => m.subscriber.key),
      cameFrom: (key, since) => this.sessions?.cameFrom(key, since),
      clock,
      draining: () => drain.draining,
      drainRequest: (request) => drain.handle(request),
      // Quotas cluster-wide: the retained totals of a shared store are counted by the store.
      usage: engine.usage,
      sharedStorage,
    });
    this.running = running;
    drain.attach({
      nodes: () => running.nodes(),
      listenerNames: bound.map((l) => l.name),
      announce: () => running.announce(),
      sweep: (perSecond, active) => engine.redirects.drain(perSecond, active),
      nodeId: running.nodeId,
      connections: () => engine.connections.size,
      relay: (node, request) => running.relayDrain(node, request),
    });
    this.sessions = new ClusterSessions(
      running.nodeId,
      running.sessions,
      engine.sessions,
      storage,
      sharedStorage,
      logger,
      clock,
      (node, tenantId, filter) => running.hasRoute(node, tenantId, filter),
      (key, from, handedOver) => running.sessionArrived(key, from, handedOver),
    );
    return running;
  }

  /** Forwarding stops first (nothing more leaves this node), then the node leaves: its key deleted, the NATS connection drained. */
  async stop(): Promise<void> {
    const running = this.running;
    this.running = undefined;
    await running?.stop();
  }

  /** A message (a will this node published) for the sessions here that `accept` takes (see DeliverHere), each once. */
  private deliverHere(r: ReceivedMessage, delivered: Set<string>, accept: (key: string) => boolean): void {
    if (this.sessions === undefined || !this.serving()) return;
    this.engine!.publishOnly(r.tenantId, receivedMessage(r, this.engine!.now()), (s) => {
      if (delivered.has(s.key) || !accept(s.key)) return false;
      delivered.add(s.key);
      return true;
    });
  }

  /**
   * Messages another node forwarded: matched and delivered here like a local publish, but never
   * forwarded again nor retained (each node's retained store is its own in this part). The
   * batch's QoS 1/2 messages hold one waiter, as a PUBACK would, so the reply waits for this
   * node's storage.
   */
  private deliverFromNode(messages: readonly ReceivedMessage[], done: (reply: BatchReply) => void): void {
    const engine = this.engine!;
    // Without its lease this node serves no session (a lapse just seen fences them first): refused, the sender retries.
    if (!this.serving()) {
      done('refused');
      return;
    }
    const waiter = new BatchWaiter(done);
    const now = engine.now();
    for (const r of messages) {
      // The sending node checked it; a frame is still not trusted with what the router relies on ($SYS is per node).
      if (!validateTopicName(r.topic, PROTOCOL_TOPIC_LIMITS).ok || isReservedTopic(r.topic)) {
        engine.logger.warn({ tenantId: r.tenantId, topic: r.topic }, 'dropped a forwarded message with an invalid topic');
        continue;
      }
      const msg = receivedMessage(r, now);
      try {
        engine.publish(r.tenantId, msg, r.qos === 0 ? undefined : waiter, r.groups);
      } catch (err) {
        engine.logger.error({ tenantId: r.tenantId, topic: r.topic, err: describeError(err) }, 'forwarded message not distributed');
        if (r.qos !== 0) {
          waiter.hold();
          waiter.fail(err);
        }
      }
    }
    waiter.release();
  }
}

/** A forwarded message as the broker's `Message`, its expiry counted from `now`. */
function receivedMessage(r: ReceivedMessage, now: number): Message {
  return new Message(
    r.topic,
    r.payload,
    r.qos,
    r.retain,
    receivedProperties(r),
    now,
    r.expiryMs === undefined ? 0 : now + r.expiryMs,
    r.publisherClientId,
  );
}

/** Settles once every storage write of a forwarded batch is done: the sending node's reply. */
class BatchWaiter extends CountedWaiter {
  constructor(private readonly done: (reply: BatchReply) => void) {
    super();
  }

  protected settled(failed: boolean): void {
    this.done(failed ? 'failed' : 'delivered');
  }
}

/**
 * The v5 properties a forwarded message carries, or undefined when it has none: like a local
 * PUBLISH without properties, its encoding per variant is then shared by every subscriber.
 */
function receivedProperties(r: ReceivedMessage): PublishProperties | undefined {
  if (
    r.payloadFormatIndicator === undefined &&
    r.expiryMs === undefined &&
    r.contentType === undefined &&
    r.responseTopic === undefined &&
    r.correlationData === undefined &&
    r.userProperties === undefined
  )
    return undefined;
  return {
    payloadFormatIndicator: r.payloadFormatIndicator,
    // The interval left [MQTT-3.3.2-6]; the deliveries recompute it from expiresAt.
    messageExpiryInterval: r.expiryMs === undefined ? undefined : Math.ceil(r.expiryMs / 1000),
    contentType: r.contentType,
    responseTopic: r.responseTopic,
    correlationData: r.correlationData,
    userProperties: r.userProperties,
  };
}
