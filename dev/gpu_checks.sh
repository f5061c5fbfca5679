#!/usr/bin/env bash
# The checks of the CUDA path that need a GPU, from the GPU kit (make gpu-kit), in the
# commands of a 15-minute lease of one H100 or H200 (docs/gpu-lease.md), each ordered by what a
# researcher needs most:
#
#   dev/gpu_checks.sh 1 [OUTDIR [LEFT]]   command 1 (timeout 420 s): mma_check; every stem GPU vs
#                                         CPU in bf16 and fp32 (the CPU references written beside
#                                         them); GPT-Small at T = 1024 beside llm.c;
#                                         compute-sanitizer on the attention of the distinct
#                                         attention paths; evaluation memory at 16k on those
#                                         paths; the GPT-Small evaluation at 16k; the HF export
#   dev/gpu_checks.sh 2 [OUTDIR [LEFT]]   command 2 (timeout: the lease's time left, at most
#                                         600 s): the attention alone at B = 8, T = 1024, 12
#                                         heads of 64, timed, beside PyTorch SDPA (flash) and
#                                         FlexAttention; compute-sanitizer on DAPE's whole
#                                         model; what command 1 left (its correctness first)
#   dev/gpu_checks.sh 3 [OUTDIR [LEFT]]   command 3 (its own time box, timeout 480 s, or the
#                                         lease's time left): the algorithmic tasks' study on
#                                         the CUDA trainer (dev/tasks.sh, several runs at once)
#                                         at the anchors' scale: 5 layers of 64, lengths 1..40,
#                                         tested up to 500, the kit's task entries (manifest:
#                                         tasks), one seed; only the entries whose CUDA path
#                                         command 1 showed equal to the CPU path (its results on
#                                         this machine, or a lease's results.tsv copied to the
#                                         kit's folder as results1.tsv)
#   dev/gpu_checks.sh plan                the commands and the lease's arithmetic on paper (exit
#                                         1 if it does not fit)
#
# LEFT: the lease's device time left when the command is called (seconds): the command stops
# itself by min(its timeout, LEFT less a machine's start if the machine went cold) less MARGIN_S.
# It writes its summary as the runs end: OUTDIR (default $OUT, else out/gpu-lease/outN; a
# relative one is the caller's) gets summaryN.md, logsN.tar.gz (every log, packed after each
# stage) and leftN.txt (the units the deadline left out), at most 8 files. Every run has its own
# timeout; a crash or a hang is a FAIL in the summary and the script goes on; a run the deadline
# stops, or would start with less than its minimum time, is "not run (deadline)" and its unit
# goes to leftN.txt; a program that finds no GPU is SKIPPED, never ok. The work (the unpacked
# kit, the CPU references, PyTorch's compile cache, logs) stays in out/gpu-lease, so that
# command 2, on the same machine, finds it; on a fresh machine it writes the references it
# needs again. Command 2 retries the units of left1.txt from out/gpu-lease (the same machine)
# or from the kit's folder (copied there).
#
# Environment: GPU_KIT (the kit's folder, default out/gpukit), GPU_CHECKS_WORK (default
# out/gpu-lease; relative folders given are the caller's), GPU_CHECKS_CAP (the longest one run
# may take, default 600 s), DEADLINE (seconds, instead of the command's own), GPU_CHECKS_SHAPE
# (command 2's attention shape), GPU_CHECKS_PYTHON (the python with torch where python3 has
# none, default the GPU machine's /opt/torch/.venv/bin/python3).
set -uo pipefail # no -e: a failed run is a row of the summary, not the end of the script

# the lease (device time in all, a machine's start included) and the commands' timeouts
LEASE_S=900
START_S=120   # a machine's start, at most
TIMEOUT_1=420
TIMEOUT_3=480 # command 3's own time box: a lease of start and command 3, after command 1 passed
CALL_MAX_S=600 # the longest timeout of one call of the GPU machine's run command
MARGIN_S=25   # from a command's deadline to its timeout: the last pack and the files' return
CORES=16      # the GPU machine's
POOL=6        # stems compared with their CPU references at once
# on paper: the seconds of each unit on the GPU machine, at or above what the first lease's
# results.tsv measured (H100, 2026-11-27, docs/gpu-lease.md; the comments give it) where it
# timed them, else guesses; `plan` adds them up
EST_OPEN=12        # unpack the kit (about 830 MB), the machine, the device probe (guess)
EST_MMA=11         # mma_check, and compute-sanitizer's probe on it (measured 2)
EST_REF=28         # a CPU reference, in CPU seconds (OpenBLAS, one core: 6.6 s here; measured 47 s
                   # of wall each with 27 on the 16 cores at once)
EST_STEM=19        # a stem's four runs: the attention checks (their CPU reference) and the
                   # comparisons (measured 16: 1.5 and 6.4 s a run)
EST_BENCH=10       # a GPT-Small trainer's 20 steps, its start and its evaluation (measured 9.8)
EST_SANITIZE=8     # compute-sanitizer on an attention check (measured 1.5 to 44, 6.3 on average)
EST_SANITIZE_DAPE=20 # compute-sanitizer on test_gpt2cu reference (a small model, 11 passes; guess)
EST_MEMORY=2       # test_gpt2cu memory (measured 1.5)
EST_EVAL=8         # GPT-Small evaluated at 1k, 4k and 16k (measured 7)
EST_REOPEN=3       # command 2 on the same machine: the kit is unpacked
EST_TIME=4         # one encoding's attention timed (measured 3.2)
EST_TORCH=35       # PyTorch's start and six cases from the compile cache (measured 35)
EST_TASK_RUN=60    # a task study's run (its steps and its evaluation up to length 500) among TASK_JOBS at once (guess)
SANITIZE_TOOLS="memcheck racecheck" # cheapest first
# cuBLAS(Lt)'s kernels, left out of compute-sanitizer's checks: the project's kernels are checked
CS_FILTER=(--kernel-name-exclude 'regex=gemm|gemv|xmma|cutlass|nvjet|cublas|splitK')
BENCH_STEPS=20 # GPT-Small steps per run; the mean of steps 3.. is timed
BENCH_T=1024
# command 3's study (dev/tasks.sh's settings): the anchors' model and lengths (5 layers of 64,
# lengths 1..40, tested from 41 to 500 as DAPE V2's Table 6), the CPU study's tasks, one seed,
# TASK_JOBS runs at once; GPU_TASKS_* (the dry run's tiny study) instead
TASK_JOBS=${GPU_TASKS_JOBS:-16}
TASK_TASKS=${GPU_TASKS_TASKS:-sum copy reverse cycle even}
TASK_SETTINGS=(N="${GPU_TASKS_N:-40}" MODEL="${GPU_TASKS_MODEL:-task5}" STEPS="${GPU_TASKS_STEPS:-2000}" B="${GPU_TASKS_B:-128}" LR=1e-3
               WARMUP="${GPU_TASKS_WARMUP:-100}" LENGTHS="${GPU_TASKS_LENGTHS:-20,40,41,60,100,200,500}" TEST="${GPU_TASKS_TEST:-32}" SEEDS=1
               TASKS="$TASK_TASKS")

CALLER=$PWD
cd "$(dirname "$0")/.."
ROOT=$PWD
# a path given by the caller: relative ones are the caller's
abs() { case $1 in /*) echo "$1" ;; *) echo "$CALLER/$1" ;; esac; }
export PATH="$PATH:/usr/local/cuda/bin"
KIT_DIR=$(abs "${GPU_KIT:-$ROOT/out/gpukit}")
WORK=$(abs "${GPU_CHECKS_WORK:-$ROOT/out/gpu-lease}")
CAP=${GPU_CHECKS_CAP:-600}
SHAPE=${GPU_CHECKS_SHAPE:-1024 8 12 64} # T B NH HS: the attention of one GPT-Small layer at B = 8
# PyTorch's compile cache, kept for command 2 on the same machine
export TORCHINDUCTOR_CACHE_DIR=$WORK/torch/inductor TRITON_CACHE_DIR=$WORK/torch/triton

# the plan on paper: the lists from the kit's manifest (or the Makefile's, given by make
# gpu-lease-plan), each command's units times their estimates against its deadline
plan() {
    local m=$KIT_DIR/kit.manifest stems pes bench paths from tasks
    if [ -f "$m" ]; then
        stems=$(sed -n 's/^stems //p' "$m"); pes=$(sed -n 's/^pes //p' "$m"); bench=$(sed -n 's/^bench //p' "$m"); paths=$(sed -n 's/^paths //p' "$m"); from=${m#"$ROOT"/}
        tasks=$(sed -n 's/^tasks //p' "$m")
    elif [ -n "${KIT_STEMS:-}" ]; then
        stems=$KIT_STEMS; pes=$KIT_PES; bench=$KIT_BENCH; paths=$(bash dev/gpu_kit.sh paths | tr '\n' ' '); from="the Makefile's lists"; tasks=${KIT_TASKS:-}
    else
        echo "plan: no kit manifest $m (make gpu-kit) and no KIT_STEMS (make gpu-lease-plan)" >&2
        return 1
    fi
    local ns np nb npath ndape=0 p
    ns=$(wc -w <<< "$stems"); np=$(wc -w <<< "$pes"); nb=$(wc -w <<< "$bench"); npath=$(wc -w <<< "$paths")
    for p in $paths; do [[ " $pes " == *" $p "* ]] || ndape=$((ndape + 1)); done
    local ntools ntimeout2 d1 d2 total
    ntools=$(wc -w <<< "$SANITIZE_TOOLS")
    d1=$((TIMEOUT_1 - MARGIN_S))
    ntimeout2=$((LEASE_S - START_S - TIMEOUT_1)) # command 2's timeout if command 1 ran to its own
    d2=$((ntimeout2 - MARGIN_S))
    total=$((START_S + TIMEOUT_1 + ntimeout2))
    local refs=$(( (ns + CORES - 1) / CORES * EST_REF )) tests=$(( (ns * EST_STEM + POOL - 1) / POOL )) speed=$(( 2 * (nb + 1) * EST_BENCH ))
    local san1=$(( ntools * (npath - ndape) * EST_SANITIZE )) mem=$(( npath * EST_MEMORY ))
    local c1=$(( EST_OPEN + EST_MMA + tests + speed + san1 + mem + EST_EVAL ))
    local time2=$(( np * EST_TIME )) san2=$(( ntools * ndape * EST_SANITIZE_DAPE ))
    local c2=$(( EST_REOPEN + time2 + EST_TORCH + san2 ))
    echo "lease: ${LEASE_S} s of device time; a machine's start at most ${START_S} s; each command stops itself ${MARGIN_S} s before its timeout"
    echo "lists ($from): $ns stems, $np encodings, $nb trainers beside llm.c, $npath attention paths ($(echo $paths))"
    echo "command 1: timeout_s ${TIMEOUT_1}, stops itself at ${d1} s: bash dev/gpu_checks.sh 1 \"\$OUT\""
    echo "  on paper: open ${EST_OPEN} + mma_check and compute-sanitizer's probe ${EST_MMA} + GPU vs CPU ${ns} stems x ${EST_STEM} s / ${POOL} at once ${tests}" \
         "+ speed $((2 * (nb + 1))) runs x ${EST_BENCH} s ${speed} + compute-sanitizer $((ntools * (npath - ndape))) runs x ${EST_SANITIZE} s ${san1}" \
         "+ memory ${npath} x ${EST_MEMORY} s ${mem} + evaluation ${EST_EVAL} = ${c1} s of ${d1}"
    echo "  beside them: the CPU references, ${ns} x ${EST_REF} s on ${CORES} cores, ${refs} s; the HF check; PyTorch's compile of command 2's cases"
    echo "command 2: timeout_s LEFT (the lease's time left, at most ${CALL_MAX_S}): bash dev/gpu_checks.sh 2 \"\$OUT\" LEFT"
    echo "  on paper: open ${EST_REOPEN} + attention ${np} x ${EST_TIME} s ${time2} + PyTorch ${EST_TORCH} + compute-sanitizer (DAPE) $((ntools * ndape)) runs x ${EST_SANITIZE_DAPE} s ${san2} = ${c2} s, then what command 1 left"
    echo "  LEFT after command 1's timeout: ${LEASE_S} - ${START_S} - ${TIMEOUT_1} = ${ntimeout2} s (stops itself at ${d2} s); if the machine went cold, the command stops a start (${START_S} s) sooner"
    echo "carry: ${KIT_DIR#"$ROOT"/} data/starter"
    echo "start + command 1 + command 2: ${START_S} + ${TIMEOUT_1} + ${ntimeout2} = ${total} s of ${LEASE_S}; then give the machine back"
    local d3=$((TIMEOUT_3 - MARGIN_S)) nt runs c3
    nt=$(wc -w <<< "$TASK_TASKS")
    runs=$(( $(wc -w <<< "$tasks") * nt ))
    c3=$(( EST_OPEN + (runs + TASK_JOBS - 1) / TASK_JOBS * EST_TASK_RUN ))
    echo "command 3: timeout_s ${TIMEOUT_3}, stops itself at ${d3} s: bash dev/gpu_checks.sh 3 \"\$OUT\""
    echo "  the tasks' study, in a lease of its own after one whose command 1 passed (its logs1's results.tsv copied to ${KIT_DIR#"$ROOT"/}/results1.tsv):" \
         "start + command 3 = $((START_S + TIMEOUT_3)) s of ${LEASE_S}; or after command 1 in the same lease, its timeout LEFT"
    echo "  on paper: open ${EST_OPEN} + $(wc -w <<< "$tasks") entries x ${nt} tasks = ${runs} runs, ${TASK_JOBS} at once, x ${EST_TASK_RUN} s $(( c3 - EST_OPEN )) = ${c3} s of ${d3} ($(echo "${TASK_SETTINGS[@]}"))"
    [ $c1 -le $d1 ] && [ $c2 -le $d2 ] && [ $total -le $LEASE_S ] && [ $c3 -le $d3 ] || { echo "the commands do not fit the lease on paper" >&2; return 1; }
}

# the command line's use, on stderr, and exit 1
usage() { echo "usage: $0 1|2|3 [OUTDIR [LEFT]] | plan   (LEFT: the lease's seconds left)" >&2; exit 1; }
[ $# -ge 1 ] || usage
if [ "$1" = plan ]; then plan; exit; fi
[ "$1" = 1 ] || [ "$1" = 2 ] || [ "$1" = 3 ] || usage
N=$1
OUTDIR=$(abs "${2:-${OUT:-$WORK/out$N}}")
LEFT_S=${3:-}
[ -z "$LEFT_S" ] || [[ $LEFT_S =~ ^[1-9][0-9]*$ ]] || usage
COLD=0
[ -e "$WORK/kit/sum" ] || COLD=1 # a fresh machine: its start came out of LEFT
case $N in 1) timeout_s=$TIMEOUT_1 ;; 2) timeout_s=$((LEASE_S - START_S - TIMEOUT_1)) ;; 3) timeout_s=$TIMEOUT_3 ;; esac
why_deadline="its timeout $timeout_s s less $MARGIN_S"
if [ -n "$LEFT_S" ]; then
    [ $N != 2 ] && [ $LEFT_S -ge $timeout_s ] || timeout_s=$LEFT_S
    [ $timeout_s -le $CALL_MAX_S ] || timeout_s=$CALL_MAX_S
    why_deadline="the lease's $LEFT_S s left: a timeout of $timeout_s s less $MARGIN_S"
    if [ $COLD = 1 ] && [ $((LEFT_S - START_S)) -lt $timeout_s ]; then
        timeout_s=$((LEFT_S - START_S))
        why_deadline="the lease's $LEFT_S s left less a machine's start ($START_S s) and $MARGIN_S"
    fi
fi
[ -z "${DEADLINE:-}" ] || why_deadline="DEADLINE, given"
DEADLINE=${DEADLINE:-$((timeout_s - MARGIN_S))}
mkdir -p "$OUTDIR" "$WORK" || exit 1
SUMMARY=$OUTDIR/summary$N.md
LEFT=$OUTDIR/left$N.txt
LOGS=$WORK/logs$N
RESULTS=$LOGS/results.tsv
REF=$WORK/ref
rm -rf "$LOGS"
mkdir -p "$LOGS" "$REF"
: > "$SUMMARY"
: > "$LEFT"
: > "$RESULTS"
T0=$(date +%s)

# ----------------------------------------------------------------------------
# the summary, the logs, the deadline

elapsed() { echo $(( $(date +%s) - T0 )); }
left() { echo $(( DEADLINE - $(date +%s) + T0 )); }
say() { echo "[$(elapsed) s] $*" | tee -a "$SUMMARY"; }
# a row of the current table; units that run beside others write theirs to ROWS, a file the
# summary gets when they end
row() { echo "$*" | tee -a "${ROWS:-$SUMMARY}"; }
table() { printf '\n%s\n' "$1" >> "$SUMMARY"; echo "$1" | sed 's/[^|]//g; s/|/|---/g; s/---$//' >> "$SUMMARY"; echo "$1"; }
# the logs, packed; tar's exit 1 (a log that grew while it was read) still packs them
pack() {
    cp "$SUMMARY" "$LOGS/" 2>/dev/null
    tar -C "$WORK" -czf "$OUTDIR/logs$N.tar.gz.tmp" "logs$N" 2>/dev/null
    [ $? -le 1 ] && mv "$OUTDIR/logs$N.tar.gz.tmp" "$OUTDIR/logs$N.tar.gz"
}
# rows of units that run side by side, each in a file of its own: into the summary in list
# order once they have ended (or when the command ends)
ORDERED=()
flush_ordered() { local f; for f in ${ORDERED[@]+"${ORDERED[@]}"}; do cat "$f" >> "$SUMMARY" 2>/dev/null; done; ORDERED=(); }
# tables of units in the background, each a file whose first line is its header: into the
# summary when they have ended (or when the command ends)
BACKGROUND=()
flush_background() {
    local f
    for f in ${BACKGROUND[@]+"${BACKGROUND[@]}"}; do table "$(head -n 1 "$f")" > /dev/null; tail -n +2 "$f" >> "$SUMMARY"; done
    BACKGROUND=()
}
# a process and everything it started
kill_tree() { local p c; for p in "$@"; do for c in $(ps -o pid= --ppid "$p" 2>/dev/null); do kill_tree "$c"; done; kill "$p" 2>/dev/null; done; }
# the end of a command, however it ends: what runs beside is stopped, the rows still out go
# into the summary, the counts, the last pack; exit 0 only when every run was ok
finish() {
    local pids
    pids=$(jobs -p)
    [ -z "$pids" ] || kill_tree $pids
    flush_ordered
    flush_background
    awk '!seen[$0]++' "$LEFT" > "$LEFT.tmp" && mv "$LEFT.tmp" "$LEFT" # once each, in the order left
    [ $N != 1 ] || cp "$LEFT" "$WORK/left1.txt"
    local ok all
    ok=$(grep -c $'\tok$' "$RESULTS")
    all=$(wc -l < "$RESULTS")
    say "end: $ok ok, $(grep -c $'\tFAIL' "$RESULTS") failed, $(grep -c $'\tSKIPPED' "$RESULTS") skipped," \
        "$(grep -c $'\tnot run' "$RESULTS") not run; $(wc -l < "$LEFT") units left ($(basename "$LEFT"))"
    pack
    [ "$all" -gt 0 ] && [ "$ok" = "$all" ] && exit 0 # every run ok: the only success
    exit 1
}
trap finish EXIT
trap 'say "stopped by a signal"; exit 1' TERM INT

# result NAME RESULT SECONDS: one line of results.tsv (every run, also those that did not run)
result() { printf '%s\t%s\t%s\n' "$1" "$3" "$2" >> "$RESULTS"; }
# leave: the current unit (UNIT) did not run to its end for lack of time; command 2 retries it
leave() { [ -z "${UNIT:-}" ] || echo "$UNIT" >> "$LEFT"; }
# compute-sanitizer's counts in a log, "errors warnings" (racecheck reports both, the other
# tools errors only); nothing where the log has no summary
san_counts() {
    sed -n -e 's/.*RACECHECK SUMMARY: [0-9]* hazards\{0,1\} displayed (\([0-9]*\) errors\{0,1\}, \([0-9]*\) warnings\{0,1\}).*/\1 \2/p' \
           -e 's/.*ERROR SUMMARY: \([0-9]*\) errors\{0,1\}.*/\1 0/p' "$1" 2>/dev/null | head -n 1
}

# run NAME CAP MIN PASS CMD...: CMD with its output in $LOGS/NAME.log, within CAP seconds (and
# GPU_CHECKS_CAP, and the time left); the result (printed, and in results.tsv): ok (exit 0 and
# a line matching each extended regex of PASS, joined by " && "), SKIPPED (the program found no
# GPU), FAIL (exit status, signal, compute-sanitizer's errors, its own timeout, or a PASS line
# missing), not run (deadline): started with less than MIN seconds left, or stopped by the
# deadline before its own timeout; then the unit is left for command 2
run() {
    local name=$1 cap=$2 min=$3 pass=$4 t lim log=$LOGS/$1.log rc start took sig cut=0
    shift 4
    lim=$cap
    [ $CAP -lt $lim ] && lim=$CAP
    t=$(( $(left) - 3 ))
    if [ $t -lt $min ]; then
        result "$name" "not run (deadline)" 0
        leave
        echo "not run (deadline)"
        return
    fi
    if [ $lim -lt $t ]; then t=$lim; else cut=1; fi # cut: the deadline, not the run's own cap, ends it
    start=$(date +%s)
    timeout -k 5 $t "$@" < /dev/null > "$log" 2>&1
    rc=$?
    took=$(( $(date +%s) - start ))
    if [ "$(stat -c %s "$log")" -gt 4000000 ]; then # a flood of errors: its start and its end come back
        { head -c 2000000 "$log"; printf '\n[... cut ...]\n'; tail -c 2000000 "$log"; } > "$log.cut" && mv "$log.cut" "$log"
    fi
    local r detail counts p
    counts=$(san_counts "$log")
    # what a failure printed: the number of failed checks, or its last line
    detail=", failed checks: $(grep -cw FAIL "$log")"
    [ "$detail" != ", failed checks: 0" ] || detail=": $(grep . "$log" | tail -n 1 | tr -d '|' | cut -c1-100)"
    if [ $rc = 124 ] || { [ $rc = 137 ] && [ $took -ge $t ]; }; then
        if [ $cut = 1 ]; then r="not run (deadline)"; leave; else r="FAIL (timeout after $t s)"; fi
    elif grep -qE "no CUDA device|no CUDA-capable device" "$log"; then r="SKIPPED (no CUDA device)"
    elif [ "${DEVICE:-0}" = 0 ] && grep -q "CUDA driver version is insufficient" "$log"; then r="SKIPPED (no CUDA device: no driver)" # llm.c's words
    elif grep -qE '^[a-z_]+: skipped \(' "$log"; then r="SKIPPED ($(grep -m1 -oE 'skipped \(.*' "$log" | cut -c10- | tr -d ')'))"
    elif [ $rc -gt 128 ]; then sig=$(kill -l $((rc - 128)) 2>/dev/null); r="FAIL (signal ${sig:-$((rc - 128))})"
    elif [ -n "$counts" ] && [ "${counts%% *}" != 0 ]; then r="FAIL (${counts%% *} compute-sanitizer errors)"
    elif [ $rc != 0 ]; then r="FAIL (exit $rc$detail)"
    else
        r=ok
        while IFS= read -r p; do grep -qE -- "$p" "$log" || r="FAIL (exit 0 without its success line)"; done <<< "${pass// && /$'\n'}"
    fi
    result "$name" "$r" $took
    echo "$r"
}

# pool: at most POOL of the functions given to `spawn` at once
pool_pids=()
spawn() {
    "$@" &
    pool_pids+=($!)
    local alive p
    while [ ${#pool_pids[@]} -ge $POOL ]; do
        wait -n "${pool_pids[@]}" 2> /dev/null || sleep 0.2 # (bash before 5.1: -n takes no ids)
        alive=()
        for p in "${pool_pids[@]}"; do kill -0 $p 2>/dev/null && alive+=($p); done
        pool_pids=(${alive[@]+"${alive[@]}"})
    done
}
pool_wait() { local p; for p in ${pool_pids[@]+"${pool_pids[@]}"}; do wait $p; done; pool_pids=(); }

# ----------------------------------------------------------------------------
# the kit: unpacked once per kit (kept for command 2), complete, its libraries found

manifest() { sed -n "s/^$1 //p" "$WORK/kit/manifest"; }
open_kit() {
    local tarball=$KIT_DIR/kit.tar.xz sum missing extra lib d r
    if [ ! -f "$tarball" ]; then say "FAIL: no kit at $tarball (make gpu-kit, and carry $KIT_DIR)"; return 1; fi
    sum=$(sha256sum "$tarball" | cut -c1-16)
    if [ "$(cat "$WORK/kit/sum" 2>/dev/null)" != "$sum" ]; then
        rm -rf "$WORK/kit"
        mkdir -p "$WORK/kit"
        if ! { xz -dc "$tarball" | tar -C "$WORK/kit" -xf -; } 2>> "$LOGS/kit.log" &&
           ! python3 -c "import sys, tarfile; tarfile.open(sys.argv[1]).extractall(sys.argv[2])" "$tarball" "$WORK/kit" 2>> "$LOGS/kit.log"; then
            say "FAIL: the kit does not unpack ($LOGS/kit.log)"
            return 1
        fi
        echo "$sum" > "$WORK/kit/sum"
        rm -rf "$REF" "$WORK/sanitizer.probe" && mkdir -p "$REF" # another kit: its own references
    fi
    rm -f "$REF"/*.busy # a reference being written by a command that has ended
    BIN=$WORK/kit/bin
    missing=$(for b in $(manifest bin); do [ -x "$BIN/$b" ] || echo "$b"; done)
    extra=$(ls "$BIN" | grep -vxF -f <(manifest bin))
    if [ -n "$missing$extra" ]; then say "FAIL: the kit differs from its manifest: missing $(echo $missing), extra $(echo $extra)"; return 1; fi
    say "kit $(manifest revision) (tree $(git rev-parse --short HEAD 2>/dev/null || echo unknown)), llm.c $(manifest llmc), BLAS $(manifest blas):" \
        "$(manifest bin | wc -l) binaries, complete; they need glibc $(manifest glibc), here $(ldd --version 2>/dev/null | head -n 1 | grep -oE '[0-9]+\.[0-9]+$')"
    # libraries: the toolkit's and torch's folders where the loader does not find them
    missing=$(ldd "$BIN"/* 2>&1 | sed -n 's/^\t*\(lib[^ ]*\) => not found/\1/p' | sort -u)
    for lib in $missing; do
        for d in /usr/local/cuda/lib64 /usr/local/cuda/targets/x86_64-linux/lib $(ls -d /usr/local/cuda-*/lib64 2>/dev/null) \
                 $(python3 -c "import nvidia, os; [print(os.path.join(p, q, 'lib')) for p in nvidia.__path__ for q in sorted(os.listdir(p))]" 2>/dev/null); do
            if [ -e "$d/$lib" ]; then export LD_LIBRARY_PATH="$d${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"; break; fi
        done
    done
    missing=$(ldd "$BIN"/* 2>&1 | grep "not found" | sed 's/^[[:space:]]*//' | sort -u)
    if [ -n "$missing" ]; then # the last resort: the kit's binaries built here, checked against the kit
        say "libraries not found: $(echo $missing); building the kit here (make gpu-kit-bins)"
        r=$(UNIT="" run kit_rebuild 600 120 "^staged " make -j"$(nproc)" gpu-kit-bins $([ -d "$WORK/kit/llmc" ] && echo LLMC_DIR="$WORK/kit/llmc"))
        [ "$r" = ok ] || { say "FAIL: the rebuild: $r ($LOGS/kit_rebuild.log)"; return 1; }
        BIN=$ROOT/build/kit/stage/bin
        missing=$(for b in $(manifest bin); do [ -x "$BIN/$b" ] || echo "$b"; done)
        [ -z "$missing" ] || { say "FAIL: the rebuild lacks $(echo $missing) of the kit"; return 1; }
        missing=$(ldd "$BIN"/* 2>&1 | grep "not found" | sed 's/^[[:space:]]*//' | sort -u)
        [ -z "$missing" ] || { say "FAIL: libraries not found after the rebuild: $(echo $missing)"; return 1; }
    fi
    say "libraries: all found${LD_LIBRARY_PATH:+ (LD_LIBRARY_PATH=$LD_LIBRARY_PATH)}"
    STEMS=$(manifest stems)
    PES=$(manifest pes)
    PATHS=$(manifest paths)
    STEM0=${STEMS%% *}
}

# the GPU's dense bf16 peak in TFLOP/s by its name (the datasheets' figures, as train_gpt2.cu's
# gpu_peak_tflops has them); nothing for another GPU
peak_tflops() {
    case $1 in
        *H100*PCIe*) echo 756 ;;
        *H100*NVL*) echo 835 ;;
        *H100*|*H200*) echo 989.4 ;;
    esac
}

# the machine, once per command: DEVICE=1 with a usable GPU; its description in machine.txt,
# written in the background, each part under a timeout (a hung driver holds nothing)
machine() {
    (
        for c in "date -u" "uname -a" nproc "free -g" nvidia-smi "nvcc --version" "command -v compute-sanitizer gcc make xz python3" \
                 "$PY -c \"import torch, transformers; print('torch', torch.__version__, 'cuda', torch.version.cuda, 'transformers', transformers.__version__)\"" \
                 "ldconfig -p | grep -E 'cublas|gomp|nccl|mpi|openblas|nvidia-ml'"; do
            echo "\$ $c"
            timeout 20 bash -c "$c" < /dev/null 2>&1
        done
    ) > "$LOGS/machine.txt" 2>&1 &
    local gpu rc
    gpu=$(timeout 10 nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv,noheader < /dev/null 2>/dev/null | head -n 1)
    GPU_NAME=${gpu%%,*}
    PEAK=$(peak_tflops "$GPU_NAME")
    DEVICE=0
    timeout 60 "$BIN/test_gpt2cu_${STEM0}_fp32" device < /dev/null > "$LOGS/device.log" 2>&1
    rc=$?
    if [ $rc = 0 ]; then
        DEVICE=1
        say "GPU: ${gpu:-(nvidia-smi gave nothing)}; $(nproc) cores; deadline ${DEADLINE} s ($why_deadline)"
    elif [ $rc = 1 ] && [ ! -s "$LOGS/device.log" ]; then
        say "no CUDA device (test_gpt2cu_${STEM0}_fp32 device): every GPU run below is SKIPPED or FAILS; deadline ${DEADLINE} s ($why_deadline)"
    else # a driver's or a runtime's error is no missing device: its words
        say "the CUDA device does not answer (test_gpt2cu_${STEM0}_fp32 device: exit $rc: $(grep . "$LOGS/device.log" | tail -n 1 | cut -c1-160));" \
            "nvidia-smi: ${gpu:-nothing}; every GPU run below is SKIPPED or FAILS; deadline ${DEADLINE} s ($why_deadline)"
    fi
    CS=$(command -v compute-sanitizer || ls /usr/local/cuda*/bin/compute-sanitizer 2>/dev/null | head -n 1)
    TRAIN="data/starter/starter_train_*.bin"
    VAL="data/starter/starter_val_*.bin"
    ls $TRAIN $VAL > /dev/null 2>&1 || say "no data/starter shards (carry data/starter): the trainers FAIL"
}

# the python that has torch: python3, else the GPU machine's own environment
PY=python3
TORCH_PY=${GPU_CHECKS_PYTHON:-/opt/torch/.venv/bin/python3}
python3 -c "import importlib.util, sys; sys.exit(importlib.util.find_spec('torch') is None)" 2> /dev/null ||
    { [ -x "$TORCH_PY" ] && PY=$TORCH_PY; }

# ----------------------------------------------------------------------------
# the units: each runs on its own (command 2 retries them by name) and writes its own rows

# the tensor-core instructions against the layouts the CPU emulation implements
u_mma() { row "| mma_check (mma.sync, ldmatrix, cp.async as emulated) | $(run mma_check 60 5 '^ok$' "$BIN/mma_check") |"; }

# compute-sanitizer, once per machine (kept in the work folder): memcheck on mma_check with the
# kernel filter; CS_WHY says why it cannot be used (a runtime that refuses it: "Device not
# supported", error 999), and then every compute-sanitizer row says so and costs nothing
probe_sanitizer() {
    CS_WHY=""
    if [ $DEVICE = 0 ]; then CS_WHY="no CUDA device"; return; fi
    if [ -z "$CS" ]; then CS_WHY="compute-sanitizer not found"; return; fi
    if [ -s "$WORK/sanitizer.probe" ]; then
        CS_WHY=$(cat "$WORK/sanitizer.probe")
        row "| compute-sanitizer's probe, by an earlier command on this machine | $CS_WHY |"
        [ "$CS_WHY" != usable ] || CS_WHY=""
        return
    fi
    local r log=$LOGS/sanitizer_probe.log refused
    r=$(UNIT="" run sanitizer_probe 60 10 '^ok$ && SUMMARY: ' "$CS" --tool memcheck "${CS_FILTER[@]}" "$BIN/mma_check")
    [ "$r" != "not run (deadline)" ] || return # the sanitizer's runs are left too
    refused=$(grep -m1 -iE "device not supported|error 999|unrecognized option|unknown option|invalid value|not supported on this" "$log" | sed 's/^=* *//; s/^Error: //' | cut -c1-120)
    if [ -n "$refused" ] || { [ "$r" != ok ] && [ "$(grep "^mma_check"$'\t' "$RESULTS" | cut -f3)" = ok ]; }; then
        CS_WHY="compute-sanitizer unavailable: ${refused:-$r on mma_check, which passes alone}"
        sed -i "/^sanitizer_probe"$'\t'"/d" "$RESULTS" # no failure of the project's: a tool that cannot run here
        result sanitizer_probe "SKIPPED ($CS_WHY)" 0
    fi
    echo "${CS_WHY:-usable}" > "$WORK/sanitizer.probe"
    row "| compute-sanitizer's probe (memcheck on mma_check, cuBLAS's kernels left out) | ${CS_WHY:-$r} |"
}

# the CPU reference of a stem (llmc/debug_state.h: 167 MB), on one core: $REF/STEM.busy while
# it is written, $REF/STEM.done once it is
u_ref() {
    local s=$1
    if [ -e "$REF/$s.done" ]; then return; fi
    if [ $DEVICE = 0 ]; then result "ref_$s" "not run (no CUDA device to compare with)" 0; return; fi
    touch "$REF/$s.busy"
    [ "$(OMP_NUM_THREADS=1 run "ref_$s" 300 10 '^wrote ' nice -n 5 "$BIN/test_gpt2_$s" debug-state "$REF/$s")" = ok ] && touch "$REF/$s.done"
    rm -f "$REF/$s.busy"
}
# the references of stems, in the background at once (one core each), before the units that
# compare with them: each unit then waits for its own (UNITS_BESIDE: the units in the background)
UNITS_BESIDE=()
refs_first() {
    local s
    for s in "$@"; do
        [ $DEVICE = 0 ] || [ -e "$REF/$s.done" ] || [ -e "$REF/$s.busy" ] || { touch "$REF/$s.busy"; UNIT="ref $s" u_ref "$s" & UNITS_BESIDE+=($!); }
    done
}
# the reference of a stem for a unit that compares with it: waits for the one being written, or
# writes it; prints why there is none
need_ref() {
    local s=$1
    [ $DEVICE = 1 ] || return 0
    while [ -e "$REF/$s.busy" ] && [ $(left) -gt 10 ]; do sleep 1; done
    [ -e "$REF/$s.done" ] || grep -q "^ref_$s"$'\t' "$RESULTS" || u_ref "$s"
    [ -e "$REF/$s.done" ] || { echo "not run (reference: $(grep "^ref_$s"$'\t' "$RESULTS" | tail -n 1 | cut -f3))"; return 1; }
}

# the worst check in logs of test_gpt2cu: its error over its tolerance, and what it checks
# ("0.52: grad wte"); "-" where the logs have no check lines
worst() {
    cat "$@" 2>/dev/null | sed -n \
        -e 's/^  \(.*[^ ]\)  *\(ok  \|FAIL\)  (\([^,]*\), tolerance \([^)]*\))$/\3 \4 \1/p' \
        -e 's/^  \(.*[^ ]\)  *rel L2 \([^ ]*\)  max abs [^ ]*  \(ok  \|FAIL\) (tolerance \([^)]*\))$/\2 \4 \1/p' |
    awk '{ t = $2 + 0; if (t <= 0) next
           name = $0; sub(/^[^ ]+ [^ ]+ /, "", name); sub(/:.*/, "", name); gsub(/  +/, " ", name); sub(/ [0-9]+$/, "", name)
           if ($1 !~ /^-?[0-9]/) { bad = name; next }
           r = $1 / t; if (!n || r > best) { best = r; what = name; n = 1 } }
         END { if (bad != "") print "not finite: " substr(bad, 1, 40); else if (n) printf "%.2f: %s\n", best, substr(what, 1, 40); else print "-" }'
}

# GPU vs CPU of a stem: bf16 and fp32, against the reference (logits, loss, gradients, 10
# steps) and the attention kernels alone at T = 4096 and shapes that are no multiple of the
# tiles; per precision the worst error over its tolerance
u_test() {
    local s=$1 a16 a32 r16 r32 why
    # the attention first: it needs no reference, which may still be written
    a16=$(OMP_NUM_THREADS=2 run "attention_$s" 120 10 '^all GPU tests passed' "$BIN/test_gpt2cu_$s" attention)
    a32=$(OMP_NUM_THREADS=2 run "attention_${s}_fp32" 120 10 '^all GPU tests passed' "$BIN/test_gpt2cu_${s}_fp32" attention)
    if why=$(need_ref "$s"); then
        r16=$(run "test_$s" 120 10 '^all GPU tests passed' "$BIN/test_gpt2cu_$s" reference "$REF/$s")
        r32=$(run "test_${s}_fp32" 120 10 '^all GPU tests passed' "$BIN/test_gpt2cu_${s}_fp32" reference "$REF/$s")
    else
        r16=$why; r32=$why
        result "test_$s" "$why" 0
        result "test_${s}_fp32" "$why" 0
        [[ $why == *deadline* ]] && leave
    fi
    row "| $s | $r16 | $a16 | $(worst "$LOGS/test_$s.log" "$LOGS/attention_$s.log") | $r32 | $a32 | $(worst "$LOGS/test_${s}_fp32.log" "$LOGS/attention_${s}_fp32.log") |"
}

# compute-sanitizer TOOL on a program of the kit, cuBLAS's kernels left out: ok when the
# program passes (PASS) and the tool reports no error; its errors and warnings apart
u_sanitizer() {
    local tool=$1 prog=$2 pass=$3 r c="- -"
    shift 3
    if [ -n "$CS_WHY" ]; then r="SKIPPED ($CS_WHY)"; result "${tool}_$prog" "$r" 0
    else
        r=$(run "${tool}_$prog" 120 60 "$pass && SUMMARY: " "$CS" --tool "$tool" "${CS_FILTER[@]}" "$BIN/$prog" "$@")
        c=$(san_counts "$LOGS/${tool}_$prog.log")
        c=${c:-- -}
    fi
    row "| $tool | $prog $* | ${c%% *} | ${c#* } | $r |"
}
u_sanitize_attention() {
    if [ -x "$BIN/attention_$2" ]; then u_sanitizer "$1" "attention_$2" '^ok$' check
    else result "${1}_attention_$2" "SKIPPED (not in the kit)" 0; row "| $1 | attention_$2 check | - | - | SKIPPED (not in the kit) |"; fi
}
u_sanitize_dape() {
    local tool=$1 s=$2 why
    if [ ! -x "$BIN/test_gpt2cu_$s" ]; then why="SKIPPED (not in the kit)"
    elif [ -n "$CS_WHY" ] || why=$(need_ref "$s"); then u_sanitizer "$tool" "test_gpt2cu_$s" '^all GPU tests passed' reference "$REF/$s"; return; fi
    result "${tool}_test_gpt2cu_$s" "$why" 0
    [[ $why == *deadline* ]] && leave
    row "| $tool | test_gpt2cu_$s reference | - | - | $why |"
}

# evaluation memory at 16k tokens (test_gpt2cu memory, bf16) of an attention path: alone on the
# GPU, whose free memory it reads
u_memory() {
    if [ -x "$BIN/test_gpt2cu_$1" ]; then row "| $1 | $(run "memory_$1" 60 10 '^all GPU tests passed' "$BIN/test_gpt2cu_$1" memory) |"
    else result "memory_$1" "SKIPPED (not in the kit)" 0; row "| $1 | SKIPPED (not in the kit) |"; fi
}

# GPT-Small at T = 1024, B sequences: ours (PE) or llm.c's trainer (llm.c) on the same shards,
# alone; milliseconds from the step lines (the mean of steps 3..), tokens/s from them, MFU by one formula for every trainer: (6 N + 6 L C T) flops a token (llm.c's estimate;
# N, L, C as the trainer prints them) at those tokens/s over the GPU's peak; the peak memory of
# the model (ours) and of the device
u_bench() {
    local name=$1 B=$2 r log smi sp cmd
    log=$LOGS/bench_${name}_b$B.log
    if [ "$name" = llm.c ] && [ "$(manifest llmc)" = none ]; then
        r="SKIPPED (llm.c not in the kit: make gpu-kit LLMC_DIR=...)"
        result "bench_llm.c_b$B" "$r" 0
        row "| llm.c | $B | - | - | - | - | - | - | $r |"
        return
    fi
    if [ "$name" = llm.c ]; then # -v 0 divides by zero in llm.c: one validation batch at the start and the end
        cmd=("$BIN/llmc_train_gpt2cu" -e d12 -b "$B" -t $BENCH_T -x $BENCH_STEPS -v 100000 -m 1 -s 0 -i "$TRAIN" -j "$VAL")
    else
        cmd=("$BIN/train_gpt2cu_$name" -e small -b "$B" -t $BENCH_T -x $BENCH_STEPS -u 5 -m 0 -s 0 -E 1024 -K 8192 -W -1 -i "$TRAIN" -j "$VAL")
    fi
    # the device's memory every 200 ms or so until the run ends (a stop file, no signal that
    # could come before the sampler is running), each sample under a timeout
    smi=$LOGS/smi_${name}_b$B.csv
    rm -f "$smi.stop"
    (
        while [ ! -e "$smi.stop" ] && [ $(left) -gt 0 ]; do
            timeout 5 nvidia-smi --query-gpu=memory.used --format=csv,noheader,nounits < /dev/null 2> /dev/null
            sleep 0.2
        done > "$smi"
    ) &
    sp=$!
    r=$(run "bench_${name}_b$B" 150 30 '^step +[0-9]+/' "${cmd[@]}")
    touch "$smi.stop"
    wait $sp
    rm -f "$smi.stop"
    local n l c fields="- | - | - | -" peak="" device=- # the run's numbers, where it ran
    if [ -e "$log" ]; then
        device=$(sort -n "$smi" 2> /dev/null | tail -n 1 | grep . || echo -)
        n=$(sed -n 's/^| *\(num_\)\{0,1\}parameters *| *\([0-9][0-9]*\) .*/\2/p' "$log" | head -n 1)
        l=$(sed -n -e 's/^| *num_layers L *| *\([0-9][0-9]*\) .*/\1/p' -e 's/^| *config *| *L=\([0-9][0-9]*\) .*/\1/p' "$log" | head -n 1)
        c=$(sed -n -e 's/^| *channels C *| *\([0-9][0-9]*\) .*/\1/p' -e 's/^| *config *| .* C=\([0-9][0-9]*\) .*/\1/p' "$log" | head -n 1)
        fields=$(awk -v bt=$((B * BENCH_T)) -v T=$BENCH_T -v N="$n" -v L="$l" -v C="$c" -v peak="$PEAK" '
            /^step +[0-9]+\// { n++; for (i = 2; i <= NF; i++) { if ($i == "loss" && !l1) l1 = $(i + 1); if ($i == "loss") ln = $(i + 1) }
                                if (n < 3) next
                                for (i = 2; i <= NF; i++) if ($i == "ms") { ms += $(i - 1); k++ } }
            END { if (!k) { printf "- | - | - | -"; exit }
                  tps = bt / (ms / k) * 1000
                  mfu = (N != "" && L != "" && C != "" && peak != "") ? sprintf("%.1f%%", 100 * (6 * N + 6 * L * C * T) * tps / (peak * 1e12)) : "-"
                  printf "%.1f | %.0f | %s | %s -> %s", ms / k, tps, mfu, l1, ln }' "$log")
        peak=$(awk -F'|' '$3 ~ /nonoverlap/ { gsub(/ /, "", $8); print $8; exit }' "$log")
    fi
    row "| $name | $B | $fields | ${peak:--} | $device | $r |"
}

# the kit's evaluation trainer (manifest: eval) on GPT-Small at 1k, 4k and 16k tokens, alone:
# peak memory per length
u_eval() {
    local pe r log
    pe=$(manifest eval)
    log=$LOGS/eval_$pe.log
    r=$(run "eval_$pe" 120 30 '^\| +16384 \| nonoverlap' "$BIN/train_gpt2cu_$pe" -e small -t 1024 -x 0 -E 1024,4096,16384 -K 16384 -W -1 -i "$TRAIN" -j "$VAL")
    local rows
    rows=$(awk -F'|' '$3 ~ /nonoverlap/ { gsub(/ /, ""); print }' "$log" 2>/dev/null | awk -F'|' '{ printf "%s %s MiB; ", $2, $8 }')
    row "| $pe, GPT-Small, -x 0: peak memory by length: ${rows:--} | $r |"
}

# the HF export of learned's reference checkpoint, loaded by transformers' GPT2LMHeadModel:
# its loss on the reference's batch against the C trainer's (python/hf_check.py)
u_hf() {
    local r
    if ! $PY -c "import torch, transformers" 2> /dev/null; then r="SKIPPED ($PY has no torch or no transformers)"; result hf "$r" 0
    elif ! r=$(need_ref learned) || [ ! -e "$REF/learned.done" ]; then
        r=${r:-"not run (no CUDA device: no reference)"}
        result hf "$r" 0
        [[ $r == *deadline* ]] && leave
    else r=$(run hf 120 30 '^hf_check: .* ok$' nice -n 5 bash -c "$PY python/export_hf.py '$REF/learned_model.bin' '$WORK/hf' && $PY python/hf_check.py '$WORK/hf' '$REF/learned'"); fi
    row "| HF export of learned, transformers GPT2LMHeadModel: $(grep -m1 '^hf_check:' "$LOGS/hf.log" 2>/dev/null | cut -c11- | grep . || echo -) | $r |"
}

# the attention alone at SHAPE, the trainer's kernels timed only (dev/cuda/attention_bias time:
# the median of at least 100 ms of calls after 50 ms of warm-up, each call on a cold L2)
u_time() {
    local pe=$1 r log=$LOGS/time_$1.log
    r=$(run "time_$pe" 60 5 '^timed only' "$BIN/attention_$pe" time $SHAPE)
    [ "$r" = ok ] && r=timed
    local f b
    f=$(awk '/^  forward/ { print $2 " | " ($5 == "TFLOP/s" ? $4 : "-") }' "$log" 2>/dev/null)
    b=$(awk '/^  backward/ { print $2 " | " ($5 == "TFLOP/s" ? $4 : "-") }' "$log" 2>/dev/null)
    row "| ours: $pe | ${f:-- | -} | ${b:-- | -} | $r |"
}

# PyTorch at the same shape (dev/cuda/sdpa_bench.py, triton's do_bench: the same median):
# SDPA's flash backend, FlexAttention with no bias (compiled first) and with the biases as
# score_mod, its kernels compiled in command 1 where the cache is kept
u_torch() {
    local r log=$LOGS/torch.log
    r=$(run torch 150 30 'backward' $PY dev/cuda/sdpa_bench.py $SHAPE)
    awk '$2 == "forward" { f[$1] = $3 " | " $5 } $2 == "backward" { print "| torch: " $1 " | " f[$1] " | " $3 " | " $5 " | measured |" }' "$log" 2>/dev/null |
        while read -r line; do row "$line"; done
    grep -E "FAILED|skipped" "$log" 2>/dev/null | while read -r line; do row "| torch: $line | - | - | - | - | - |"; done
    row "| torch: every case | - | - | - | - | $r |"
}
# PyTorch's compile of command 2's FlexAttention cases, beside command 1's other work (niced):
# command 2 on the same machine then finds its kernels in the cache
u_torch_compile() {
    row "| PyTorch's FlexAttention kernels for command 2, compiled into $TORCHINDUCTOR_CACHE_DIR | $(run torch_compile 240 30 '^compiled ' nice -n 10 $PY dev/cuda/sdpa_bench.py --compile-only $SHAPE) |"
}

# ----------------------------------------------------------------------------
# the commands

# a table written by a background unit (FILE starts with its header); into the summary when
# it has ended, or when the command ends
background_table() { echo "$1" > "$2"; BACKGROUND+=("$2"); }

# command 1: correctness, speed, compute-sanitizer, memory, the evaluation (the HF check and
# PyTorch's compile beside them)
command1() {
    table "| run | result |"
    UNIT=mma u_mma
    probe_sanitizer
    pack
    # beside the GPU runs: the references, one core each; the HF check; PyTorch's compile
    refs_first $STEMS
    background_table "| check | result |" "$LOGS/hf.md"
    (UNIT=hf ROWS=$LOGS/hf.md u_hf > /dev/null) &
    UNITS_BESIDE+=($!)
    background_table "| PyTorch, for command 2 | result |" "$LOGS/torch_compile.md"
    (UNIT="" ROWS=$LOGS/torch_compile.md u_torch_compile > /dev/null) &
    UNITS_BESIDE+=($!)
    # correctness: every stem against its CPU reference, rows in list order
    local s t p B pe
    table "| stem | bf16 vs CPU | bf16 attention | bf16 worst (error / tolerance) | fp32 vs CPU | fp32 attention | fp32 worst (error / tolerance) |"
    for s in $STEMS; do
        ORDERED+=("$LOGS/test_$s.md")
        UNIT="test $s" ROWS=$LOGS/test_$s.md spawn u_test "$s"
    done
    pool_wait
    flush_ordered
    pack
    # speed, alone on the GPU
    table "| trainer | B | ms/step | tokens/s | MFU (of ${PEAK:-?} TFLOP/s) | loss first -> last | peak MiB (model) | peak MiB (device) | result |"
    for B in 8 32; do
        UNIT="bench llm.c $B" u_bench llm.c $B
        for pe in $(manifest bench); do UNIT="bench $pe $B" u_bench "$pe" $B; done
        pack
    done
    # compute-sanitizer on the attention of the distinct attention paths, cheapest tool first
    table "| compute-sanitizer | program | errors | warnings | result |"
    for t in $SANITIZE_TOOLS; do
        for p in $PATHS; do
            [[ " $PES " == *" $p "* ]] && UNIT="sanitize_attention $t $p" u_sanitize_attention $t $p
        done
    done
    pack
    table "| evaluation memory at 16k (bf16), the distinct attention paths | result |"
    for p in $PATHS; do UNIT="memory $p" u_memory "$p"; done
    pack
    table "| evaluation | result |"
    UNIT=eval u_eval
    say "waiting for the HF check and PyTorch's compile"
    wait ${UNITS_BESIDE[@]+"${UNITS_BESIDE[@]}"} # not for the machine's description, which the end stops
    flush_background
}

# a unit of left1.txt, as command 1 runs it
retry_unit() {
    UNIT=$1
    case $1 in
        mma|eval|hf) u_$1 ;;
        ref\ *) need_ref "${1#* }" > /dev/null ;;
        test\ *|sanitize_attention\ *|sanitize_dape\ *|memory\ *|bench\ *) u_${1%% *} ${1#* } ;;
        *) say "left1: unknown unit '$1'" ;;
    esac
}

# command 2: command 1's left correctness, the attention timed beside PyTorch, the rest of what
# command 1 left, compute-sanitizer on DAPE's whole model
command2() {
    local from=$WORK/left1.txt units=() unit p t refs=""
    [ -s "$from" ] || from=$KIT_DIR/left1.txt
    [ -s "$from" ] && mapfile -t units < "$from"
    table "| run | result |"
    probe_sanitizer
    # the references this command compares with, written at once (in parallel) first
    for unit in ${units[@]+"${units[@]}"}; do
        case $unit in test\ *|sanitize_dape\ *) refs="$refs ${unit##* }" ;; hf) refs="$refs learned" ;; esac
    done
    [ -n "$CS_WHY" ] || for p in $PATHS; do [[ " $PES " == *" $p "* ]] || refs="$refs $p"; done
    refs_first $refs
    if [ ${#units[@]} -gt 0 ]; then
        say "retrying what command 1 left ($from): $(printf '%s; ' "${units[@]}")"
        table "| retried: correctness | result |"
        for unit in "${units[@]}"; do case $unit in mma|ref\ *|test\ *) retry_unit "$unit" ;; esac; done
    else
        say "command 1 left nothing (no left1.txt in $WORK or $KIT_DIR)"
    fi
    pack
    table "| attention (T B NH HS = $SHAPE) | forward ms | forward TFLOP/s | backward ms | backward TFLOP/s | result |"
    for p in $PES; do UNIT="time $p" u_time "$p"; done
    pack
    UNIT=torch u_torch
    pack
    if [ ${#units[@]} -gt 0 ]; then
        table "| retried | result |"
        for unit in "${units[@]}"; do case $unit in mma|ref\ *|test\ *) ;; *) retry_unit "$unit" ;; esac; done
        pack
    fi
    # compute-sanitizer on DAPE's whole model (its kernels beside the others), cheapest tool first
    table "| compute-sanitizer | program | errors | warnings | result |"
    for t in $SANITIZE_TOOLS; do
        for p in $PATHS; do [[ " $PES " == *" $p "* ]] || UNIT="sanitize_dape $t $p" u_sanitize_dape $t "$p"; done
    done
}

# whether command 1 showed an entry of the task study equal to the CPU path: its stem's four
# runs ok (the reference comparison and the attention check, bf16 and fp32) in R1; an entry
# whose stem command 1 does not compare (DAPE on another base) needs its base's and those of
# the kit's stem of its DAPE variant. Prints why not
equal_in_1() {
    local e=$1 need s r why=""
    if [[ " $STEMS " == *" $e "* ]]; then need=$e
    elif [[ $e == *_dape* ]]; then
        need="${e%_dape*} $(for s in $STEMS; do [[ $s == *"_dape${e##*_dape}" ]] && { echo "$s"; break; }; done)"
        [ "$(wc -w <<< "$need")" = 2 ] || { echo "no stem of its DAPE variant (_dape${e##*_dape}) in command 1"; return 1; }
    else
        echo "not a stem of command 1"; return 1
    fi
    for s in $need; do
        for r in test_$s test_${s}_fp32 attention_$s attention_${s}_fp32; do
            grep -q "^$r"$'\t'".*"$'\t'"ok$" "$R1" 2> /dev/null || why="$why $r: $(grep "^$r"$'\t' "$R1" 2> /dev/null | tail -n 1 | cut -f3 | grep . || echo 'not run');"
        done
    done
    [ -z "$why" ] || { echo "command 1 (${R1#"$ROOT"/}):${why%;}"; return 1; }
}

# the study of the algorithmic tasks on the CUDA trainer (dev/tasks.sh), the entries that
# passed, several runs at once, stopped (its runs' checkpoints kept) before the deadline; its
# tables (tasks.md, tasks.csv) come back; the steps' milliseconds of its runs in the summary
u_tasks() {
    local entries=$1 r study=$WORK/tasks_study
    r=$(run tasks_study $CALL_MAX_S 30 '^wrote .*tasks\.md' env "${TASK_SETTINGS[@]}" ENTRIES="$entries" TRAINER=cuda BIN="$BIN" \
        TASKS_BIN="$BIN/tasks" JOBS=$TASK_JOBS DEADLINE=$(( $(left) - 30 )) bash dev/tasks.sh "$study")
    cp "$study/tasks.md" "$study/tasks.csv" "$OUTDIR/" 2> /dev/null
    [ ! -e "$study/tasks.png" ] || cp "$study/tasks.png" "$OUTDIR/"
    local progress
    progress=$(grep -m1 '^Runs finished' "$study/tasks.md" 2> /dev/null)
    # "Runs finished: X of the Y planned": the deadline left runs out where X < Y
    [ "$(sed -n 's/^Runs finished: \([0-9]*\) of the \([0-9]*\) planned.*/\1 \2/p' <<< "$progress" | awk '{ print ($1 < $2) }')" != 1 ] ||
        { leave; [ "$r" != ok ] || r="ok, not every run: the deadline (left3.txt; command 3 again on this machine resumes)"; }
    row "| the study ($(echo "${TASK_SETTINGS[@]}"), $TASK_JOBS runs at once): ${progress:-no tables} | $r |"
    # ms/step: the mean of the run's step lines from its third on (a run the deadline stopped
    # prints no average), and the last step reached, from which the next lease sizes its steps
    table "| task | entry | step reached | ms/step | val loss | result |"
    local f
    for f in "$study"/runs/*/*.log; do
        [ -e "$f" ] || continue
        row "| $(basename "$(dirname "$f")") | $(basename "$f" .log) | $(awk '/^step +[0-9]+\// { last = $2; if (++n < 3) next
                 for (i = 2; i <= NF; i++) if ($i == "ms") { ms += $(i - 1); k++ } }
            END { printf "%s | %s", (last == "" ? "-" : last), (k ? sprintf("%.1f", ms / k) : "-") }' "$f") |" \
            "$(grep '^val loss' "$f" | tail -n 1 | cut -d' ' -f3 | grep . || echo -) | $(grep -q '^tasks: pe' "$f" && echo evaluated || echo 'not finished') |"
        { echo "== $f"; tail -n 5 "$f"; } >> "$LOGS/tasks_runs_tail.log" # the runs' ends travel in the logs
    done
}

# command 3: the task study at the anchors' scale, each entry only where command 1 showed its
# CUDA path equal to the CPU path
command3() {
    R1=$WORK/logs1/results.tsv
    [ -s "$R1" ] || R1=$KIT_DIR/results1.tsv
    local e why ok=""
    table "| task study entry | equal to the CPU path in command 1 |"
    for e in $(manifest tasks); do
        if why=$(equal_in_1 "$e"); then ok="$ok $e"; row "| $e | yes |"; else row "| $e | no: not run ($why) |"; result "tasks_$e" "not run ($why)" 0; fi
    done
    pack
    table "| task study | result |"
    if [ -z "$ok" ]; then row "| no entry shown equal to the CPU path by command 1: nothing to run | not run |"; return; fi
    if [ $DEVICE = 0 ]; then result tasks_study "SKIPPED (no CUDA device)" 0; row "| the study | SKIPPED (no CUDA device) |"; return; fi
    UNIT=tasks u_tasks "$(echo $ok)"
}

say "GPU checks, command $N (dev/gpu_checks.sh), $(date -u +%Y-%m-%dT%H:%MZ)$([ $COLD = 1 ] && echo ", on a fresh machine")"
if [ "$DEADLINE" -le 0 ]; then say "FAIL: no time for this command: deadline $DEADLINE s ($why_deadline)"; exit 1; fi
open_kit || exit 1
machine
pack
case $N in 1) command1 ;; 2) command2 ;; 3) command3 ;; esac
