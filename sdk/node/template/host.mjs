// A meith tool host in JavaScript: copy this folder, `npm install`, and edit.
// Run by meithd (meithd.toml next to this file shows the [[sources]] entry).
import { runToolHost, ToolError } from 'meith/tool-host';

export const tools = [
    {
        name: 'count_text',
        description: 'Counts the words of a text.',
        // What the tool does decides who may call it (docs/protocol.md §5).
        capabilities: ['read-only'],
        parameters: { type: 'object', properties: { text: { type: 'string' } }, required: ['text'] },
        run: ({ text }) => ({ words: text.split(/\s+/).filter(Boolean).length }),
    },
];

export const methods = {
    format_tool_call_preview: ({ arguments: a }) => ({ value: `count the words of ${String(a?.text ?? '').length} characters` }),
    format_tool_result: ({ result }) => {
        if (!result.success) throw new ToolError(String(result.error));
        return { value: `${result.result.words} words` };
    },
};

if (import.meta.url === `file://${process.argv[1]}`) runToolHost({ tools, methods });
