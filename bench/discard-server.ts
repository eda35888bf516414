/**
 * An HTTP server that takes any body and drops it, and answers a GET with BENCH_FILE_MIB MiB of
 * bytes: the ceiling of an HTTP client on this machine (the SDK's fetch), measured beside what
 * it moves through the service. Run as a process of its own, as the service is; prints its port.
 */
import { createServer } from 'node:http';
import type { AddressInfo } from 'node:net';

const body = Buffer.alloc(Number(process.env.BENCH_FILE_MIB ?? 256) * 2 ** 20, 7);
const server = createServer((request, response) => {
  if (request.method === 'GET') return void response.writeHead(200, { 'content-type': 'application/octet-stream' }).end(body);
  request.resume();
  request.once('end', () => response.writeHead(200, { 'content-type': 'application/json' }).end('[]'));
});
server.listen(0, '127.0.0.1', () => console.log((server.address() as AddressInfo).port));
