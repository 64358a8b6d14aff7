#!/bin/sh
# Test one-shot exec tool that never answers and leaves a grandchild behind, for checking that
# timeout and cancel kill the tool's whole process group.
#
# Reads its stdin to EOF, starts `sleep 300 &` (the grandchild, which keeps the stdout pipe
# open), writes two lines to the file named by $PID_FILE — first its own pid ($$), then the
# grandchild's ($!) — and then becomes `sleep 300` itself (exec, so pid $$ stays the process
# meithd spawned). The file appears complete at once (written to a temp file, then renamed).
set -eu

if [ -z "${PID_FILE:-}" ]; then
    echo "grandchild.sh: PID_FILE is not set" >&2
    exit 2
fi

cat >/dev/null
sleep 300 &
printf '%s\n%s\n' "$$" "$!" >"$PID_FILE.tmp.$$"
mv -f "$PID_FILE.tmp.$$" "$PID_FILE"
exec sleep 300
