#!/usr/bin/env bash
# Runs each fuzz harness for a bounded time from freshly written seed files and prints
# how many inputs it tried; fails on any crash, memory error, timeout or out-of-memory.
# usage: dev/fuzz/run.sh SECONDS_EACH HARNESS...   (harnesses are build/fuzz_<name>)
set -euo pipefail
SECONDS_EACH=$1; shift
export ASAN_OPTIONS=detect_leaks=0 # a rejected input ends in fatal(), which leaks by design
for name in "$@"; do
    bin=build/fuzz_$name
    corpus=build/fuzz_corpus_$name
    rm -rf "$corpus" && mkdir -p "$corpus"
    FUZZ_SEED_OUT="$corpus" "$bin"
    # rounds of a few seconds in fresh processes that share the corpus directory: the
    # allocations a rejected input leaves behind (fatal() exits in real use) never pile up
    log=build/fuzz_$name.log
    : > "$log"
    inputs=0
    for _ in $(seq 1 $(( (SECONDS_EACH + 4) / 5 ))); do
        if ! "$bin" -max_total_time=5 -close_fd_mask=2 -detect_leaks=0 -max_len=110000 -rss_limit_mb=4096 \
                -timeout=10 -artifact_prefix=build/fuzz_crash_"$name"_ "$corpus" >> "$log" 2>&1; then
            grep -A 12 -E "ERROR|runtime error" "$log" | head -30
            echo "FAIL: fuzz_$name found a problem (input saved as build/fuzz_crash_${name}_*)"
            exit 1
        fi
        runs=$(grep -oE "^Done [0-9]+ runs" "$log" | tail -1 | grep -oE "[0-9]+")
        inputs=$((inputs + runs))
    done
    echo "fuzz_$name: $inputs inputs in ${SECONDS_EACH}s, no crash; corpus $(ls "$corpus" | wc -l) files, $(grep -oE "cov: [0-9]+" "$log" | tail -1)"
done
