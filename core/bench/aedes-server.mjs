// aedes as a comparison broker for the benchmark: in-memory, no persistence plugin, one TCP
// listener on 127.0.0.1. Plain ESM because aedes is an ES module (and jest cannot require it).
//
//   node core/bench/aedes-server.mjs --port <n>   prints "listening <port>" once ready
//   new Worker(<this file>, { workerData: { port: 0 } })   posts { port } once ready
import net from 'node:net';
import process from 'node:process';
import { setTimeout } from 'node:timers';
import { isMainThread, parentPort, workerData } from 'node:worker_threads';
import { Aedes } from 'aedes';

const HOST = '127.0.0.1';

function portFromArgs(argv) {
  const i = argv.indexOf('--port');
  const port = i >= 0 ? Number(argv[i + 1]) : 0;
  if (!Number.isInteger(port) || port < 0 || port > 65535) throw new Error(`invalid --port ${argv[i + 1]}`);
  return port;
}

const port = isMainThread ? portFromArgs(process.argv.slice(2)) : Number(workerData?.port ?? 0);
const broker = await Aedes.createBroker({ maxClientsIdLength: 64 });
const server = net.createServer(broker.handle);
server.listen(port, HOST, () => {
  const bound = server.address().port;
  if (isMainThread) process.stdout.write(`listening ${bound}\n`);
  else parentPort.postMessage({ port: bound });
});

function shutdown() {
  server.close();
  broker.close(() => process.exit(0));
  setTimeout(() => process.exit(0), 2000).unref();
}
if (isMainThread) {
  process.on('SIGTERM', shutdown);
  process.on('SIGINT', shutdown);
}
