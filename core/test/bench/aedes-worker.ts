import path from 'node:path';
import { Worker } from 'node:worker_threads';

/** aedes in a worker thread of the test process (jest cannot load the ES module aedes itself). */
export interface InProcessAedes {
  readonly port: number;
  stop(): Promise<void>;
}

export function startAedes(): Promise<InProcessAedes> {
  const worker = new Worker(path.join(__dirname, '..', '..', 'bench', 'aedes-server.mjs'), { workerData: { port: 0 } });
  return new Promise((resolve, reject) => {
    worker.once('error', reject);
    worker.once('message', (msg: { port: number }) => {
      resolve({
        port: msg.port,
        async stop() {
          await worker.terminate();
        },
      });
    });
  });
}
