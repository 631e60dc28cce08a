/** Entry point of one load-generating worker thread: an Agent driven by the coordinator's messages. */
import { parentPort, workerData } from 'node:worker_threads';
import { Agent, type AgentInit, type FromAgent, type ToAgent } from './agent';

const port = parentPort;
if (port === null) throw new Error('worker.js runs as a worker thread of the load generator');
const agent = new Agent(workerData as AgentInit, (msg: FromAgent) => port.postMessage(msg));
port.on('message', (msg: ToAgent) => agent.handle(msg));
port.postMessage({ type: 'hello' } satisfies FromAgent);
