//! Firmware for `qemu-system-riscv32 -machine virt -cpu sifive-e31` (placeholder).
fn main() {}
