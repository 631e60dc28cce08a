import mqtt, { type IClientOptions, type MqttClient } from 'mqtt';
import { HOST, connectAsync } from './mqtt-helpers';

/** A subscriber that fails over between brokers, and what it received by number (how many times each). */
export interface FailoverSubscriber {
  readonly client: MqttClient;
  readonly got: Map<number, number>;
}

/** Adds the subscriber's client to `clients` (ended by the suite's afterAll) and returns it. */
export function track(clients: MqttClient[], sub: FailoverSubscriber): FailoverSubscriber {
  clients.push(sub.client);
  return sub;
}

/**
 * A subscriber that fails over between brokers as fleets do: one MQTT.js client (so its QoS 2
 * state survives the reconnect) with `ports` in order, v5, a persistent session; it counts what it
 * receives by number (the payload).
 */
export function startFailoverSubscriber(ports: number[], clientId: string, opts: IClientOptions = {}): FailoverSubscriber {
  const got = new Map<number, number>();
  const client = mqtt.connect({
    servers: ports.map((port) => ({ host: HOST, port })),
    clientId,
    protocolVersion: 5,
    clean: false,
    properties: { sessionExpiryInterval: 600 },
    reconnectPeriod: 300,
    // A node without its lease (cut off from NATS) refuses CONNECT (Server unavailable): devices try again.
    reconnectOnConnackError: true,
    connectTimeout: 5000,
    ...opts,
  });
  client.on('error', () => undefined);
  client.on('message', (_topic, payload) => {
    const n = Number(payload.toString());
    got.set(n, (got.get(n) ?? 0) + 1);
  });
  return { client, got };
}

/**
 * Publishes 1..count at `qos` with `window` in flight, retrying every number whose PUBACK/PUBREC
 * failed (v5 reason code ≥ 0x80, or the connection dropped) until it is acknowledged or `runMs`
 * ends. Resolves with the acknowledged numbers and how many attempts failed. The client goes to
 * `clients`.
 */
export async function publishNumberedUntil(
  clients: MqttClient[],
  port: number,
  topic: string,
  count: number,
  qos: 1 | 2,
  window: number,
  runMs: number,
  onProgress: (acked: number) => void,
  opts: IClientOptions = {},
): Promise<{ acked: Set<number>; failures: number }> {
  const { client } = await connectAsync(port, {
    clientId: `pub-${topic}`,
    protocolVersion: 5,
    reconnectPeriod: 300,
    reconnectOnConnackError: true,
    ...opts,
  });
  clients.push(client);
  client.on('error', () => undefined);
  const acked = new Set<number>();
  const todo: number[] = [];
  for (let i = 1; i <= count; i++) todo.push(i);
  let inFlight = 0;
  let failures = 0;
  const deadline = Date.now() + runMs;
  return new Promise((resolve) => {
    const pump = (): void => {
      if (acked.size === count || Date.now() > deadline) {
        if (inFlight === 0) resolve({ acked, failures });
        return;
      }
      while (inFlight < window && todo.length > 0 && client.connected) {
        const n = todo.shift()!;
        inFlight++;
        client.publish(topic, String(n), { qos }, (err) => {
          inFlight--;
          if (err === undefined || err === null) {
            acked.add(n);
            onProgress(acked.size);
          } else {
            failures++;
            // Sent again later: the broker did not take responsibility for it. The pump is woken
            // too: with nothing else queued or in flight it stopped polling, and the number would
            // wait for ever (every message of a window refused at once hung 46's NATS kill case).
            setTimeout(() => {
              todo.push(n);
              pump();
            }, 200);
          }
          pump();
        });
      }
      if (todo.length > 0 || inFlight > 0) setTimeout(pump, 50);
    };
    client.on('connect', pump);
    pump();
  });
}
