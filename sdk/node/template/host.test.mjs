// Unit tests of the tools themselves (no daemon): node --test host.test.mjs
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { methods, tools } from './host.mjs';

test('count_text counts words', () => {
    assert.deepEqual(tools[0].run({ text: 'one two  three' }), { words: 3 });
});

test('the preview and the model text', () => {
    assert.equal(methods.format_tool_call_preview({ arguments: { text: 'abc' } }).value, 'count the words of 3 characters');
    assert.equal(methods.format_tool_result({ result: { success: true, result: { words: 2 } } }).value, '2 words');
});
