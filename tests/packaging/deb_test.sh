#!/usr/bin/env bash
# The .deb as a user meets it (docs/protocol.md §10): built by CPack from a build folder,
# installed with dpkg -i, used (--version, man -w, the units verified, a command auto-starting
# the installed meithd), then purged leaving nothing behind.
#   tests/packaging/deb_test.sh BUILD_DIR
# Needs root (dpkg -i); exits 77 (skipped) without it. Fails if meith is already installed.
set -euo pipefail
build=$(cd "$1" && pwd)
fail() { echo "deb_test: FAIL: $*" >&2; exit 1; }
[[ $(id -u) -eq 0 ]] || { echo "deb_test: skipped: dpkg -i needs root"; exit 77; }
if grep -q "installed" <<<"$(dpkg-query -W -f='${Status}' meith 2>/dev/null)"; then
  fail "a meith package is installed already; remove it first (dpkg --purge meith)"
fi

work=$(mktemp -d /tmp/meith-deb-XXXXXX)
installed=0
cleanup() {
  [[ -n "${daemon_pid:-}" ]] && kill "$daemon_pid" 2>/dev/null || true
  if ((installed)); then dpkg --purge meith >/dev/null 2>&1 || true; fi
  rm -rf "$work"
}
trap cleanup EXIT

# 1. Build it.
(cd "$work" && cpack --config "$build/CPackConfig.cmake" -G DEB -B "$work/out" >"$work/cpack.log" 2>&1) ||
  { cat "$work/cpack.log" >&2; fail "cpack -G DEB failed"; }
deb=$(ls "$work"/out/meith_*.deb 2>/dev/null | head -1)
[[ -f "$deb" ]] || fail "cpack made no meith_*.deb in $work/out"
echo "deb_test: built $(basename "$deb") ($(stat -c %s "$deb") bytes)"

# 2. Its dependencies come from the libraries it links (dpkg-shlibdeps).
depends=$(dpkg-deb -f "$deb" Depends)
echo "deb_test: Depends: $depends"
for lib in libc6 libstdc++6 libfmt libspdlog libre2 libsimdjson; do
  grep -q "$lib" <<<"$depends" || fail "Depends lacks $lib: $depends"
done
if pkg-config --exists libsystemd; then
  grep -q libsystemd0 <<<"$depends" || fail "Depends lacks libsystemd0: $depends"
fi

# 3. Install it.
dpkg -i "$deb" >"$work/dpkg.log" 2>&1 || { cat "$work/dpkg.log" >&2; fail "dpkg -i failed"; }
installed=1
mapfile -t files < <(dpkg -L meith)

# 4. Use it.
want_version=$(dpkg-deb -f "$deb" Version)
[[ "$(/usr/bin/meith --version)" == "meith $want_version" ]] || fail "meith --version: $(/usr/bin/meith --version)"
[[ "$(/usr/bin/meithd --version)" == "meithd $want_version" ]] || fail "meithd --version: $(/usr/bin/meithd --version)"
[[ "$(command -v meith)" == /usr/bin/meith ]] || fail "meith is not on PATH as /usr/bin/meith"
page=$(man -w meith) || fail "man -w meith found no page"
[[ "$page" == /usr/share/man/man1/meith.1* ]] || fail "man -w meith: $page"
page8=$(man -w 8 meithd) || fail "man -w 8 meithd found no page"
# (Captured first: `man | grep -q` under pipefail fails when grep stops reading early.)
grep -q "service install" <<<"$(MANWIDTH=80 man 1 meith 2>/dev/null)" || fail "man meith does not render"
for f in /usr/lib/systemd/user/meithd.service /usr/lib/systemd/user/meithd.socket \
         /usr/libexec/meith/meith-sandbox-init /usr/libexec/meith/meith-remote \
         /usr/libexec/meith/meith-credentials \
         /usr/share/meith/apparmor/meithd \
         /usr/share/bash-completion/completions/meith /usr/share/meith/launchd/dev.meith.meithd.plist \
         /usr/share/doc/meith/README.md /usr/share/doc/meith/examples/meithd.toml; do
  [[ -f "$f" ]] || fail "$f is not installed"
done
grep -qx "ExecStart=/usr/bin/meithd" /usr/lib/systemd/user/meithd.service ||
  fail "the installed unit does not run /usr/bin/meithd: $(grep ExecStart= /usr/lib/systemd/user/meithd.service)"
mkdir -m 700 "$work/run"
XDG_RUNTIME_DIR="$work/run" systemd-analyze --user --man=no verify \
  /usr/lib/systemd/user/meithd.service /usr/lib/systemd/user/meithd.socket 2>"$work/verify.log" ||
  { cat "$work/verify.log" >&2; fail "systemd-analyze verify failed on the installed units"; }
[[ ! -s "$work/verify.log" ]] || { cat "$work/verify.log" >&2; fail "systemd-analyze verify warned"; }

# The installed client auto-starts the installed daemon on a cold home (the unit is not
# installed for this user, so it is meithd --detach). Its one tool reports its own pid: 2, the
# first process after the installed sandbox init in its PID namespace (where this kernel gives
# namespaces).
mkdir -m 700 "$work/home"
cat >"$work/home/meithd.toml" <<'TOML'
[[sources]]
name = "pid"
kind = "exec"
command = ["/bin/sh", "-c", "read -r request; echo \"{\\\"result\\\": $$}\""]
tool = { name = "own_pid", description = "its own pid", capabilities = ["read-only"] }

# A remote source (docs/protocol.md §18) whose url is loopback without allow_private_network:
# the installed meith-remote is found, runs, and its egress check refuses the address.
[[sources]]
name = "remote"
kind = "mcp"
url = "https://127.0.0.1:9/mcp"
TOML
out=$(cd / && env -u XDG_RUNTIME_DIR MEITH_HOME="$work/home" XDG_CONFIG_HOME="$work/cfg" \
      /usr/bin/meith tools 2>"$work/meith.err") || { cat "$work/meith.err" >&2; fail "meith tools on a cold home failed"; }
grep -q echo <<<"$out" || fail "meith tools listed no echo: $out"
grep -q "/usr/bin/meithd --detach" "$work/meith.err" || fail "not started from /usr/bin: $(cat "$work/meith.err")"
own_pid=$(cd / && env -u XDG_RUNTIME_DIR MEITH_HOME="$work/home" /usr/bin/meith call own_pid --raw 2>&1) ||
  fail "the confined tool failed: $own_pid"
if unshare -U -m -p -f true 2>/dev/null; then
  [[ "$own_pid" == 2 ]] || fail "the tool did not run under the installed sandbox init: pid $own_pid"
fi
grep -q "meith-sandbox-init not found" "$work/home/meithd.log" && fail "meithd did not find the installed meith-sandbox-init"
for _ in $(seq 200); do
  remote=$(cd / && env -u XDG_RUNTIME_DIR MEITH_HOME="$work/home" /usr/bin/meith sources remote --json 2>&1 || true)
  grep -q "loopback address" <<<"$remote" && break
  sleep 0.05
done
grep -q "127.0.0.1 is a loopback address" <<<"$remote" ||
  fail "the installed meith-remote did not refuse a loopback url: $remote"
# `meith secret` runs in the installed credential helper (/usr/libexec/meith/meith-credentials):
# a value piped in is kept, and listed by name.
printf %s 'deb-test-value' | env MEITH_HOME="$work/home" MEITH_SECRET_SERVICE=off \
  MEITH_SECRETS_KEY="$work/cfg/secrets.key" /usr/bin/meith secret set DEB_TEST 2>"$work/secret.err" ||
  { cat "$work/secret.err" >&2; fail "meith secret set failed through the installed helper"; }
names=$(env MEITH_HOME="$work/home" MEITH_SECRET_SERVICE=off MEITH_SECRETS_KEY="$work/cfg/secrets.key" \
  /usr/bin/meith secret list 2>&1) || fail "meith secret list failed: $names"
[[ "$names" == DEB_TEST ]] || fail "meith secret list printed: $names"
daemon_pid=$(sed -n 's/.*"pid": *\([0-9]*\).*/\1/p' "$work/home/config.json")
kill "$daemon_pid"
for _ in $(seq 100); do kill -0 "$daemon_pid" 2>/dev/null || break; sleep 0.05; done
kill -0 "$daemon_pid" 2>/dev/null && fail "the auto-started meithd did not stop on SIGTERM"
daemon_pid=

# The packaged first run: `meith init` in a project names the installed examples, whose
# dependencies ship with them (the file tools need jsdiff and meith's Node SDK), and they work.
mkdir -p "$work/project" && echo "hello from the project" >"$work/project/notes.txt"
mkdir -m 700 "$work/home2"
init_out=$(cd "$work/project" && MEITH_HOME="$work/home2" /usr/bin/meith init 2>&1) ||
  fail "meith init failed: $init_out"
grep -q 'name = "files"' "$work/home2/meithd.toml" ||
  fail "meith init left out the file tools of the package: $init_out"
grep -q "/usr/share/doc/meith/examples/node-host/host.mjs" "$work/home2/meithd.toml" ||
  fail "meith init does not name the installed example host: $(cat "$work/home2/meithd.toml")"
read_out=$(cd / && env -u XDG_RUNTIME_DIR MEITH_HOME="$work/home2" /usr/bin/meith call read_file \
           '{"path":"notes.txt"}' --raw 2>"$work/read.err") ||
  { cat "$work/read.err" "$work/home2/meithd.log" >&2; fail "the packaged file tool failed"; }
[[ "$read_out" == "hello from the project" ]] || fail "read_file read: $read_out"
daemon_pid=$(sed -n 's/.*"pid": *\([0-9]*\).*/\1/p' "$work/home2/config.json")
kill "$daemon_pid"
for _ in $(seq 100); do kill -0 "$daemon_pid" 2>/dev/null || break; sleep 0.05; done
daemon_pid=

# 5. Purge it: nothing it installed stays.
dpkg --purge meith >"$work/purge.log" 2>&1 || { cat "$work/purge.log" >&2; fail "dpkg --purge failed"; }
installed=0
if grep -q "installed" <<<"$(dpkg-query -W -f='${Status}' meith 2>/dev/null)"; then fail "meith still installed after purge"; fi
left=()
for f in "${files[@]}"; do
  if [[ -f "$f" || -L "$f" ]]; then left+=("$f"); fi
  if [[ -d "$f" && "$f" == *meith* ]]; then left+=("$f/"); fi
done
((${#left[@]} == 0)) || fail "left behind after purge: ${left[*]}"
echo "deb_test: ok (${#files[@]} paths installed and purged)"
