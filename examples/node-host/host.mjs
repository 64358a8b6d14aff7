#!/usr/bin/env node
// An example meith tool host: file tools confined to one folder, a text-payload apply_patch
// (unified diffs, applied with jsdiff), a streaming counter, and every optional method of the
// tool-host protocol (previews, model-facing results, displays, config schema, tags).
//
//   [[sources]]
//   name = "files"
//   kind = "host"
//   command = ["node", "node-host/host.mjs"]
//   config = { root = ".." }          # the folder the tools may touch; default: the cwd
//
// The protocol plumbing is meith's Node.js SDK (sdk/node, `meith/tool-host`); this file is only tools. To add one, append
// an object to `tools` below (see README.md).

import fs from 'node:fs/promises';
import path from 'node:path';
import { StringDecoder } from 'node:string_decoder';
import { setTimeout as sleep } from 'node:timers/promises';
import { applyPatch, parsePatch } from 'diff';
import { log, runToolHost, ToolError } from 'meith/tool-host';

const MiB = 1024 * 1024;
const READ_LIMIT = 1 * MiB; // read_file refuses bigger files unless max_bytes is given
const LIST_LIMIT = 5000; // list_dir returns at most this many entries

// ---------------------------------------------------------------------------------------------
// Root confinement. Every path argument is resolved against `root` (a real, absolute path).
// A path is accepted only if it stays inside root both as written (after `..`) and after
// following symlinks; operations then use the resolved real path, so what was checked is what
// is touched. (Another process swapping a folder for a symlink between the check and the use
// could still race us; the host trusts the files under its root not to change under it.)

let root = null; // set by init

function isInside(p) {
    const rel = path.relative(root, p);
    return rel === '' || !(rel === '..' || rel.startsWith('..' + path.sep) || path.isAbsolute(rel));
}

/** How results name a path: relative to the root, "." for the root itself. */
function shown(abs) {
    return path.relative(root, abs) || '.';
}

/** Turns a Node fs error into a message for the caller, naming the path as they wrote it. */
function fsFailure(e, p) {
    const why = {
        ENOENT: 'no such file or directory',
        EACCES: 'permission denied',
        EPERM: 'operation not permitted',
        ENOTDIR: 'a part of the path is not a directory',
        EISDIR: 'is a directory',
        ELOOP: 'too many levels of symlinks',
        ENOSPC: 'no space left on the device',
    }[e.code];
    return new ToolError(why ? `${p}: ${why}` : `${p}: ${e.message}`);
}

/** Checks a path argument as written and resolves it against the root (no symlinks yet). */
function resolveLexically(p) {
    if (root === null) throw new ToolError('the host has not been initialised (no init request yet)');
    if (typeof p !== 'string' || p === '') throw new ToolError('path must be a non-empty string');
    if (p.includes('\0')) throw new ToolError('path must not contain NUL characters');
    const abs = path.resolve(root, p);
    if (!isInside(abs)) throw new ToolError(`${p}: path is outside the root folder`);
    return abs;
}

/** Resolves a path that must exist; returns {abs (as written), real (symlinks followed)}. */
async function resolveExisting(p) {
    const abs = resolveLexically(p);
    let real;
    try {
        real = await fs.realpath(abs);
    } catch (e) {
        throw fsFailure(e, p);
    }
    if (!isInside(real)) throw new ToolError(`${p}: path leads outside the root folder through a symlink`);
    return { abs, real };
}

/**
 * Resolves the folder a path's last component lives in (which must exist) and returns
 * {abs, real} where `real` is that component inside the real folder, not yet followed.
 */
async function resolveParent(p) {
    const abs = resolveLexically(p);
    if (abs === root) throw new ToolError(`${p}: names the root folder itself`);
    let parent;
    try {
        parent = await fs.realpath(path.dirname(abs));
    } catch (e) {
        throw e.code === 'ENOENT'
            ? new ToolError(`${p}: the parent folder does not exist (folders are not created)`)
            : fsFailure(e, p);
    }
    if (!isInside(parent)) throw new ToolError(`${p}: path leads outside the root folder through a symlink`);
    return { abs, real: path.join(parent, path.basename(abs)) };
}

/** For writing: like resolveParent, but an existing symlink is followed (as open() would). */
async function resolveForWrite(p) {
    const target = await resolveParent(p);
    let st;
    try {
        st = await fs.lstat(target.real);
    } catch (e) {
        if (e.code === 'ENOENT') return target; // a new file
        throw fsFailure(e, p);
    }
    if (!st.isSymbolicLink()) return target;
    // A dangling symlink would make open() create its target, wherever that is: refuse it.
    let real;
    try {
        real = await fs.realpath(target.real);
    } catch (e) {
        throw e.code === 'ENOENT' ? new ToolError(`${p}: is a symlink to a file that does not exist`) : fsFailure(e, p);
    }
    if (!isInside(real)) throw new ToolError(`${p}: path leads outside the root folder through a symlink`);
    return { abs: target.abs, real };
}

// ---------------------------------------------------------------------------------------------
// The tools. `parameters` is checked before `run` is called, so run can trust the types.

const tools = [
    {
        name: 'read_file',
        description: `Read a UTF-8 text file under the root folder. Files over 1 MiB are refused unless max_bytes is given, which reads only the first max_bytes bytes.`,
        capabilities: ['read-only'],
        parameters: {
            type: 'object',
            properties: {
                path: { type: 'string', description: 'File path, relative to the root folder' },
                max_bytes: { type: 'integer', minimum: 1, maximum: 8 * MiB, description: 'Read at most this many bytes' },
            },
            required: ['path'],
            additionalProperties: false,
        },
        async run({ path: p, max_bytes }) {
            const { abs, real } = await resolveExisting(p);
            let file;
            try {
                file = await fs.open(real, 'r');
                const st = await file.stat();
                if (st.isDirectory()) throw new ToolError(`${p}: is a directory; use list_dir`);
                if (!st.isFile()) throw new ToolError(`${p}: is not a regular file`);
                if (max_bytes === undefined && st.size > READ_LIMIT) {
                    throw new ToolError(`${p}: is ${st.size} bytes, over the 1 MiB limit; pass max_bytes to read the first bytes only`);
                }
                const limit = Math.min(max_bytes ?? READ_LIMIT, st.size);
                const buffer = Buffer.alloc(limit);
                const { bytesRead } = await file.read(buffer, 0, limit, 0);
                // StringDecoder holds back a multi-byte character cut at the end.
                const content = new StringDecoder('utf8').write(buffer.subarray(0, bytesRead));
                return { path: shown(abs), size: st.size, content, truncated: bytesRead < st.size };
            } catch (e) {
                throw e instanceof ToolError ? e : fsFailure(e, p);
            } finally {
                await file?.close();
            }
        },
    },

    {
        name: 'list_dir',
        description: `List a folder under the root folder, sorted by name. Each entry has a type (file, dir, symlink, other) and a size in bytes (null for folders and other non-files). At most ${LIST_LIMIT} entries.`,
        capabilities: ['read-only'],
        parameters: {
            type: 'object',
            properties: {
                path: { type: 'string', description: 'Folder path, relative to the root folder; default "."' },
            },
            required: [],
            additionalProperties: false,
        },
        async run({ path: p = '.' }) {
            const { abs, real } = await resolveExisting(p);
            try {
                const dirents = await fs.readdir(real, { withFileTypes: true });
                dirents.sort((a, b) => (a.name < b.name ? -1 : a.name > b.name ? 1 : 0));
                const kept = dirents.slice(0, LIST_LIMIT);
                const entries = await Promise.all(
                    kept.map(async (d) => {
                        const type = d.isFile() ? 'file' : d.isDirectory() ? 'dir' : d.isSymbolicLink() ? 'symlink' : 'other';
                        let size = null;
                        if (type === 'file' || type === 'symlink') {
                            size = await fs.lstat(path.join(real, d.name)).then((st) => st.size, () => null);
                        }
                        return { name: d.name, type, size };
                    }),
                );
                return { path: shown(abs), entries, truncated: dirents.length > kept.length };
            } catch (e) {
                throw fsFailure(e, p);
            }
        },
    },

    {
        name: 'write_file',
        description: 'Write a UTF-8 text file under the root folder, replacing it, or appending when append is true. The parent folder must exist.',
        capabilities: ['writes-files'],
        parameters: {
            type: 'object',
            properties: {
                path: { type: 'string', description: 'File path, relative to the root folder' },
                content: { type: 'string', description: 'Text to write' },
                append: { type: 'boolean', description: 'Append instead of replacing (default false)' },
            },
            required: ['path', 'content'],
            additionalProperties: false,
        },
        async run({ path: p, content, append = false }) {
            const { abs, real } = await resolveForWrite(p);
            try {
                await fs.writeFile(real, content, { encoding: 'utf8', flag: append ? 'a' : 'w' });
            } catch (e) {
                throw fsFailure(e, p);
            }
            return { path: shown(abs), bytes: Buffer.byteLength(content, 'utf8') };
        },
    },

    {
        name: 'delete_file',
        description: 'Delete a file under the root folder. Folders are refused. A symlink is removed itself, never its target.',
        capabilities: ['destructive'],
        parameters: {
            type: 'object',
            properties: {
                path: { type: 'string', description: 'File path, relative to the root folder' },
            },
            required: ['path'],
            additionalProperties: false,
        },
        async run({ path: p }) {
            // unlink() does not follow a final symlink, so only the parent folder is resolved.
            const { abs, real } = await resolveParent(p);
            try {
                const st = await fs.lstat(real);
                if (st.isDirectory()) throw new ToolError(`${p}: is a directory; delete_file removes files only`);
                await fs.unlink(real);
            } catch (e) {
                throw e instanceof ToolError ? e : fsFailure(e, p);
            }
            return { path: shown(abs), deleted: true };
        },
    },

    {
        // A text-payload (freeform) tool: its argument is the patch itself, not a JSON object.
        type: 'custom',
        name: 'apply_patch',
        description: 'Apply a unified diff (as `diff -u` or `git diff` print it) to files under the root folder. Every hunk of every file must apply, or nothing is written. A file whose old name is /dev/null is created. It never deletes a file (a new name of /dev/null is refused): delete_file does, and needs the destructive capability.',
        format: { type: 'text' },
        capabilities: ['writes-files'],
        async run(payload) {
            if (typeof payload !== 'string' || payload.trim() === '') throw new ToolError('the patch is empty');
            let patches;
            try {
                patches = parsePatch(payload);
            } catch (e) {
                throw new ToolError(`not a unified diff: ${e.message}`);
            }
            // Deleting a file is destructive, which this tool does not declare: a caller whose
            // policy denies delete_file must not get the same effect through a patch.
            const deleted = patches.filter((p) => p.newFileName === '/dev/null').map((p) => p.oldFileName?.replace(/^[ab]\//, '') ?? '(unnamed)');
            if (deleted.length > 0) {
                throw new ToolError(`the patch deletes ${deleted.join(', ')}; apply_patch never deletes files (it has only the writes-files capability): call delete_file for each file to delete (it needs the destructive capability), then apply the rest of the patch`);
            }
            patches = patches.filter((p) => p.hunks.length > 0);
            if (patches.length === 0) throw new ToolError('the patch changes no file');
            // Work out every file's new content first: nothing is written unless all apply.
            const plan = [];
            for (const p of patches) {
                const strip = (name) => (name && name !== '/dev/null' ? name.replace(/^[ab]\//, '') : null);
                const from = strip(p.oldFileName);
                const to = strip(p.newFileName);
                const name = to ?? from;
                if (!name) throw new ToolError('a file in the patch has no name');
                let old = '';
                if (from) {
                    const { real } = await resolveExisting(from);
                    try {
                        old = await fs.readFile(real, 'utf8');
                    } catch (e) {
                        throw fsFailure(e, from);
                    }
                }
                const next = applyPatch(old, p);
                if (next === false) throw new ToolError(`${name}: a hunk does not apply (the file differs from the patch's context)`);
                plan.push({ name, write: (await resolveForWrite(to)).real, content: next });
            }
            for (const step of plan) {
                try {
                    await fs.writeFile(step.write, step.content, 'utf8');
                } catch (e) {
                    throw fsFailure(e, step.name);
                }
            }
            return { files: plan.map((s) => ({ path: s.name, change: 'written' })) };
        },
    },

    {
        name: 'count',
        description: 'Count from 1 to n, streaming a part event {"i","of"} every interval_ms, then return {"counted":n}. A demonstration of streaming.',
        capabilities: ['read-only'],
        timeoutMs: 120000,
        parameters: {
            type: 'object',
            properties: {
                n: { type: 'integer', minimum: 1, maximum: 1000, description: 'How far to count (default 5)' },
                interval_ms: { type: 'integer', minimum: 10, maximum: 10000, description: 'Pause before each number (default 500)' },
            },
            required: [],
            additionalProperties: false,
        },
        async run({ n = 5, interval_ms = 500 }, ctx) {
            for (let i = 1; i <= n; i++) {
                // The signal fires when meithd cancels the call (Ctrl-C, timeout, caller gone,
                // shutdown: docs/protocol.md §16): the timer is cleared, run() rejects, no more counting.
                await sleep(interval_ms, undefined, { signal: ctx.signal });
                ctx.emit({ i, of: n });
            }
            return { counted: n };
        },
    },
];

// ---------------------------------------------------------------------------------------------

async function init(config) {
    for (const key of Object.keys(config)) {
        if (key !== 'root') throw new Error(`unknown config key ${JSON.stringify(key)} (known: root)`);
    }
    const given = config.root ?? '.';
    if (typeof given !== 'string' || given === '') throw new Error('config.root must be a non-empty string');
    let real;
    try {
        real = await fs.realpath(path.resolve(given)); // relative: against the process cwd
    } catch (e) {
        throw new Error(`root folder ${given} cannot be used: ${e.code ?? e.message}`);
    }
    if (!(await fs.stat(real)).isDirectory()) throw new Error(`root ${given} is not a folder`);
    root = real;
    log(`serving files under ${root}`);
    return { value: { ready: true, root }, state: { calls: 0 } };
}

// ---------------------------------------------------------------------------------------------
// The optional methods (docs/protocol.md §13): what an agent shows a person before a call,
// what the model is given after it, and what a UI renders.

/** A one-line description of a call, for a person to approve. */
function describeCall(name, args) {
    switch (name) {
    case 'read_file': return `read ${args?.path}`;
    case 'list_dir': return `list the folder ${args?.path ?? '.'}`;
    case 'write_file': return `${args?.append ? 'append' : 'write'} ${Buffer.byteLength(String(args?.content ?? ''), 'utf8')} bytes to ${args?.path}`;
    case 'delete_file': return `delete ${args?.path}`;
    case 'count': return `count to ${args?.n ?? 5}`;
    case 'apply_patch': {
        const files = typeof args === 'string' ? parsePatch(args).map((p) => (p.newFileName !== '/dev/null' ? p.newFileName : p.oldFileName)?.replace(/^[ab]\//, '')) : [];
        const lines = typeof args === 'string' ? args.split('\n') : [];
        const added = lines.filter((l) => l.startsWith('+') && !l.startsWith('+++')).length;
        const removed = lines.filter((l) => l.startsWith('-') && !l.startsWith('---')).length;
        return `patch ${files.join(', ') || 'no file'} (+${added} -${removed} lines)`;
    }
    default: return `${name}(${JSON.stringify(args)})`;
    }
}

const methods = {
    async format_tool_call_preview({ tool_name, arguments: args, payload, state }) {
        return { value: describeCall(tool_name, payload ?? args), state };
    },
    async format_tool_result({ result, state }) {
        if (!result?.success) return { value: `Error: ${result?.error}`, state };
        const r = result.result;
        // read_file: the model gets the text itself, not a JSON envelope around it.
        if (r && typeof r === 'object' && typeof r.content === 'string' && typeof r.path === 'string') {
            return { value: `${r.path}:\n${r.content}`, state };
        }
        return { value: typeof r === 'string' ? r : JSON.stringify(r), state };
    },
    async to_display_format({ text, state }) {
        return { value: { type: 'markdown', content: '```\n' + text + '\n```' }, state };
    },
    async get_config_schema() {
        return { value: { type: 'object', properties: { root: { type: 'string', minLength: 1 } }, additionalProperties: false } };
    },
    async get_ui_elements() {
        return { value: [{ type: 'text', label: 'Root folder', value: root ?? '(not initialised)' }] };
    },
    async get_tags() { return { value: ['files'] }; },
    async required_tags() { return { value: [] }; },
};

runToolHost({
    tools,
    init,
    methods,
    // The state round-trip: the daemon keeps what we return and sends it back with the next call.
    nextState: (state) => ({ ...state, calls: (Number.isInteger(state.calls) ? state.calls : 0) + 1 }),
});
