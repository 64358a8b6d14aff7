#!/usr/bin/env bash
# Type-checks tool lists against the providers' official SDK type definitions (docs/protocol.md
# §13): DIR/openai.json as OpenAI's ChatCompletionTool[], DIR/openai.responses.json as the
# Responses API's Tool[], DIR/anthropic.json as Anthropic's Tool[] — each a JSON array as
# list_tools returned it — with tsc --strict. Also checks that a list in the wrong format is
# refused, so this check can fail. Pins: tests/providers/package.json (installed by
# scripts/install-deps).
#   tests/providers/check_types.sh DIR
set -euo pipefail
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
dir=$1
tsc="$here/node_modules/.bin/tsc"
[[ -x "$tsc" ]] || { echo "check_types: $tsc is missing; run scripts/install-deps" >&2; exit 1; }
work=$(mktemp -d "$here/.check-XXXXXX")
trap 'rm -rf "$work"' EXIT

imports="import type { ChatCompletionTool } from 'openai/resources/chat/completions';
import type { Tool as ResponsesTool } from 'openai/resources/responses/responses';
import type { Tool as AnthropicTool } from '@anthropic-ai/sdk/resources/messages';"
{
  echo "$imports"
  echo "export const openai: ChatCompletionTool[] = $(cat "$dir/openai.json");"
  echo "export const responses: ResponsesTool[] = $(cat "$dir/openai.responses.json");"
  echo "export const anthropic: AnthropicTool[] = $(cat "$dir/anthropic.json");"
} >"$work/lists.ts"
# The wrong way round must not type-check: Chat Completions tools are not Anthropic tools.
{
  echo "$imports"
  echo "export const wrong: AnthropicTool[] = $(cat "$dir/openai.json");"
} >"$work/wrong.ts"

flags=(--noEmit --strict --skipLibCheck --target es2022 --module nodenext --moduleResolution nodenext)
if ! "$tsc" "${flags[@]}" "$work/lists.ts"; then
  echo "check_types: the lists do not match the providers' types (above)" >&2
  exit 1
fi
if "$tsc" "${flags[@]}" "$work/wrong.ts" >/dev/null 2>&1; then
  echo "check_types: a Chat Completions list passed as Anthropic tools: the check cannot fail" >&2
  exit 1
fi
echo "check_types: ok"
