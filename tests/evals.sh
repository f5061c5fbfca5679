#!/usr/bin/env bash
# The evaluation suite end to end (llmc/hellaswag.h, llmc/passkey.h, the test sets of -j,
# DAPE's last-N protocol and the context-use gap in llmc/driver.h):
#   1. HellaSwag's scoring against its definition, example by example, and malformed eval
#      files (test_gpt2 evals), for learned (contexts cut at maxT) and cable
#   2. the passkey prompts, keys, scoring and grid (test_gpt2 passkey); prompts that the C
#      tokenizer decodes and encodes back to the same tokens
#   3. a model trained 1000 steps on the passkey template retrieves the key at its
#      training length, and the same model untrained does not; the HellaSwag fixture, written
#      by data/hellaswag.sh, whose right answers repeat the template's text: the trained model
#      picks every one, the untrained one does not
#   4. two test sets, last-N windows and the context-use gap against the same numbers read
#      off other rows
#   5. the CUDA trainer, run on the CPU in the emulation (build/emulate/train_gpt2cu_*_fp32),
#      evaluates the models of parts 3 and 4 through the same driver: the same CSV files; and
#      two processes (mpirun) give the CPU trainer's files bit for bit
# The model of part 3 learns the template in a vocabulary of its own (the 560 GPT-2 ids of the
# texts and of the keys 10000..10999, renumbered: test_gpt2 passkey-remap; 2 layers, 64
# channels, 2 heads of 32: the CUDA path runs it too), so that it trains in seconds.
set -euo pipefail
cd "$(dirname "$0")/.."
ROOT=$PWD
DIR=$(mktemp -d /tmp/test_evals.XXXXXX)
trap 'rm -rf "$DIR"' EXIT
for need in build/train_gpt2_learned build/train_gpt2_cable build/test_gpt2_learned build/test_gpt2_cable ./tokenizer gpt2_passkey.bin \
            build/emulate/train_gpt2cu_learned_fp32 build/emulate/train_gpt2cu_cable_fp32; do
    [ -e "$need" ] || { echo "error: $need is missing; run the tests with \`make test-evals\`" >&2; exit 1; }
done
fail() { echo "FAIL: $*"; exit 1; }
ok() { echo "  ok    $*"; }
# csv_field FILE KEY_COLUMNS... COLUMN: the value of COLUMN in the row whose named columns have
# the given values (e.g. csv_field f.csv mode=last80 eval_len=160 gap)
csv_field() {
    local file=$1; shift
    awk -F, -v spec="$*" 'NR == 1 { for (i = 1; i <= NF; i++) col[$i] = i; n = split(spec, w, " "); next }
        { hit = 1; for (k = 1; k < n; k++) { split(w[k], kv, "="); if ($col[kv[1]] != kv[2]) hit = 0 }
          if (hit) { print $col[w[n]]; exit } }' "$file"
}

echo "=== HellaSwag scoring and files; passkey prompts, keys, scoring, grid"
build/test_gpt2_learned evals | tail -n +2
build/test_gpt2_cable evals | tail -n +2
build/test_gpt2_learned passkey gpt2_passkey.bin | tail -n +2
for spec in "65 0 10000" "100 0.3 54321" "300 1 99999" "256 0.5 31415"; do
    set -- $spec
    build/test_gpt2_learned passkey-prompt gpt2_passkey.bin "$1" "$2" "$3" > "$DIR/ids"
    ./tokenizer decode < "$DIR/ids" > "$DIR/text"
    ./tokenizer encode "$DIR/text" | cmp -s - "$DIR/ids" || fail "the prompt (L $1, depth $2, key $3) does not encode back to its tokens"
    answer="The pass key is $3"
    grep -q "The pass key is $3. Remember it. $3 is the pass key." "$DIR/text" && [ "$(tail -c ${#answer} "$DIR/text")" = "$answer" ] \
        || fail "the prompt (L $1, depth $2, key $3) lacks its key line or its answer"
done
ok "prompts decode to the template's text and encode back to the same tokens ($(head -c 60 "$DIR/text" | tr '\n' ' ')...)"

echo "=== a model trained on the passkey template; the HellaSwag fixture"
# the fixture: the beginnings of passkey prompts of the trained length (79 tokens, whose
# filler ends at "Here we go"); the right ending continues the template's text or gives the
# key back, the others are its words in another order; the label moves through every position
cat > "$DIR/fixture.jsonl" <<'JSONL'
{"ctx": "There is an important info hidden inside a lot of irrelevant text. Find it and memorize them. I will quiz you about the important information there.\nThe grass is green. The sky", "endings": ["is blue.", "is green.", "and back again.", "we go."], "label": 0}
{"ctx": "There is an important info hidden inside a lot of irrelevant text. Find it and memorize them. I will quiz you about the important information there.\nThe grass is green. The sky is blue\nThe pass key is 10005. Remember it. 10005 is the pass key.\nThe grass is green. The sky is\nWhat is the pass", "endings": ["is green.", "key? The pass key is", "sky is blue.", "go."], "label": 1}
{"ctx": "There is an important info hidden inside a lot of irrelevant", "endings": ["sky.", "grass.", "text.", "key."], "label": 2}
{"ctx": "There is an important info hidden inside a lot of irrelevant text. Find it and memorize them. I will quiz you about the important", "endings": ["pass.", "sky.", "green.", "information there."], "label": 3}
{"ctx": "There is an important info hidden inside a lot of irrelevant text. Find it and memorize them. I will quiz you about the important information there.\nThe grass is green. The sky is blue. The sun is yellow. Here we", "endings": ["is green.", "go", "key.", "blue."], "label": 1}
{"ctx": "There is an important info hidden inside a lot of irrelevant text. Find it and memorize them. I will quiz you about the important information there.\nThe grass is green. The sky is blue\nThe pass key is 10005. Remember", "endings": ["it. 10005 is the pass key.", "is green.", "key.", "sky is blue."], "label": 0}
{"ctx": "There is an important info hidden inside a lot of irrelevant text. Find it and memorize them. I will quiz you about the important information there.\nThe pass key is 10042. Remember it. 10042 is the pass key.\nThe grass is green. The sky is blue. The sun is yellow. Here we go\nWhat is the pass key? The pass key is", "endings": ["10007", "10500", "10042", "10999"], "label": 2}
{"ctx": "There is an important info hidden inside a lot of irrelevant text. Find it and memorize them. I will quiz you about the important information there.\nThe grass is green. The sky is blue. The sun is yellow. Here we go\nThe pass key is 10077. Remember it. 10077 is the pass key.\nWhat is the pass key? The pass key is", "endings": ["10077", "10042", "10500", "10005"], "label": 0}
JSONL
HELLASWAG_JSONL="$DIR/fixture.jsonl" HELLASWAG_OUT="$DIR" bash data/hellaswag.sh > /dev/null
mkdir -p "$DIR/pk"
build/test_gpt2_learned passkey-remap "$DIR/pk" gpt2_passkey.bin 80 8000 1000 "$DIR/hellaswag_val.bin"
T=80 L=79 # training rows of 80 tokens hold one window of 79 and its last target: the window length is 79
# Retrieval appears at a phase transition whose step moves with the arithmetic: at -l 1e-2 and
# 600 steps it came at about step 550 with OpenBLAS here and not before step 600 with the plain
# loops (NO_BLAS=1) or on another processor (accuracy 0.05). At -l 5e-3 it came at steps 300-400
# in four trajectories (OpenBLAS and plain loops, init seeds 42, 7 and 1234), every cell >= 0.9
# by step 800 and 0.95-1.0 at step 1000: 1000 steps leave 2.5x the transition's step, and 0.6
# is far below where every trajectory ends.
STEPS=${PASSKEY_STEPS:-1000}
EVAL=(-E $L -K $((10 * L)) -W -1 -m 4 -P 20 -Pd 3 -H eval.bin -j "pk_val_*.bin")
BIN=$ROOT/build/train_gpt2_learned
(cd "$DIR/pk" && OMP_NUM_THREADS=1 "$BIN" -e init.bin -x 0 "${EVAL[@]}" -o before > before.log)
t0=$(date +%s)
(cd "$DIR/pk" && OMP_NUM_THREADS=1 "$BIN" -e init.bin -t $T -b 16 -x $STEPS -l 5e-3 -u 20 -v 0 -s 0 -i "pk_train_*.bin" "${EVAL[@]}" -o run > run.log)
echo "  trained $(grep -c '^step' "$DIR/pk/run.log") steps in $(( $(date +%s) - t0 )) s"
grep -A5 "^passkey retrieval" "$DIR/pk/run.log"
grep "^HellaSwag" "$DIR/pk/run.log"
# every cell of the trained model at least 0.6, every cell of the untrained one 0
awk -F, 'NR > 1 { n++; if ($7 == "n/a" || $7 < 0.6) bad++ } END { exit !(n == 3 && bad == 0) }' "$DIR/pk/run/passkey.csv" \
    || { cat "$DIR/pk/run/passkey.csv"; fail "the trained model does not retrieve the key at its training length (accuracy >= 0.6 at every depth)"; }
awk -F, 'NR > 1 { n++; if ($7 != 0) bad++ } END { exit !(n == 3 && bad == 0) }' "$DIR/pk/before/passkey.csv" \
    || { cat "$DIR/pk/before/passkey.csv"; fail "the untrained model retrieves keys"; }
ok "passkey: the trained model retrieves the key at every depth (accuracy >= 0.6), the untrained one never"
# The fixture is 8/8 from step 200 on (of 1000) in both trajectories tried, OpenBLAS and plain
# loops (7/8 at step 100), so the assertion does not hang on the trajectory.
steps=$(grep -c '^step' "$DIR/pk/run.log")
grep -q "^HellaSwag: 8/8 = 1.000000$" "$DIR/pk/run.log" && grep -q "^s:$steps eval:1.0000$" "$DIR/pk/run/main.log" \
    && [ "$(csv_field "$DIR/pk/run/hellaswag.csv" pe=learned acc)" = 1.000000 ] || fail "the trained model misses a HellaSwag fixture example"
[ "$(csv_field "$DIR/pk/before/hellaswag.csv" pe=learned correct_norm)" -lt 8 ] || fail "the untrained model gets every fixture example"
ok "HellaSwag fixture: 8/8 after training (llm.c's line, main.log's eval line, hellaswag.csv), $(grep '^HellaSwag:' "$DIR/pk/before.log" | cut -d' ' -f2) before"

echo "=== every evaluation's rows stay: two during training (-V 2), then one of the checkpoint alone"
STEPS_EVAL=(-E $L -K $((2 * L)) -W -1 -L 40 -m 2 -P 2 -Pd 2 -H eval.bin -j "pk_val_*.bin" -o steps)
(cd "$DIR/pk" && OMP_NUM_THREADS=1 "$BIN" -e init.bin -t $T -b 16 -x 4 -V 2 -l 5e-3 -u 2 -v 0 -s 0 -i "pk_train_*.bin" "${STEPS_EVAL[@]}" > /dev/null)
(cd "$DIR/pk" && OMP_NUM_THREADS=1 "$BIN" -e steps/model_00000004.bin -x 0 "${STEPS_EVAL[@]}" > /dev/null)
for f in extrapolation.csv positions.csv hellaswag.csv passkey.csv; do
    # rows_of STEP: the rows of the evaluation at STEP, without the step column
    rows_of() { awk -F, -v s=$1 'NR == 1 { for (i = 1; i <= NF; i++) if ($i == "step") c = i; next }
                                 $c == s { $c = ""; print }' OFS=, "$DIR/pk/steps/$f"; }
    steps=$(awk -F, 'NR == 1 { for (i = 1; i <= NF; i++) if ($i == "step") c = i; next } { print $c }' "$DIR/pk/steps/$f" | uniq | tr '\n' ' ')
    [ "$steps" = "2 4 0 " ] || fail "$f: its rows are of the evaluations at steps '$steps', expected 2 4 0 (every one, in order)"
    [ "$(rows_of 2 | wc -l)" -gt 0 ] && [ "$(rows_of 2 | wc -l)" -eq "$(rows_of 4 | wc -l)" ] && cmp -s <(rows_of 4) <(rows_of 0) \
        || fail "$f: the evaluation alone (step 0) is not the one at the end of training (step 4)"
done
ok "extrapolation, positions, hellaswag and passkey tables: the rows of the evaluations at steps 2 and 4 and of the one alone (0), in order"

echo "=== test sets, DAPE's last-N windows, the context-use gap"
mkdir -p "$DIR/cb"
build/test_gpt2_cable passkey-remap "$DIR/cb" gpt2_passkey.bin 80 2000 1000 > /dev/null
CABLE=$ROOT/build/train_gpt2_cable
(cd "$DIR/cb" && OMP_NUM_THREADS=1 "$CABLE" -e init.bin -t 80 -b 16 -x 60 -l 1e-2 -u 10 -v 0 -s 0 -E none -i "pk_train_*.bin" -j "pk_val_*.bin" -o run > /dev/null)
# one window of 160 tokens per row: its last 80 scored in it (last80) and alone (sliding at 80, stride 80)
(cd "$DIR/cb" && OMP_NUM_THREADS=1 "$CABLE" -e run/model_00000060.bin -x 0 -m 2 -E 80,160 -K 80 -W 80 -L 80 \
    -j "val=pk_val_*.bin,train=pk_train_*.bin" -o eval > eval.log)
csv=$DIR/cb/eval/extrapolation.csv
[ "$(head -1 "$csv")" = "pe,train_len,eval_len,mode,tokens,loss,ppl,set,gap,step" ] || fail "extrapolation.csv's header: $(head -1 "$csv")"
[ "$(tail -n +2 "$csv" | wc -l)" -eq 12 ] && [ "$(grep -c ',val,' "$csv")" -eq 6 ] && [ "$(grep -c ',train,' "$csv")" -eq 6 ] \
    && [ "$(grep -c '^extrapolation: .*test set' "$DIR/cb/eval.log")" -eq 2 ] || fail "expected one table of 6 rows per set"
[ "$(tail -n +2 "$DIR/cb/eval/positions.csv" | cut -d, -f9 | sort -u | tr '\n' ' ')" = "train val " ] || fail "positions.csv lacks the set column"
for set in val train; do
    whole=$(csv_field "$csv" set=$set mode=last80 eval_len=160 loss)
    alone=$(csv_field "$csv" set=$set mode=sliding eval_len=80 loss)
    for mode in nonoverlap sliding last80; do
        gap=$(csv_field "$csv" set=$set mode=$mode eval_len=160 gap)
        awk -v g="$gap" -v w="$whole" -v a="$alone" 'BEGIN { d = g - (w - a); exit !(d < 3e-6 && d > -3e-6 && g != 0) }' \
            || fail "$set, $mode at 160: gap $gap, expected $whole - $alone"
    done
    [ "$(csv_field "$csv" set=$set mode=nonoverlap eval_len=80 gap)" = n/a ] || fail "a gap at the training length"
done
ok "two sets, one table each, the set column in both CSVs; gap = loss of the last 80 in the window - alone ($(csv_field "$csv" set=val mode=nonoverlap eval_len=160 gap)), n/a up to T"

echo "=== the CUDA trainer (fp32, in the CPU emulation) through the same driver"
# same_csv A B: the same rows and text fields, numbers within 1e-5 (relative above 1)
same_csv() {
    paste -d'|' "$1" "$2" | awk -F'|' '{ na = split($1, a, ","); nb = split($2, b, ",")
        if (na != nb) { bad = 1; next }
        for (i = 1; i <= na; i++) {
            if (a[i] == b[i]) continue
            if (a[i] + 0 != a[i] || b[i] + 0 != b[i]) { bad = 1; continue }
            d = a[i] - b[i]; m = a[i] < 0 ? -a[i] : a[i]; if (m < 1) m = 1
            if (d > 1e-5 * m || -d > 1e-5 * m) bad = 1 } }
        END { exit bad || NR == 0 }' && [ "$(wc -l < "$1")" = "$(wc -l < "$2")" ]
}
for pe in learned cable; do
    if [ $pe = learned ]; then
        ARGS=(-e "run/model_$(printf %08d $STEPS).bin" -E 79,158 -K 158 -W -1 -L 40 -P 4 -Pd 3 -H eval.bin)
        D=$DIR/pk
    else
        ARGS=(-e run/model_00000060.bin -E 80,160 -K 80 -W 80 -L 80 -P 2 -Pd 2)
        D=$DIR/cb
    fi
    ARGS+=(-x 0 -m 2 -j "val=pk_val_*.bin,train=pk_train_*.bin")
    (cd "$D" && OMP_NUM_THREADS=1 "$ROOT/build/train_gpt2_$pe" "${ARGS[@]}" -o cpu_eval > /dev/null)
    (cd "$D" && OMP_NUM_THREADS=2 "$ROOT/build/emulate/train_gpt2cu_${pe}_fp32" "${ARGS[@]}" -o cuda_eval > /dev/null)
    for f in extrapolation.csv positions.csv passkey.csv $([ $pe = learned ] && echo hellaswag.csv); do
        same_csv "$D/cpu_eval/$f" "$D/cuda_eval/$f" || { paste -d'\n' "$D/cpu_eval/$f" "$D/cuda_eval/$f" | head -20; fail "$pe: the CUDA trainer's $f differs"; }
    done
    ok "$pe: the CUDA trainer's evaluation CSVs equal the CPU trainer's (1e-5)$([ $pe = learned ] && echo ": HellaSwag, passkey, last-40, two sets" || echo ": the gap, last-80, passkey, two sets")"
done

# two processes split the examples, prompts and windows and give the same files
MPI=0
command -v mpirun > /dev/null && [ -n "$(nm "$BIN" | grep -w MPI_Init)" ] && MPI=1
# the CPU trainer in 2 processes, in $DIR/pk, with these flags
mpi2() {
    (cd "$DIR/pk" && OMP_NUM_THREADS=1 mpirun --allow-run-as-root --oversubscribe --mca btl self,vader -x OMP_NUM_THREADS -np 2 \
        "$BIN" "$@" > /dev/null)
}
if [ $MPI -eq 1 ]; then
    mpi2 -e "run/model_$(printf %08d $STEPS).bin" -E 79,158 -K 158 -W -1 -L 40 -P 4 -Pd 3 -H eval.bin -x 0 -m 2 \
        -j "val=pk_val_*.bin,train=pk_train_*.bin" -o mpi_eval
    for f in extrapolation.csv positions.csv passkey.csv hellaswag.csv; do
        cmp -s "$DIR/pk/cpu_eval/$f" "$DIR/pk/mpi_eval/$f" || fail "2 processes: $f differs from 1 process's"
    done
    ok "2 processes (mpirun): the same four CSV files as 1 process, bit for bit"
else
    echo "  skip  2 processes: no mpirun, or a build without MPI"
fi

echo "=== randomized positions: each evaluation draws its positions per batch, by a key of the batch"
RP=(-e "run/model_$(printf %08d $STEPS).bin" -rp 80 -E 79 -K 158 -W -1 -L 40 -P 4 -Pd 3 -x 0 -m 2 -j "val=pk_val_*.bin")
(cd "$DIR/pk" && OMP_NUM_THREADS=1 "$BIN" "${RP[@]}" -H eval.bin -o rp_eval > /dev/null)
(cd "$DIR/pk" && OMP_NUM_THREADS=2 "$ROOT/build/emulate/train_gpt2cu_learned_fp32" "${RP[@]}" -H eval.bin -o rp_cuda > /dev/null)
for f in extrapolation.csv positions.csv passkey.csv hellaswag.csv; do
    [ "$(tail -n +2 "$DIR/pk/rp_eval/$f" | cut -d, -f1 | sort -u)" = learned_rp80 ] || fail "randomized positions: $f does not name the model learned_rp80"
    same_csv "$DIR/pk/rp_eval/$f" "$DIR/pk/rp_cuda/$f" || fail "randomized positions: the CUDA trainer's $f differs"
done
# the same keys at positions drawn from [0, 80) instead of 0..78: other log-probabilities
plain=$(awk -F, '$3 == 79 { print $8 }' "$DIR/pk/cpu_eval/passkey.csv")
drawn=$(awk -F, '$3 == 79 { print $8 }' "$DIR/pk/rp_eval/passkey.csv")
[ -n "$plain" ] && [ "$(wc -l <<< "$drawn")" -eq 3 ] && [ "$plain" != "$drawn" ] || fail "randomized positions: the passkey grid is the plain one"
if [ $MPI -eq 1 ]; then
    mpi2 "${RP[@]}" -o rp_mpi
    for f in extrapolation.csv positions.csv passkey.csv; do
        cmp -s "$DIR/pk/rp_eval/$f" "$DIR/pk/rp_mpi/$f" || fail "randomized positions, 2 processes: $f differs from 1 process's"
    done
fi
ok "randomized positions (-rp 80 on learned): rows named learned_rp80, the CUDA trainer's four CSVs equal the CPU trainer's,$([ $MPI -eq 1 ] && echo " 2 processes give 1 process's tables bit for bit,") the draws change the passkey grid"

PY=python3
$PY -c "import matplotlib" 2> /dev/null || PY=/usr/bin/python3
if $PY -c "import matplotlib" 2> /dev/null; then
    $PY dev/plot_extrapolation.py "$csv" "$DIR/e.png" "$DIR/e.md" "test" && $PY dev/plot_positions.py "$DIR/cb/eval/positions.csv" "$DIR/p.png" "test" --set train \
        && $PY dev/plot_passkey.py "$DIR/pk/run/passkey.csv" "$DIR/k.png" "test" "$DIR/k.md" && [ -s "$DIR/e.png" ] && [ -s "$DIR/k.png" ] \
        || fail "the plot scripts"
    grep -q "^train: last80 perplexity" "$DIR/e.md" || fail "plot_extrapolation.py: no table of the second set"
    ok "plot_extrapolation.py, plot_positions.py, plot_passkey.py draw the new files"
else
    echo "  skip  the plot scripts: no matplotlib"
fi
echo "evaluation suite: all checks passed"
