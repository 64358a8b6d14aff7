#!/usr/bin/env bash
# The "browser" of `meith login` in the conformance runs ($BROWSER): the suite's authorization
# server approves at once and redirects to meith's loopback listener, so following the
# redirects is all a person would do. Like a browser, it stays until the page has loaded
# (meith login does not wait for it).
exec curl -sS -L --max-redirs 5 -o /dev/null "$1"
