#!/usr/bin/env bash
# `meith connect` as a person meets it (docs/bring-your-servers.md): for each client meith knows,
# a config as that client writes it (in a temporary HOME) is pointed at `meith mcp` and put back
# with --undo, byte for byte. Claude Code's is answered in a tmux pane as a person answers the
# prompt: "n" changes nothing, "y" rewrites; the others take --yes. An undo after the file was
# edited by hand refuses without --yes. `meith clients` says which are connected.
#   connect_tmux_test.sh BIN_DIR
set -euo pipefail
bin=$1
source "$(dirname "${BASH_SOURCE[0]}")/tmux_lib.sh" connect connect

fake=$(mktemp -d /tmp/meith-connect-home.XXXXXX)
trap 'rm -rf "$fake"; tmux_cleanup' EXIT
run() { HOME=$fake XDG_CONFIG_HOME=$fake/.config XDG_STATE_HOME=$fake/.local/state \
  CODEX_HOME=$fake/.codex "$bin/meith" --home "$home" "$@"; }

# Each client's user file, as the client writes it (its own indentation, comments, other keys).
mkdir -p "$fake/.cursor" "$fake/.config/Claude" "$fake/.config/Code/User" "$fake/.codex" \
  "$fake/.gemini" "$fake/.codeium/windsurf"
printf '{\n    "numStartups": 12,\n    "mcpServers": {\n        "memory": {"type": "stdio", "command": "npx", "args": ["-y", "@modelcontextprotocol/server-memory"], "env": {}}\n    },\n    "tipsHistory": {"a": 1}\n}' >"$fake/.claude.json"
printf '{"mcpServers":{"fs":{"command":"npx","args":["-y","@modelcontextprotocol/server-filesystem","/srv"]}}}\n' >"$fake/.config/Claude/claude_desktop_config.json"
printf '{\n  "mcpServers": {\n    "pw": { "command": "npx", "args": ["@playwright/mcp@latest"] }\n  }\n}\n' >"$fake/.cursor/mcp.json"
printf '// VS Code keeps comments\n{\n\t"servers": {\n\t\t"gh": {"type": "http", "url": "https://api.githubcopilot.com/mcp/"}\n\t},\n\t"inputs": []\n}\n' >"$fake/.config/Code/User/mcp.json"
printf 'model = "o3"\n\n# docs\n[mcp_servers.docs]\ncommand = "npx"\nargs = ["-y", "@upstash/context7-mcp"]\n\n[mcp_servers.docs.env]\nKEY = "v"\n' >"$fake/.codex/config.toml"
printf '{"theme":"dark","mcpServers":{"seq":{"command":"npx","args":["-y","@modelcontextprotocol/server-sequential-thinking"]}}}' >"$fake/.gemini/settings.json"
# Windsurf: no file yet (connect makes one; undo removes it).
files=("$fake/.claude.json" "$fake/.config/Claude/claude_desktop_config.json" "$fake/.cursor/mcp.json"
  "$fake/.config/Code/User/mcp.json" "$fake/.codex/config.toml" "$fake/.gemini/settings.json")
snap=$(mktemp -d /tmp/meith-connect-snap.XXXXXX)
trap 'rm -rf "$fake" "$snap"; tmux_cleanup' EXIT
for i in "${!files[@]}"; do cp -p "${files[$i]}" "$snap/$i"; done

run clients | grep -E '^claude-code .* 1 +no$' >/dev/null || fail "meith clients: $(run clients)"

# Claude Code, at a terminal: the diff, the question; "n" changes nothing, "y" rewrites.
session() {
  TERM=xterm t new-session -d -s connect -x 200 -y 50 \
    "HOME=$fake XDG_STATE_HOME=$fake/.local/state $bin/meith --home $home connect claude-code; echo connect-exited-\$?; sleep 30"
}
session
wait_pane "Rewrite ~/.claude.json? [y/N]"
[[ $(pane) == *'+      "command": "'"$bin/meith"'",'* ]] || fail "no diff shown before the question"
t send-keys -t connect "n" Enter
wait_pane "connect-exited-0"
wait_pane "nothing changed"
cmp -s "${files[0]}" "$snap/0" || fail "'n' changed ~/.claude.json"
t kill-session -t connect
session
wait_pane "Rewrite ~/.claude.json? [y/N]"
t send-keys -t connect "y" Enter
wait_pane "connect-exited-0"
wait_pane "Undo: meith connect claude-code --undo"
grep -q '"numStartups": 12' "${files[0]}" || fail "the file's other keys were lost"
[[ $(run clients --json) == *'"client": "claude-code"'*'"connected": true'* ]] ||
  fail "meith clients does not show claude-code connected"

# The others, with --yes.
for c in claude-desktop cursor vscode codex gemini windsurf; do
  out=$(run connect "$c" --yes) || fail "connect $c: $out"
done
grep -q '^\[mcp_servers.meith\]$' "${files[4]}" || fail "codex: no [mcp_servers.meith]"
grep -q '^model = "o3"$' "${files[4]}" || fail "codex: the rest of the file was not kept"
[[ -f "$fake/.codeium/windsurf/mcp_config.json" ]] || fail "windsurf: no file made"
if run connect cursor --yes >/dev/null 2>&1; then fail "a second connect did not refuse"; fi

# A file edited by hand since: the undo refuses without --yes, and keeps the edit with it.
printf ' ' >>"$fake/.gemini/settings.json"
if out=$(run connect gemini --undo 2>&1); then fail "undo over an edit did not refuse"; fi
[[ $out == *"changed since"*"--yes"* ]] || fail "the refusal does not say why: $out"
run connect gemini --undo --yes >/dev/null
[[ -f "$fake/.gemini/settings.json.meith-undone" ]] || fail "the edited file was not kept"
rm "$fake/.gemini/settings.json.meith-undone"

# Every undo puts the old bytes back (or removes the file connect made).
for c in claude-code claude-desktop cursor vscode codex windsurf; do
  run connect "$c" --undo >/dev/null || fail "undo $c"
done
for i in "${!files[@]}"; do cmp "${files[$i]}" "$snap/$i" || fail "${files[$i]} is not byte-identical after --undo"; done
[[ ! -e "$fake/.codeium/windsurf/mcp_config.json" ]] || fail "windsurf: the made file stayed"
[[ ! -e "$fake/.local/state/meith/connect" ]] || [[ -z $(ls -A "$fake/.local/state/meith/connect") ]] ||
  fail "undo left its records"
echo "connect_tmux_test: 7 clients connected and undone byte for byte"
