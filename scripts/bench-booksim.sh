#!/usr/bin/env bash
# BookSim-mode speed against BookSim2 timed in the same series (issue 7's benchmark).
#
#   scripts/bench-booksim.sh [BOOKSIM2_BINARY] [ROUNDS]
#
# Runs the reference speed configuration (64-port crossbar, load 0.5, 1-flit packets;
# spec-notes/validation.md#speed) in `podlink-sim booksim --bench`. With a BookSim2 binary, the
# two programs alternate, ROUNDS times (default 5), and each round prints BookSim2's own
# `Total run time`, podlink-sim's time and their ratio: a ratio against a baseline measured in
# the same minute, which a shared machine's speed changes cancel out of. Without one, it prints
# podlink-sim's bench line (against the fixed 317,000 flits/s measured earlier). BookSim2 is
# not part of this repository (see spec-notes/validation.md for how it was built).
set -euo pipefail
cd "$(dirname "$0")/.."
BS2=${1:-}
ROUNDS=${2:-5}
CFG=fpga-sim/tests/data/booksim/xbar16.cfg
ARGS=(k=64 injection_rate=0.5 packet_size=1)
cargo build --release -q -p podlink-sim
SIM=target/release/podlink-sim
if [ -z "$BS2" ]; then
    "$SIM" booksim "$CFG" "${ARGS[@]}" --quiet --bench 2>&1 | grep '^bench: [0-9]'
    exit 0
fi
ratios=()
for r in $(seq 1 "$ROUNDS"); do
    # BookSim2 exits non-zero even after a good run: its time is what matters.
    b=$("$BS2" "$CFG" "${ARGS[@]}" 2>&1 | awk '/^Total run time/ {print $4}' || true)
    [ -n "$b" ] || { echo "no 'Total run time' from $BS2" >&2; exit 1; }
    line=$("$SIM" booksim "$CFG" "${ARGS[@]}" --quiet --bench 2>&1 | grep '^bench: [0-9]')
    p=$(sed -E 's/.* in ([0-9.]+) s:.*/\1/' <<<"$line")
    ratio=$(awk -v b="$b" -v p="$p" 'BEGIN { printf "%.1f", b / p }')
    ratios+=("$ratio")
    echo "round $r: BookSim2 ${b} s, podlink-sim ${p} s: ${ratio}x in the same round"
done
echo "same-round ratios: ${ratios[*]}; median $(printf '%s\n' "${ratios[@]}" | sort -n | awk '{a[NR]=$1} END {print a[int((NR+1)/2)]}')x"
