export * from './tool-host.js';
export * from './client.js';
