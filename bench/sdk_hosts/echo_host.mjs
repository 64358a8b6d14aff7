#!/usr/bin/env node
// bench (d): the Node.js SDK's tool host (sdk/node, `runToolHost`) with one tool, `n_echo`,
// answering its arguments ({"s": …}) as they came: what a host written with the SDK costs per
// call, beside the test host's bare wire layer.
import { runToolHost } from '../../sdk/node/src/tool-host.mjs';

runToolHost({
    tools: [{
        name: 'n_echo',
        description: 'Echoes its arguments',
        capabilities: ['read-only'],
        parameters: { type: 'object', properties: { s: { type: 'string' } }, required: ['s'] },
        run: (args) => args,
    }],
});
