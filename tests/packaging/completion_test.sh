#!/usr/bin/env bash
# Checks the shell completions in packaging/completion/: syntax (bash -n, and zsh -n when zsh is
# installed), then the bash functions _meith and _meithd on a set of command lines, the way
# bash calls them (COMP_WORDS, COMP_CWORD, COMP_LINE, COMP_POINT -> COMPREPLY).
#
# usage: tests/packaging/completion_test.sh [SOURCE_DIR [BIN_DIR]]
#   SOURCE_DIR  the repository (default: two folders up from this script)
#   BIN_DIR     optional: the folder with built meith and meithd; then tool and source names
#               are also checked against a real daemon started for the test (and the
#               no-daemon case must stay empty and silent)
set -euo pipefail
unset XDG_RUNTIME_DIR MEITH_HOME MEITH_NO_AUTOSTART # hermetic: no daemon of the user is asked

src=${1:-$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)}
bin=${2:-}
dir=$src/packaging/completion
failures=0

fail() {
    echo "FAIL: $*" >&2
    failures=$((failures + 1))
}

for f in "$dir/meith.bash" "$dir/meithd.bash" "$dir/_meith"; do
    [[ -f $f ]] || { echo "FAIL: missing $f" >&2; exit 1; }
done
bash -n "$dir/meith.bash" || fail "bash -n meith.bash"
bash -n "$dir/meithd.bash" || fail "bash -n meithd.bash"
if command -v zsh >/dev/null 2>&1; then
    zsh -n "$dir/_meith" || fail "zsh -n _meith"
else
    echo "note: zsh is not installed; zsh -n _meith skipped"
fi

tmp=$(mktemp -d)
daemon_pid=""
cleanup() {
    if [[ -n $daemon_pid ]]; then
        kill -TERM "$daemon_pid" 2>/dev/null || :
        for _ in $(seq 100); do kill -0 "$daemon_pid" 2>/dev/null || break; sleep 0.05; done
    fi
    rm -rf "$tmp"
}
trap cleanup EXIT

# shellcheck source=/dev/null
source "$dir/meith.bash"
# shellcheck source=/dev/null
source "$dir/meithd.bash"
[[ $(complete -p meith) == *"-F _meith"* ]] || fail "meith.bash does not register _meith for meith"
[[ $(complete -p meithd) == *"-F _meithd"* ]] || fail "meithd.bash does not register _meithd"

# run FUNCTION WORD... : completes the last WORD (the cursor is at its end) with FUNCTION;
# the words are given as bash splits them (COMP_WORDBREAKS makes '=' a word of its own).
# Leaves the candidates in $got (one a line, sorted) and fails when the function wrote to
# stderr.
got=""
run() {
    local fn=$1
    shift
    COMP_WORDS=("$@")
    COMP_CWORD=$((${#COMP_WORDS[@]} - 1))
    COMP_LINE="$*"
    COMP_POINT=${#COMP_LINE}
    COMPREPLY=()
    "$fn" 2>"$tmp/stderr"
    if [[ -s $tmp/stderr ]]; then
        fail "[$COMP_LINE] wrote to stderr: $(cat "$tmp/stderr")"
    fi
    got=$(printf '%s\n' "${COMPREPLY[@]+"${COMPREPLY[@]}"}" | sed '/^$/d' | sort)
}

# line LINE: the words of a command line typed up to the cursor (a trailing space starts an
# empty word).
words=()
line() {
    read -ra words <<<"$1"
    if [[ $1 == *" " ]]; then words+=(""); fi
}

# flat TEXT: TEXT on one line, for messages.
flat() {
    tr '\n' ' ' <<<"$1"
}

# has|lacks FN LINE WORD... : every WORD is (is not) among the candidates for LINE.
has() {
    local fn=$1 l=$2 w
    shift 2
    line "$l"
    run "$fn" "${words[@]}"
    for w in "$@"; do
        grep -qxF -- "$w" <<<"$got" || fail "[$l] should offer '$w'; got: $(flat "$got")"
    done
}
lacks() {
    local fn=$1 l=$2 w
    shift 2
    line "$l"
    run "$fn" "${words[@]}"
    for w in "$@"; do
        if grep -qxF -- "$w" <<<"$got"; then fail "[$l] should not offer '$w'; got: $(flat "$got")"; fi
    done
}
# exactly FN LINE WORD... : the candidates are exactly the WORDs.
exactly() {
    local fn=$1 l=$2
    shift 2
    line "$l"
    run "$fn" "${words[@]}"
    local want
    want=$(printf '%s\n' "$@" | sed '/^$/d' | sort)
    [[ $got == "$want" ]] || fail "[$l] should offer exactly '$(flat "$want")'; got: '$(flat "$got")'"
}
# words_exactly FN "WANT" WORD... : as exactly, with the words given one by one.
words_exactly() {
    local fn=$1 want=$2
    shift 2
    run "$fn" "$@"
    # shellcheck disable=SC2086 # split WANT into its words
    want=$(printf '%s\n' $want | sort)
    [[ $got == "$want" ]] || fail "[$*] should offer exactly '$(flat "$want")'; got: '$(flat "$got")'"
}

commands=(status tools call preview sources login secret import connect clients reload stop restart policy approve grant grants revoke mcp service audit init help version)
service_opts=(--socket-activated --dry-run --manager)
audit_opts=(--since --tool --caller --denied --event --limit --json --file --follow)

# Commands and subcommands.
exactly _meith "meith " "${commands[@]}"
exactly _meith "meith ser" service
exactly _meith "meith s" status sources service secret stop
exactly _meith "meith secret " set list rm
exactly _meith "meith service " install uninstall status
exactly _meith "meith service un" uninstall
exactly _meith "meith sources " learn restart update
has _meith "meith sources update --" --dry-run --yes
exactly _meith "meith policy " check
exactly _meith "meith --home /some/where service " install uninstall status
exactly _meith "meith --caller plugin policy " check
exactly _meith "meith nonsense " ""
exactly _meith "meith status " ""

# Options: global ones, and those of each command.
has _meith "meith --" --socket --home --caller --no-autostart --help --version
lacks _meith "meith --" --json --dry-run --since
has _meith "meith service install --" "${service_opts[@]}" --home --socket --no-autostart
lacks _meith "meith service install --" --json --since --all --timeout-ms --denied
has _meith "meith service uninstall --" --dry-run --manager
lacks _meith "meith service uninstall --" --socket-activated --json
has _meith "meith service status --d" --dry-run
has _meith "meith audit --" "${audit_opts[@]}"
lacks _meith "meith audit --" --dry-run --socket-activated --manager --all --timeout-ms
exactly _meith "meith audit --li" --limit
has _meith "meith call --" --timeout-ms --json
lacks _meith "meith call --" --all --since
has _meith "meith sources --" --json
lacks _meith "meith sources --" --timeout-ms
has _meith "meith --no-autostart sources restart --" --timeout-ms
lacks _meith "meith --no-autostart sources restart --" --json
has _meith "meith mcp --" --all --caller
lacks _meith "meith mcp --" --json
has _meith "meith policy check --" --json --caller
lacks _meith "meith status --" --all --since
has _meith "meith status --" --json
has _meith "meith call --" --raw
has _meith "meith init --" --force
has _meith "meith tools --" --json --format
lacks _meith "meith reload --" --format
exactly _meith "meith tools --format openai" openai openai.responses
has _meith "meith reload --" --json
has _meith "meith restart --" --timeout-ms
has _meith "meith import --" --client --dry-run --yes
has _meith "meith connect --" --client --dry-run --yes --undo
exactly _meith "meith connect cl" claude-code claude-desktop
has _meith "meith clients --" --json
lacks _meith "meith import --" --json --timeout-ms

# Option values.
exactly _meith "meith --caller " cli plugin
exactly _meith "meith import --client c" claude-code claude-desktop codex cursor
exactly _meith "meith audit --caller p" plugin
words_exactly _meith "plugin" meith mcp --caller = p
words_exactly _meith "cli plugin" meith mcp --caller =
exactly _meith "meith service install --manager " systemd launchd
exactly _meith "meith service status --manager l" launchd
has _meith "meith audit --event tool" tool_call tool_call_rejected
lacks _meith "meith audit --event tool" daemon_start
has _meith "meith audit --event " all daemon_start config_reload
has _meith "meith audit --event gr" grant_created grant_used grant_revoked grant_expired
# Every event meithd writes is offered: the names in the code that writes audit lines, and the
# frames audited under their own type.
emitted=$(grep -rhoE '(audit_event|lifecycle|\.event)\((\*[a-z_]+, )?"[a-z_]+"|"event":"[a-z_]+"|event = "[a-z_]+"|\? "grant_[a-z]+" : "grant_[a-z]+"' \
    "$src"/daemon "$src"/registry "$src"/audit "$src"/permissions "$src"/sources --include='*.cpp' |
    grep -oE '"[a-z_]+"' | tr -d '"' | grep -vx event | sort -u)
[[ $(wc -w <<<"$emitted") -ge 20 ]] || fail "found only $(wc -w <<<"$emitted") audit events in the code"
has _meith "meith audit --event " $emitted list_tools cancel_tool_call
exactly _meith "meith audit --limit " ""
exactly _meith "meith call --timeout-ms " ""
mkdir "$tmp/homedir"
: >"$tmp/afile"
exactly _meith "meith --home $tmp/" "$tmp/homedir"
exactly _meith "meith audit --file $tmp/a" "$tmp/afile"
exactly _meith "meith --socket $tmp/h" "$tmp/homedir"
words_exactly _meith "$tmp/homedir" meith --home = "$tmp/"
# A value is not taken for a command: "--caller plugin" then "service".
exactly _meith "meith --caller plugin " "${commands[@]}"
# grant: capabilities, also after a comma; its options.
exactly _meith "meith grant wri" writes-files
exactly _meith "meith grant read-only,de" read-only,destructive

# Tool names for call: with no daemon answering, nothing, silently.
exactly _meith "meith --home $tmp/nohome --socket $tmp/nohome.sock call " ""
[[ ! -e $tmp/nohome ]] || fail "completing 'call' created the home $tmp/nohome (a daemon was started?)"

# meithd.
has _meithd "meithd --" --home --config --socket --log-level --detach --help --version
exactly _meithd "meithd --log-level " trace debug info warn error
exactly _meithd "meithd --log-level w" warn
exactly _meithd "meithd --home $tmp/" "$tmp/homedir"
exactly _meithd "meithd --config $tmp/a" "$tmp/afile"

# With the built binaries: names from a real daemon, with the --home given on the line.
if [[ -n $bin ]]; then
    [[ -x $bin/meith && -x $bin/meithd ]] || { echo "FAIL: no meith/meithd in $bin" >&2; exit 1; }
    home=$tmp/h
    mkdir -m 0700 "$home"
    exactly _meith "$bin/meith --home $home call " ""
    [[ ! -e $home/config.json ]] || fail "completing 'call' started a daemon in $home"
    MEITH_LOG=warn "$bin/meithd" --detach --home "$home" --socket "$home/meithd.sock" >/dev/null
    daemon_pid=$(sed -n 's/.*"pid": *\([0-9][0-9]*\).*/\1/p' "$home/config.json" | head -n1)
    [[ -n $daemon_pid ]] || { echo "FAIL: no pid in $home/config.json" >&2; exit 1; }
    exactly _meith "$bin/meith --home $home call " echo
    exactly _meith "$bin/meith --home $home call e" echo
    words_exactly _meith echo "$bin/meith" --home = "$home" policy check ""
    exactly _meith "$bin/meith --home $home audit --tool " echo
    exactly _meith "$bin/meith --home $home sources restart " builtin
    exactly _meith "$bin/meith --home $home call echo " ""
fi

if [[ $failures -gt 0 ]]; then
    echo "completion_test: $failures check(s) failed" >&2
    exit 1
fi
echo "completion_test: all checks passed"
