// meith for Node.js: write a tool host (./tool-host.mjs) and call the daemon (./client.mjs).
export * from './tool-host.mjs';
export * from './client.mjs';
