#!/usr/bin/env node
// A TCP host for the egress proxy tests (tests/e2e/egress_test.cpp): listens on --host
// (default 127.0.0.1) and --port (default any), prints "listening PORT" once, greets every
// connection with "hello from NAME\n" and answers each "ping" line with "pong\n".
import net from 'node:net';

const arg = (k, d) => process.argv.find((a) => a.startsWith(`--${k}=`))?.split('=')[1] ?? d;
const name = arg('name', 'target');
const server = net.createServer((s) => {
    s.write(`hello from ${name}\n`);
    s.on('data', (d) => { if (d.toString().includes('ping')) s.write('pong\n'); });
    s.on('error', () => {});
});
server.listen(Number(arg('port', '0')), arg('host', '127.0.0.1'), () => {
    process.stdout.write(`listening ${server.address().port}\n`);
});
process.stdin.on('end', () => process.exit(0));
process.stdin.resume();
process.on('SIGTERM', () => process.exit(0));
