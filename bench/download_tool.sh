#!/bin/sh
# A one-shot exec tool for bench (k)'s download (bench/download.mjs): fetches the request's
# "url" with curl (which takes the egress proxy from http_proxy when meithd sets it) into
# /dev/null and answers with the bytes received.
read -r request
url=${request#*\"url\":\"}   # shell builtins only: the sandbox runs curl, nothing else
url=${url%%\"*}
bytes=$(curl -sS -o /dev/null -w '%{size_download}' "$url") || exit 1
printf '{"result":{"bytes":%s}}\n' "$bytes"
