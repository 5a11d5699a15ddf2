#!/usr/bin/env bash
# podlink's whole test suite. Idempotent; installs what a fresh machine lacks.
#
#   ./scripts/test.sh            everything (what CI runs)
#   FUZZ_SECONDS=N ./scripts/test.sh   seconds per fuzz target (default 15)
#
set -euo pipefail
cd "$(dirname "$0")/.."

FUZZ_SECONDS="${FUZZ_SECONDS:-15}"
RISCV=riscv32imac-unknown-none-elf
step() { printf '\n==> %s (%s)\n' "$*" "$(date +%T)"; }

step "toolchain setup"
if ! rustup target list --installed | grep -qx "$RISCV"; then
  rustup target add "$RISCV"
fi
rustup component list --installed 2>/dev/null | grep -q '^rustfmt' || rustup component add rustfmt
rustup component list --installed 2>/dev/null | grep -q '^clippy' || rustup component add clippy
APT_UPDATED=0
apt_install() {
  [ "$APT_UPDATED" = 1 ] || { apt-get update; APT_UPDATED=1; }
  DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends "$@"
}
# The image's backports qemu-utils conflicts with Debian's qemu-system-misc; the plain install
# replaces it (podlink needs no qemu-img).
command -v qemu-system-riscv32 >/dev/null 2>&1 || apt_install qemu-system-misc
command -v llvm-size >/dev/null 2>&1 || apt_install llvm
HAVE_NIGHTLY=0
if rustup toolchain list | grep -q '^nightly'; then HAVE_NIGHTLY=1; fi
if [ "$HAVE_NIGHTLY" = 1 ] && ! command -v cargo-fuzz >/dev/null 2>&1; then
  cargo install --locked cargo-fuzz
fi

step "cargo fmt --check"
cargo fmt --all -- --check

step "cargo clippy (workspace, all targets, -D warnings)"
cargo clippy --workspace --all-targets -- -D warnings

step "cargo test (workspace)"
cargo test --workspace

step "feature sets of podlink-protocol"
# The workspace run above builds the protocol with `crc-fast` (podlink-sim asks for it, and
# features unify): here its own tests run once more with its default features, on the
# table-driven CRC that no_std builds use.
cargo test -p podlink-protocol --lib --tests
cargo check -p podlink-protocol --no-default-features

step "podlink-switch without its residence-limit and addr-compression features (as the firmware builds it)"
# The workspace runs above build it with the features (podlink-sim asks for them); the
# firmware leaves them out (switch-fw/Cargo.toml), so lint and test that build too.
cargo clippy -p podlink-switch --all-targets -- -D warnings
cargo test -p podlink-switch

step "no_std build of podlink-protocol for $RISCV"
cargo build -p podlink-protocol --no-default-features --target "$RISCV"
# The SIMD CRC kernels' crate is no_std off x86-64 (it then always declines).
cargo check -p podlink-simd-crc --target "$RISCV"

# The examples run from the test build (debug assertions and overflow checks on, the protocol
# crate at opt-level 1): no release build of their own, and stricter checks.
step "protocol examples: lossless over a faulty wire (exit 0 only when nothing is lost, doubled or reordered)"
for profile in ualink ethernet; do
  cargo run -q -p podlink-protocol --example lossy_link -- \
    --profile "$profile" --flits 20000 --flit-error-rate 0.01 --burst-len 4 --link-flaps 3 --seed 11
done

step "protocol examples: transactions over lossy links (exit 0 only when every operation completed once, right, and nothing leaked)"
cargo run -q -p podlink-protocol --example txn_soak -- \
  --requesters 4 --ops 20000 --flit-error-rate 0.01 --partitions 2 --seed 7

step "the main job: podlink-sim run on the default pod (exit 0 only when budgets, integrity and conservation hold)"
cargo run -q --release -p podlink-sim -- run > /dev/null
# Leaf/spine with adaptive routing: the ordering rule must keep every read exact (exit 1 on any
# stale read; the flowlet rule this replaced gave 24 in the shallow-buffer run, where spine
# queues grow to microseconds).
cargo run -q --release -p podlink-sim -- run --preset two-tier-384 --duration 2us > /dev/null
cargo run -q --release -p podlink-sim -- run fpga-sim/tests/data/pods/two-tier-384-shallow.toml --duration 2us > /dev/null

step "conformance scenarios: podlink-sim conformance (exit 0 only when every scenario's verdict is PASS)"
cargo run -q --release -p podlink-sim -- conformance

step "switch firmware under QEMU (self-test, PERF targets)"
./switch-fw/run-qemu.sh

step "fuzz smoke run (${FUZZ_SECONDS}s per target)"
if [ "$HAVE_NIGHTLY" = 1 ]; then
  ( cd fuzz
    # Every target in one build (both cores link targets side by side), then each one runs.
    cargo +nightly fuzz build
    for t in $(cargo +nightly fuzz list); do
      mkdir -p "corpus/$t"
      echo "--- fuzz target $t"
      cargo +nightly fuzz run "$t" "corpus/$t" -- -max_total_time="$FUZZ_SECONDS" -rss_limit_mb=2048 -print_final_stats=0 2>&1 | tail -n 3
    done )
else
  echo "FAIL: no nightly toolchain: cannot run cargo-fuzz" >&2
  exit 1
fi

printf '\nall checks passed (%s)\n' "$(date +%T)"
