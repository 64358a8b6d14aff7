#!/usr/bin/env bash
# Runs a command on a private session bus (dbus-run-session) with GNOME Keyring's secrets
# component unlocked, under a HOME of its own, with MEITH_TEST_KEYRING=1: the e2e cases tagged
# [keyring] (OAuth grants in the desktop Secret Service, docs/security.md) need one.
#   keyring_run.sh COMMAND [ARGS...]      exit 77 (skipped) when a tool is missing
set -euo pipefail
for tool in dbus-run-session gnome-keyring-daemon secret-tool; do
  command -v "$tool" >/dev/null || { echo "SKIP: $tool is not installed (scripts/install-deps)"; exit 77; }
done
if [[ -z ${MEITH_IN_BUS:-} ]]; then
  export HOME=$(mktemp -d /tmp/meith-keyring.XXXXXX)
  trap 'rm -rf "$HOME"' EXIT
  MEITH_IN_BUS=1 dbus-run-session -- bash "$0" "$@" 2> >(grep -v "Failed to set fd limit" >&2)
  exit $?
fi
printf 'unlock-password' | gnome-keyring-daemon --unlock --components=secrets >/dev/null
MEITH_TEST_KEYRING=1 "$@"
