#!/usr/bin/env node
// An example one-shot exec tool: counts the words, lines and characters of a text.
//
//   [[sources]]
//   name = "word-count"
//   kind = "exec"
//   mode = "oneshot"
//   command = ["node", "exec-tools/word_count.mjs"]
//   tool.name = "word_count"
//   tool.input_schema = { type = "object", properties = { text = { type = "string" } }, required = ["text"] }
//
// meithd starts this script once per call, writes {"args":{...}} plus a newline to its stdin
// and closes it; the script prints exactly one JSON object on stdout and exits 0:
//   {"result":{"words":N,"lines":N,"chars":N}}   or   {"error":"message"}
// Diagnostics go to stderr, which meithd copies into its log.
//
//   echo '{"args":{"text":"two words\n"}}' | node word_count.mjs
//   → {"result":{"words":2,"lines":1,"chars":10}}

/** Reads stdin to EOF as UTF-8. */
async function readStdin() {
    const chunks = [];
    for await (const chunk of process.stdin) chunks.push(chunk);
    return Buffer.concat(chunks).toString('utf8');
}

/** Counts like `wc -w`, `wc -l` (a last line without "\n" counts too) and `wc -m`. */
function count(text) {
    const words = text.split(/\s+/u).filter((w) => w !== '').length;
    let lines = text === '' ? 0 : text.split('\n').length;
    if (text.endsWith('\n')) lines -= 1;
    const chars = [...text].length; // code points, not UTF-16 units
    return { words, lines, chars };
}

function answer(obj) {
    process.stdout.write(JSON.stringify(obj) + '\n');
}

async function main() {
    let request;
    try {
        request = JSON.parse(await readStdin());
    } catch (e) {
        return { error: `stdin is not a JSON request: ${e.message}` };
    }
    const args = request !== null && typeof request === 'object' ? request.args : undefined;
    if (args === null || typeof args !== 'object' || Array.isArray(args)) {
        return { error: 'the request has no "args" object' };
    }
    if (!('text' in args)) return { error: 'missing argument "text"' };
    if (typeof args.text !== 'string') {
        return { error: `"text" must be a string, got ${args.text === null ? 'null' : typeof args.text}` };
    }
    return { result: count(args.text) };
}

// An {"error"} answer is still a clean exit: meithd reports its message as TOOL_FAILED.
answer(await main());
