#!/usr/bin/env bash
# The "browser" of `meith login` in the conformance runs ($BROWSER): the suite's authorization
# server approves at once and redirects to meith's loopback listener, so following the
# redirects is all a person would do. It returns at once, as a browser launcher does.
curl -sS -L --max-redirs 5 -o /dev/null "$1" >>"${MEITH_CONFORMANCE_LOG:-/dev/null}" 2>&1 &
