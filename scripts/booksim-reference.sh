#!/usr/bin/env bash
# BookSim2 reference rows for fpga-sim/tests/data/booksim/sweep.csv (spec-notes/validation.md,
# "BookSim2 as a reference tool", Method).
#
#   scripts/booksim-reference.sh BOOKSIM2_BINARY BUILD NAME:PACKET_SIZES [NAME:PACKET_SIZES ...]
#
# NAME is a configuration in fpga-sim/tests/data/booksim/sweep/NAME.cfg, PACKET_SIZES a
# comma-separated list (e.g. `mesh_k4_n2:1,5`), BUILD the label written to the
# `booksim_build` column (`assert` for BookSim2's own Makefile build, `ndebug` for the same
# sources built with -DNDEBUG). For each configuration and packet size it runs the saturation
# run (`sim_type=throughput injection_rate=1.0`, accepted rate S), latency runs at
# floor(f * S, 0.01) (at least 0.01) for f = .1 .3 .5 .7 .8 .9, and one latency run at
# round(1.1 * S, 0.01) (at most 1.0), and prints one CSV row per run: BookSim's final `Packet latency average` and
# `Accepted flit rate average` as printed, `inf` and no rate for "Simulation unstable".
# A run that ends any other way without its final statistics is an error.
# BookSim2 is not part of this repository (see spec-notes/validation.md for how it was built).
set -euo pipefail
BS2=$(realpath "$1")
cd "$(dirname "$0")/.."
BUILD=$2
shift 2
DIR=fpga-sim/tests/data/booksim/sweep

# run NAME PS SIM_TYPE RATE -> prints "latency,accepted"
run() {
    local out
    # BookSim2 exits non-zero even after a good run: its printed figures are what matter. It
    # runs in the configurations' folder, where it looks for an anynet `network_file`.
    out=$(cd "$DIR" && "$BS2" "$1.cfg" "packet_size=$2" "sim_type=$3" "injection_rate=$4" 2>&1 || true)
    if grep -q '^====== Overall Traffic Statistics' <<<"$out"; then
        awk '/^====== Overall Traffic Statistics/ {o = 1}
             o && /^Packet latency average = / && !l {l = $5}
             o && /^Accepted flit rate average = / && !a {a = $6}
             END {print l "," a}' <<<"$out"
    elif grep -q '^Simulation unstable' <<<"$out"; then
        echo "inf,"
    else
        echo "$1 packet_size=$2 sim_type=$3 injection_rate=$4: no final statistics" >&2
        tail -5 <<<"$out" >&2
        exit 1
    fi
}

fmt() { awk -v x="$1" 'BEGIN { s = sprintf("%.2f", x); sub(/0+$/, "", s); sub(/\.$/, ".0", s); print s }'; }

for spec in "$@"; do
    name=${spec%%:*}
    IFS=, read -r -a sizes <<<"${spec#*:}"
    for ps in "${sizes[@]}"; do
        r=$(run "$name" "$ps" throughput 1.0)
        echo "$name,$ps,throughput,1.0,$BUILD,$r"
        sat=${r#*,}
        for f in 0.1 0.3 0.5 0.7 0.8 0.9; do
            load=$(fmt "$(awk -v s="$sat" -v f="$f" 'BEGIN { x = int(f * s * 100 + 1e-9) / 100; if (x < 0.01) x = 0.01; printf "%.6f", x }')")
            echo "$name,$ps,latency,$load,$BUILD,$(run "$name" "$ps" latency "$load")"
        done
        over=$(awk -v s="$sat" 'BEGIN { x = int(1.1 * s * 100 + 0.5) / 100; if (x > 1) x = 1; printf "%.6f", x }')
        over=$(fmt "$over")
        echo "$name,$ps,latency,$over,$BUILD,$(run "$name" "$ps" latency "$over")"
    done
done
