#!/usr/bin/env bash
# Build the podlink-switch firmware (profile `firmware`: size-optimised, LTO; riscv32imac-unknown-none-elf), run its self-test
# under QEMU with exact instruction counting, print the output, and fail when the self-test
# fails or the PERF targets are missed.
#
#   switch-fw/run-qemu.sh            (from anywhere)
#   QEMU_TIMEOUT=60 MAX_DECISION_INSTR=150 MAX_TEXT_BYTES=65536 switch-fw/run-qemu.sh
#
# Needs qemu-system-riscv32 (Debian: qemu-system-misc) and llvm-size; it does not install
# them (the caller's test script does).
set -euo pipefail
cd "$(dirname "$0")/.."

TARGET=riscv32imac-unknown-none-elf
QEMU_TIMEOUT="${QEMU_TIMEOUT:-60}"
MAX_DECISION_INSTR="${MAX_DECISION_INSTR:-150}"
MAX_TEXT_BYTES="${MAX_TEXT_BYTES:-65536}"
ELF="target/$TARGET/firmware/qemu"

command -v qemu-system-riscv32 >/dev/null || { echo "FAIL: qemu-system-riscv32 not found" >&2; exit 1; }

cargo build -p podlink-switch --bin qemu --target "$TARGET" --profile firmware

set +e
OUT="$(timeout "$QEMU_TIMEOUT" qemu-system-riscv32 -machine virt -cpu sifive-e31 -nographic \
  -bios none -icount shift=0 -kernel "$ELF" 2>&1)"
RC=$?
set -e
printf '%s\n' "$OUT"
if [ "$RC" -ne 0 ]; then
  echo "FAIL: firmware exited with status $RC (124 = timeout)" >&2
  exit 1
fi
grep -q '^SELFTEST PASS' <<<"$OUT" || { echo "FAIL: no SELFTEST PASS line" >&2; exit 1; }

PERF="$(grep -E '^PERF decision_instr=[0-9]+ commit_instr=[0-9]+ text_bytes=[0-9]+' <<<"$OUT" | tail -n 1)"
[ -n "$PERF" ] || { echo "FAIL: no PERF line" >&2; exit 1; }
DECISION="$(sed -E 's/.*decision_instr=([0-9]+).*/\1/' <<<"$PERF")"
TEXT="$(sed -E 's/.*text_bytes=([0-9]+).*/\1/' <<<"$PERF")"

# Cross-check the firmware's own figure (__etext - __stext) against the ELF's .text size.
if command -v llvm-size >/dev/null; then
  ELF_TEXT="$(llvm-size -A "$ELF" | awk '$1 == ".text" { print $2 }')"
  echo "llvm-size: .text=$ELF_TEXT bytes"
  if [ "$ELF_TEXT" != "$TEXT" ]; then
    echo "FAIL: firmware text_bytes=$TEXT but llvm-size .text=$ELF_TEXT" >&2
    exit 1
  fi
fi

STATUS=0
if [ "$DECISION" -gt "$MAX_DECISION_INSTR" ]; then
  echo "FAIL: decision_instr=$DECISION > $MAX_DECISION_INSTR" >&2; STATUS=1
fi
if [ "$TEXT" -gt "$MAX_TEXT_BYTES" ]; then
  echo "FAIL: text_bytes=$TEXT > $MAX_TEXT_BYTES" >&2; STATUS=1
fi
[ "$STATUS" -eq 0 ] && echo "switch firmware: self-test passed, PERF within targets (decision ≤ $MAX_DECISION_INSTR instr, .text ≤ $MAX_TEXT_BYTES B)"
exit "$STATUS"
