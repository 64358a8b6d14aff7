#!/bin/sh
# A one-shot exec tool that does as little as a tool can (shell builtins only): read the
# request, answer. For scenario (k) of bench/run, the cost of starting a tool process with and
# without the kernel sandbox (docs/protocol.md §15).
read -r _
printf '{"result":"ok"}\n'
