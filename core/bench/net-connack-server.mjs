// The memory reference of the benchmark: a bare Node.js `net` server that answers every CONNECT
// with CONNACK and PINGREQ with PINGRESP, and keeps nothing per connection but the socket and
// one listener. Bifro's memory per idle connection is compared with this server's.
//
//   node core/bench/net-connack-server.mjs --port <n>   prints "listening <port>" once ready
import { Buffer } from 'node:buffer';
import net from 'node:net';
import process from 'node:process';

const HOST = '127.0.0.1';
const CONNACK_V3 = Buffer.from([0x20, 0x02, 0x00, 0x00]);
const CONNACK_V5 = Buffer.from([0x20, 0x03, 0x00, 0x00, 0x00]);
const PINGRESP = Buffer.from([0xd0, 0x00]);

const i = process.argv.indexOf('--port');
const port = i >= 0 ? Number(process.argv[i + 1]) : 0;
if (!Number.isInteger(port) || port < 0 || port > 65535) throw new Error(`invalid --port ${process.argv[i + 1]}`);

function onData(chunk) {
  // Whole small packets arrive in one chunk on loopback; the type is the first byte's high nibble.
  const type = chunk[0] >> 4;
  if (type === 1) {
    // Protocol level: after the fixed header (2 bytes for short CONNECTs) and the protocol name.
    const nameLength = chunk.readUInt16BE(2);
    this.write(chunk[4 + nameLength] === 5 ? CONNACK_V5 : CONNACK_V3);
  } else if (type === 12) this.write(PINGRESP);
}

function ignore() {}

const server = net.createServer({ noDelay: true }, (socket) => {
  socket.on('data', onData);
  socket.on('error', ignore);
});
server.listen(port, HOST, () => process.stdout.write(`listening ${server.address().port}\n`));
const shutdown = () => server.close(() => process.exit(0));
process.on('SIGTERM', shutdown);
process.on('SIGINT', shutdown);
