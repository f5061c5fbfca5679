#!/usr/bin/env bash
# The table of the attention kernels' resources in docs/cuda.md: every encoding's bf16 trainer
# for sm_90 (the builds of make test-cuda-builds, in build/) and sm_80 (build/sm_80/), with
# ptxas's report of each parsed by dev/cuda/resources.py as make test-cuda-resources does; the
# launch sizes from the emulated dev/cuda/attention_bias (launches). The table replaces what
# stands between the markers "<!-- resources: begin -->" and "<!-- resources: end -->".
#
#   dev/cuda/resources_table.sh [JOBS]      (about 2 x 15 nvcc builds: half an hour on 2 cores)
set -euo pipefail
cd "$(dirname "$0")/../.."
JOBS=${1:-2}
PES=$(make -s --no-print-directory --eval 'print-pes: ; @echo $(RESOURCE_PES)' print-pes) # cuda.mk's
SM80=build/sm_80
sm90=() sm80=() emu=()
for pe in $PES; do
    sm90+=("build/train_gpt2cu_$pe")
    sm80+=("$SM80/train_gpt2cu_$pe")
    emu+=("build/emulate/attention_$pe")
done
make -j"$JOBS" "${sm90[@]}" "${emu[@]}"
make -j"$JOBS" BUILD="$SM80" CUDA_ARCH="-gencode arch=compute_80,code=sm_80" "${sm80[@]}"
files=()
for pe in $PES; do
    build/emulate/attention_"$pe" launches > build/launches_"$pe".txt
    files+=("build/launches_$pe.txt" "build/train_gpt2cu_$pe.ptxas" "$SM80/train_gpt2cu_$pe.ptxas")
done
table=$(python3 dev/cuda/resources.py table "${files[@]}")
nvcc_version=$(make -s --no-print-directory --eval 'print-nvcc: ; @echo $(NVCC)' print-nvcc)
nvcc_version=$("$nvcc_version" --version | sed -n 's/.*release \([0-9.]*\).*/\1/p')
python3 - "$table" "$nvcc_version" <<'EOF'
import re, sys
table, version = sys.argv[1], sys.argv[2]
path = "docs/cuda.md"
doc = open(path).read()
begin, end = "<!-- resources: begin -->", "<!-- resources: end -->"
if begin not in doc or end not in doc:
    sys.exit(f"{path}: no {begin} ... {end} markers")
body = (f"{begin}\n(`dev/cuda/resources_table.sh`, nvcc {version}: ptxas's report of each bf16 trainer; threads and "
        f"dynamic shared memory as the launchers ask for them, DAPE's at GPT-2 small's shape with k = 3; bold: "
        f"local memory)\n\n{table}\n{end}")
doc = doc[:doc.index(begin)] + body + doc[doc.index(end) + len(end):]
open(path, "w").write(doc)
print(f"{path}: table of {table.count(chr(10)) - 1} rows written")
EOF
