#!/usr/bin/env bash
# Length generalization on algorithmic tasks (docs/tasks.md): entries (an encoding, with
# randomized positions <pe>_rp<L>, or with DAPE <pe>_dape<variant>) trained on each task's
# examples of lengths 1..N (the loss on the answers only), then scored by exact match (greedy,
# -A) at the test lengths, over several seeds; the tables and their tests by dev/plot_tasks.py.
#
#   dev/tasks.sh [OUTDIR]            the study (default OUTDIR out/tasks); resumes one there
#   dev/tasks.sh --tables OUTDIR     only the tables of what OUTDIR has finished
#   dev/tasks.sh --docs OUTDIR       those tables into the documentation: docs/tasks-study.md
#                                    (every table), docs/tasks.csv, docs/tasks.png, and the summary
#                                    between the markers of docs/tasks.md and README.md
#   dev/tasks.sh --quick [OUTDIR]    a smoke test: 2 entries, 1 task, 1 seed, 150 steps
#
# The settings, from the environment (defaults: the CPU study of docs/tasks.md):
#   ENTRIES   the entries (default: CORE, the encodings every table reports; "all": every
#             encoding of the registry but BiPE's, each that takes them also with randomized
#             positions from [0, RP), and DAPE_1x3-Kerple; BiPE's separators are GPT-2's token
#             ids, of which 13 is the tasks' digit 6: named, bipe_* runs with segments ending there)
#   TASKS     tasks (sum copy reverse cycle even)   SEEDS  seeds (1 2 3 4 5)
#   N         training lengths 1..N (10)            LENGTHS  test lengths (./tasks write's default)
#   MODEL     preset (task5)  STEPS (8000)  LR (3e-3)  B (32)  WARMUP (100)  TEST examples a length (128)
#   W         the shortcut reader's symbols (5)     RP  randomized positions' range (512)
#   TRAINER   cpu (build/train_gpt2_<stem>, made here) or cuda (build/train_gpt2cu_<stem>)
#   BIN       the trainers' folder instead of build/ (nothing is made: a GPU kit's bin/)
#   TASKS_BIN ./tasks, the generator (default ./tasks, made here)
#   JOBS      runs at once (1; a GPU takes several)
#   DEADLINE  seconds from the start after which no run starts, and runs still going are
#             stopped (their checkpoints kept: the next call resumes them)
#
# Each seed has its own data (./tasks write -s SEED into OUTDIR/data/s<seed>) and its own initial
# draw (-R SEED): a seed is the same data for every entry, the pairing of the tables' tests. A run
# is OUTDIR/runs/<task>/<entry>_s<seed> (single-threaded on the CPU: the machines are shared),
# resumed from its last checkpoint (-y 1, one every CKPT steps); when it has been evaluated its
# rows go into OUTDIR/tasks.csv (entry,seed, then the trainer's tasks.csv columns), and a run
# whose rows are there is skipped: the study resumes where it stopped, however it stopped, and
# appends. The first call writes OUTDIR/study.txt (the settings); a later one with other settings
# that change a run's result is refused (seeds, entries and tasks may be added). Then
# OUTDIR/baselines.csv (./tasks baseline), tasks.md and tasks.png (dev/plot_tasks.py).
set -euo pipefail
CALLER=$PWD
cd "$(dirname "$0")/.."
ROOT=$PWD
abs() { case $1 in /*) echo "$1" ;; *) echo "$CALLER/$1" ;; esac; }
CORE="learned sinusoidal rope nope alibi t5 kerple fire cable cope kerple_dape1x3"
MODE=study
case ${1:-} in --tables) MODE=tables; shift ;; --docs) MODE=docs; shift ;; --quick) MODE=quick; shift ;; esac
if [ $MODE = quick ]; then OUT=$(abs "${1:-out/tasks_quick}"); else OUT=$(abs "${1:-out/tasks}"); fi
PY=python3 # the tables need no more than python3; the plot, matplotlib (Debian's python3 has it)
$PY -c "import matplotlib" 2> /dev/null || ! /usr/bin/python3 -c "import matplotlib" 2> /dev/null || PY=/usr/bin/python3
if [ $MODE = tables ] || [ $MODE = docs ]; then
    [ -e "$OUT/study.txt" ] || { echo "tasks.sh: $OUT holds no study (no study.txt)" >&2; exit 1; }
    $PY dev/plot_tasks.py "$OUT"
    echo "wrote $OUT/tasks.md, $OUT/summary.md"
    [ $MODE = docs ] || exit 0
    cp "$OUT/tasks.md" docs/tasks-study.md
    cp "$OUT/tasks.csv" docs/tasks.csv
    [ ! -e "$OUT/tasks.png" ] || cp "$OUT/tasks.png" docs/tasks.png
    # the summary between <!-- tasks-study:begin --> and <!-- tasks-study:end -->
    for f in docs/tasks.md README.md; do
        $PY - "$f" "$OUT/summary.md" <<'PY'
import sys
path, summary = sys.argv[1], open(sys.argv[2]).read()
text = open(path).read()
begin, end = "<!-- tasks-study:begin -->\n", "<!-- tasks-study:end -->"
if text.count(begin) != 1 or text.count(end) != 1:
    sys.exit("tasks.sh: %s lacks its markers %s and %s" % (path, begin.strip(), end))
head, rest = text.split(begin)
open(path, "w").write(head + begin + summary + rest[rest.index(end):])
PY
    done
    echo "wrote docs/tasks-study.md, docs/tasks.csv$([ -e "$OUT/tasks.png" ] && echo ", docs/tasks.png"), the summary in docs/tasks.md and README.md"
    exit 0
fi
if [ $MODE = quick ]; then
    : "${ENTRIES:=learned nope}" "${TASKS:=copy}" "${SEEDS:=1}" "${STEPS:=150}" "${MODEL:=task}" "${TEST:=32}" "${N:=5}"
fi
N=${N:-10}; W=${W:-5}; RP=${RP:-512}
MODEL=${MODEL:-task5}; STEPS=${STEPS:-8000}; LR=${LR:-3e-3}; B=${B:-32}; WARMUP=${WARMUP:-100}; TEST=${TEST:-128}; CKPT=${CKPT:-1000}
TASKS=${TASKS:-sum copy reverse cycle even}; SEEDS=${SEEDS:-1 2 3 4 5}
TRAINER=${TRAINER:-cpu}; JOBS=${JOBS:-1}; LENGTHS=${LENGTHS:-}
TASKS_BIN=$(abs "${TASKS_BIN:-$ROOT/tasks}")
case $TRAINER in cpu) prefix=train_gpt2_ ;; cuda) prefix=train_gpt2cu_ ;; *) echo "tasks.sh: TRAINER is cpu or cuda, not '$TRAINER'" >&2; exit 1 ;; esac
if [ "${ENTRIES:-}" = all ]; then
    ENTRIES=""
    for pe in $(make -s pe-list); do
        case $pe in bipe_*) continue ;; esac # its segments end at GPT-2's full stop and newlines, which the tasks have not
        ENTRIES="$ENTRIES $pe"
        # the registry's rp column (the Makefile's list of the encodings that take randomized positions)
        if [[ " $(make -s pe-rp-list) " == *" $pe "* ]]; then ENTRIES="$ENTRIES ${pe}_rp$RP"; fi
    done
    ENTRIES="$ENTRIES kerple_dape1x3"
fi
ENTRIES=$(echo ${ENTRIES:-$CORE})
stem() { echo "${1%_rp*}"; }
rp_flags() { case $1 in *_rp*) echo "-rp ${1##*_rp}" ;; esac; }

# the binaries: made here unless BIN names a folder of them
if [ -n "${BIN:-}" ]; then
    BIN=$(abs "$BIN")
else
    BIN=$ROOT/build
    make -s $( [ "$TASKS_BIN" = "$ROOT/tasks" ] && echo tasks) $(for e in $ENTRIES; do echo "build/$prefix$(stem "$e")"; done | sort -u)
fi
for e in $ENTRIES; do [ -x "$BIN/$prefix$(stem "$e")" ] || { echo "tasks.sh: no trainer $BIN/$prefix$(stem "$e") for entry $e" >&2; exit 1; }; done
[ -x "$TASKS_BIN" ] || { echo "tasks.sh: no task generator $TASKS_BIN (make tasks)" >&2; exit 1; }

# the settings that decide a run's result: a study resumed with others is refused
mkdir -p "$OUT"
settings="N=$N
model=$MODEL
steps=$STEPS
lr=$LR
batch=$B
warmup=$WARMUP
examples=$TEST
lengths=$LENGTHS
rp=$RP
W=$W
trainer=$TRAINER"
if [ -e "$OUT/study.txt" ]; then
    old=$(grep -vE '^(entries|tasks|seeds|outdir|command)=' "$OUT/study.txt")
    if [ "$old" != "$settings" ]; then
        echo "tasks.sh: $OUT holds a study of other settings ($(diff <(echo "$old") <(echo "$settings") | grep '^[<>]' | tr '\n' ' ')); give another OUTDIR" >&2
        exit 1
    fi
    union() { echo $(echo "$1 $2" | tr ' ' '\n' | grep . | awk '!seen[$0]++'); }
    ENTRIES_ALL=$(union "$(sed -n 's/^entries=//p' "$OUT/study.txt")" "$ENTRIES")
    TASKS_ALL=$(union "$(sed -n 's/^tasks=//p' "$OUT/study.txt")" "$TASKS")
    SEEDS_ALL=$(union "$(sed -n 's/^seeds=//p' "$OUT/study.txt")" "$SEEDS")
else
    ENTRIES_ALL=$ENTRIES; TASKS_ALL=$TASKS; SEEDS_ALL=$SEEDS
fi
HEADER="entry,seed,pe,train_len,step,task,min_len,max_len,examples,correct,accuracy,tokens,tokens_correct,token_accuracy"
if [ -e "$OUT/tasks.csv" ] && [ "$(head -n 1 "$OUT/tasks.csv")" != "$HEADER" ]; then
    echo "tasks.sh: $OUT/tasks.csv is not this script's table (its first line differs); left as it is" >&2
    exit 1
fi
[ -e "$OUT/tasks.csv" ] || echo "$HEADER" > "$OUT/tasks.csv"
printf '%s\nentries=%s\ntasks=%s\nseeds=%s\noutdir=%s\ncommand=%s\n' "$settings" "$ENTRIES_ALL" "$TASKS_ALL" "$SEEDS_ALL" "${OUT#"$ROOT"/}" \
    "$( [ $MODE = quick ] && echo "dev/tasks.sh --quick" || echo "dev/tasks.sh")" > "$OUT/study.txt.tmp"
mv "$OUT/study.txt.tmp" "$OUT/study.txt"

# the baselines of every task and test length; each seed's data (the same bytes every time)
data() {
    local seed=$1 dir=$OUT/data/s$1
    if [ ! -e "$dir/.complete" ]; then
        mkdir -p "$OUT/data"
        "$TASKS_BIN" write -n $N -e 32768 -v 256 -x $TEST -s $seed ${LENGTHS:+-l $LENGTHS} "$dir" $TASKS_ALL > /dev/null
        touch "$dir/.complete"
    fi
}
data "${SEEDS%% *}"
{
    echo "task,length,window,chance,shortcut,bound"
    for task in $TASKS_ALL; do
        lens=$(ls "$OUT/data/s${SEEDS%% *}/$task" | sed -n 's/^test_0*\([0-9][0-9]*\)\.bin$/\1/p' | sort -n | paste -sd,)
        "$TASKS_BIN" -w $W baseline "$task" "$lens" | tail -n +2
    done
} > "$OUT/baselines.csv"

# the runs whose rows are in tasks.csv: done
done_runs() { awk -F, 'NR > 1 { print $1 "," $2 "," $6 }' "$OUT/tasks.csv" | sort -u; }
# one run: train (or resume), evaluate, its rows into tasks.csv; a run stopped by the deadline
# (or anything) keeps its checkpoints for the next call
run_one() {
    local entry=$1 task=$2 seed=$3 run=$OUT/runs/$2/$1_s$3 d=$OUT/data/s$3/$2 t0 flags
    t0=$(date +%s)
    mkdir -p "$OUT/runs/$task"
    flags=(-i "$d/train.bin" -j "$d/val.bin" -A "$d/test_*.bin" -o "$run")
    if [ ! -e "$run/tasks.csv" ]; then
        local why="$task $entry seed $seed: the trainer failed (its log $run.log ends: $(tail -n 1 "$run.log" 2> /dev/null))"
        if [ -e "$run/DONE_$(printf %08d $STEPS)" ]; then # trained, not evaluated: its last checkpoint
            "$BIN/$prefix$(stem "$entry")" "${flags[@]}" -x 0 -y 1 >> "$run.log" 2>&1 || { echo "tasks.sh: $why" >&2; return 1; }
        else
            "$BIN/$prefix$(stem "$entry")" -e $MODEL -b $B -x $STEPS -l $LR -u $WARMUP -q 0.1 -v 0 -m 8 -n $CKPT -R $seed \
                $(rp_flags "$entry") "${flags[@]}" -y 1 >> "$run.log" 2>&1 || { echo "tasks.sh: $why" >&2; return 1; }
        fi
    fi
    # the last evaluation's rows, with the entry and the seed, appended under a lock
    awk -F, -v e="$entry" -v s=$seed 'NR > 1 { if ($3 > last) { last = $3; n = 0 } if ($3 == last) row[n++] = $0 }
        END { for (i = 0; i < n; i++) print e "," s "," row[i] }' "$run/tasks.csv" > "$run.rows"
    [ -s "$run.rows" ] || { echo "tasks.sh: $run/tasks.csv has no rows" >&2; return 1; }
    flock "$OUT/tasks.csv" -c "cat '$run.rows' >> '$OUT/tasks.csv'"
    rm -f "$run.rows" "$run"/state_* "$run"/DONE_*
    find "$run" -name 'model_*.bin' ! -name "model_$(printf %08d $STEPS).bin" -delete
    echo "$task $entry seed $seed: $(grep '^val loss' "$run.log" | tail -n 1), $(( $(date +%s) - t0 )) s"
}

[ "$TRAINER" = cuda ] || export OMP_NUM_THREADS=1
start=$(date +%s)
ran=0 failed=0 pids=()
past_deadline() { [ -n "${DEADLINE:-}" ] && [ $(( $(date +%s) - start )) -ge "$DEADLINE" ]; }
# the runs that have ended leave pids, a failed one counted
reap() {
    local p alive=()
    for p in ${pids[@]+"${pids[@]}"}; do
        if kill -0 "$p" 2> /dev/null; then alive+=("$p"); else wait "$p" || failed=$((failed + 1)); fi
    done
    pids=(${alive[@]+"${alive[@]}"})
}
# a process and everything it started (a run: its shell and its trainer)
kill_tree() { local c; for c in $(ps -o pid= --ppid "$1" 2> /dev/null); do kill_tree "$c"; done; kill "$1" 2> /dev/null || true; }
stop_all() { local p; for p in ${pids[@]+"${pids[@]}"}; do kill_tree "$p"; done; wait 2> /dev/null || true; pids=(); }
trap 'stop_all; exit 130' INT TERM
DONE_RUNS=$(done_runs)
for seed in $SEEDS; do # seed by seed: an interrupted study has every task and entry of the first seeds
    data $seed
    for task in $TASKS; do
        for entry in $ENTRIES; do
            grep -qx "$entry,$seed,$task" <<< "$DONE_RUNS" && continue
            while reap; [ ${#pids[@]} -ge "$JOBS" ] && ! past_deadline; do sleep 0.5; done
            past_deadline && break 3
            run_one "$entry" "$task" "$seed" &
            pids+=($!)
            ran=$((ran + 1))
        done
    done
done
# the runs still going: to their end, or stopped at the deadline (their checkpoints kept)
while reap; [ ${#pids[@]} -gt 0 ]; do
    if past_deadline; then echo "tasks.sh: the deadline (${DEADLINE} s): ${#pids[@]} runs stopped, their checkpoints kept"; stop_all; break; fi
    sleep 0.5
done
echo "$ran runs started, $failed failed, in $(( $(date +%s) - start )) s"
$PY dev/plot_tasks.py "$OUT"
echo "wrote $OUT/tasks.csv, $OUT/tasks.md$($PY -c 'import matplotlib' 2> /dev/null && echo ", $OUT/tasks.png")"
[ $failed -eq 0 ]
