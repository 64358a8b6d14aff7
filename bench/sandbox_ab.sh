#!/usr/bin/env bash
# bench/sandbox_ab.sh — what the tool sandbox's per-process-tree limits and private socket
# places (docs/protocol.md §15 "Limits", "Unix sockets") cost a one-shot call: bench (k)'s
# confined tool (bench/oneshot.sh, read-only, 2 connections x 2 in flight) through a meithd
# started with MEITH_SANDBOX_TEST_ABSENT naming nothing, "limits", "private-places" or both,
# the four in turn for ROUNDS rounds (a noisy machine drifts; interleaving spreads it over all).
# Prints one line per run and the median calls/s and p50 of each variant.
# A fifth variant runs the same tool with sandbox = "off", for scale.
#   bench/sandbox_ab.sh            (needs build/bin/meithd: cmake --preset release && build)
# Environment: ROUNDS (default 3), DUR (s, default 3), MEITHD (default build/bin/meithd).
set -euo pipefail
cd "$(dirname "$0")/.."
ROOT=$PWD
MEITHD=${MEITHD:-$ROOT/build/bin/meithd}
ROUNDS=${ROUNDS:-3}
DUR=${DUR:-3}
[[ -x $MEITHD ]] || { echo "sandbox_ab: no $MEITHD (cmake --preset release && cmake --build --preset release)" >&2; exit 2; }
WORK=$(mktemp -d /tmp/meith-ab.XXXXXX)
trap 'kill $(jobs -p) 2>/dev/null || true; rm -rf "$WORK"' EXIT
g++ -std=c++20 -O2 -o "$WORK/loadgen" bench/loadgen.cpp
cat > "$WORK/oneshot.toml" <<EOF
[[sources]]
name = "k_on"
kind = "exec"
command = ["sh", "$ROOT/bench/oneshot.sh"]
tool = { name = "k_on", capabilities = ["read-only"] }

[[sources]]
name = "k_off"
kind = "exec"
command = ["sh", "$ROOT/bench/oneshot.sh"]
tool = { name = "k_off", capabilities = ["read-only"] }
sandbox = "off"
EOF
# "unconfined": the same tool with sandbox = "off", for scale.
variants=("" "limits" "private-places" "limits,private-places" "unconfined")
declare -A calls p50
for ((round = 1; round <= ROUNDS; round++)); do
    for v in "${variants[@]}"; do
        home=$WORK/home-$round-${v:-all}
        mkdir -m 700 "$home"
        tool=k_on absent=$v
        [[ $v == unconfined ]] && tool=k_off absent=""
        MEITH_SANDBOX_TEST_ABSENT=$absent taskset -c 1 "$MEITHD" --home "$home" --socket "$home/d.sock" \
            --config "$WORK/oneshot.toml" --log-level warn 2>> "$WORK/meithd.log" &
        pid=$!
        "$WORK/loadgen" --mode wait --socket "$home/d.sock" --timeout 60 --tool "$tool" > /dev/null
        line=$(taskset -c 0 "$WORK/loadgen" --socket "$home/d.sock" --connections 2 --depth 2 \
            --tool "$tool" --duration "$DUR" --warmup 1 --server-pid "$pid")
        kill "$pid"
        wait "$pid" || true
        c=$(sed -E 's/.*"calls_per_s":([0-9.]+).*/\1/' <<< "$line")
        p=$(sed -E 's/.*"p50_us":([0-9.]+).*/\1/' <<< "$line")
        echo "round $round, without [${v:-nothing}]: $c calls/s, p50 $p us"
        calls[${v:-all}]+="$c "
        p50[${v:-all}]+="$p "
    done
done
median() { tr ' ' '\n' | grep -v '^$' | sort -g | awk '{a[NR]=$1} END {print a[int((NR+1)/2)]}'; }
echo "median of $ROUNDS rounds (calls/s, p50 us):"
for v in "${variants[@]}"; do
    k=${v:-all}
    printf '  %-32s %8s calls/s  p50 %8s us\n' "without [${v:-nothing}]" \
        "$(median <<< "${calls[$k]}")" "$(median <<< "${p50[$k]}")"
done
