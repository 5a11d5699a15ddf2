//! podlink-switch firmware for `qemu-system-riscv32 -machine virt -cpu sifive-e31`
//! (RV32IMAC, like an FPGA soft core).
//!
//! At boot it runs the self-test ([`podlink_switch::selftest`]: all 64 ports up over
//! in-memory links between protocol `UaLink`s), prints the counters on the ns16550a UART,
//! measures the forwarding decision and the configuration commit with `minstret` (exact under
//! `-icount shift=0`) on the 64-port, 1024-ID self-test pod, prints
//!
//! ```text
//! PERF decision_instr=<n> commit_instr=<n> text_bytes=<n>
//! RAM link_port_bytes=<n> ports_over_links=<n> switch_bytes=<n>
//! ```
//!
//! and exits through the SiFive test device: 0x5555 on pass, `(code << 16) | 0x3333` on
//! failure (code 1: panic, 2: self-test failure). `text_bytes` is `__etext - __stext` from
//! riscv-rt's linker script; `switch-fw/run-qemu.sh` checks it against `llvm-size`.
//!
//! On the host the same binary runs the self-test on stdout (no PERF figures), or with
//! `--emit-config FILE` writes the self-test pod's binary configuration.
#![cfg_attr(target_os = "none", no_std, no_main)]
// MMIO and linker symbols need `unsafe`; the library itself forbids it.
#![allow(unsafe_code)]

#[cfg(target_os = "none")]
mod fw {
    use core::convert::Infallible;
    use core::hint::black_box;
    use core::ptr::{addr_of, read_volatile, write_volatile};
    use podlink_protocol::time::Instant;
    use podlink_switch::hw::console;
    use podlink_switch::selftest::{
        self, new_port, partition_index, request, switch_end, TestPort, LOCAL, POD_CONFIG,
    };
    use podlink_switch::{Switch, MAX_IDS, MAX_PORTS};
    use riscv::register::minstret;

    const UART_BASE: usize = 0x1000_0000;
    const UART_LSR: usize = UART_BASE + 5;
    const LSR_THR_EMPTY: u8 = 0x20;
    const TEST_DEVICE: usize = 0x10_0000;

    /// The ns16550a UART of the `virt` machine, polled.
    struct Uart;

    impl Uart {
        fn putc(b: u8) {
            // SAFETY: the `virt` machine maps an ns16550a at UART_BASE; byte accesses to THR
            // (+0) and LSR (+5) are its documented interface.
            unsafe {
                while read_volatile(UART_LSR as *const u8) & LSR_THR_EMPTY == 0 {}
                write_volatile(UART_BASE as *mut u8, b);
            }
        }
    }

    impl embedded_io::ErrorType for Uart {
        type Error = Infallible;
    }

    impl embedded_io::Write for Uart {
        fn write(&mut self, buf: &[u8]) -> Result<usize, Infallible> {
            for &b in buf {
                Uart::putc(b);
            }
            Ok(buf.len())
        }
        fn flush(&mut self) -> Result<(), Infallible> {
            Ok(())
        }
    }

    /// Report that measurement step `step` (1: `decide`, 2: `forward`) failed for
    /// destination `dst`, and leave QEMU with status 2.
    fn fail(step: u32, dst: u16) -> ! {
        let dst = u32::from(dst);
        let _ = console::line(&mut Uart, format_args!("PERF step {step} failed for {dst}"));
        exit(2)
    }

    /// Leave QEMU through the SiFive test device.
    fn exit(code: u32) -> ! {
        let v = if code == 0 {
            0x5555
        } else {
            (code << 16) | 0x3333
        };
        // SAFETY: the `virt` machine maps the SiFive test device at TEST_DEVICE; a 32-bit
        // write ends the emulation.
        unsafe { write_volatile(TEST_DEVICE as *mut u32, v) };
        loop {
            core::hint::spin_loop();
        }
    }

    #[panic_handler]
    fn panic(info: &core::panic::PanicInfo<'_>) -> ! {
        // The location only: formatting the message would pull string padding into .text.
        let line = info.location().map_or(0, |l| l.line());
        let _ = embedded_io::Write::write_all(&mut Uart, b"PANIC at line ");
        let _ = console::line(&mut Uart, format_args!("{line}"));
        exit(1)
    }

    extern "C" {
        static __stext: u8;
        static __etext: u8;
    }

    fn text_bytes() -> usize {
        // Only the addresses of the linker symbols are taken, never their contents.
        (addr_of!(__etext) as usize).wrapping_sub(addr_of!(__stext) as usize)
    }

    #[inline(always)]
    fn instret() -> u32 {
        minstret::read() as u32
    }

    /// Instructions between two back-to-back counter reads (subtracted from every figure).
    fn overhead() -> u32 {
        let a = instret();
        let b = instret();
        b.wrapping_sub(a)
    }

    /// (max, mean) instructions of `decide` over every remote and local destination in
    /// the source's partition.
    fn measure_decisions(sw: &Switch) -> (u32, u32) {
        let ovh = overhead();
        let (mut max, mut total, mut n) = (0u32, 0u32, 0u32);
        for dst in 0..MAX_IDS as u16 {
            if partition_index(dst) != 0 || dst == 1 {
                continue;
            }
            let h = black_box(request(1, dst, 0, u64::from(dst) << 12));
            let a = instret();
            let r = sw.decide(black_box(1), &h);
            let b = instret();
            if black_box(r).is_err() {
                fail(1, dst);
            }
            let d = b.wrapping_sub(a).saturating_sub(ovh);
            max = max.max(d);
            total = total.wrapping_add(d);
            n += 1;
        }
        (max, total / n.max(1))
    }

    #[riscv_rt::entry]
    fn main() -> ! {
        let mut out = Uart;
        let _ = console::line(&mut out, format_args!("podlink-switch firmware (RV32IMAC)"));
        let mut sw = Switch::new();
        let idle = || match new_port(switch_end(0)) {
            Ok(p) => p,
            Err(_) => exit(2),
        };
        // Both ends of 64 links: the switch's ports and their far ends.
        let mut ports: [TestPort; MAX_PORTS] = core::array::from_fn(|_| idle());
        let mut peers: [TestPort; MAX_PORTS] = core::array::from_fn(|_| idle());
        if let Err(f) = selftest::run(&mut sw, &mut ports, &mut peers, &mut out) {
            let _ = embedded_io::Write::write_all(&mut out, b"SELFTEST FAIL step=");
            let _ = embedded_io::Write::write_all(&mut out, f.step.as_bytes());
            let _ = embedded_io::Write::write_all(&mut out, b"\n");
            exit(2);
        }
        let _ = console::print_counters(&mut out, sw.counters());
        let _ = console::line(&mut out, format_args!("SELFTEST PASS"));

        // PERF on a fresh switch with the pod tables (64 ports, 1024 IDs, 8 ways remote).
        let mut sw = Switch::new();
        if sw.stage_config(POD_CONFIG).is_err() || sw.commit().is_err() {
            exit(2);
        }
        // The self-test left every link up: the fresh switch reads them.
        for (p, link) in (0u16..).zip(ports.iter()) {
            if !link.is_ready() {
                exit(2);
            }
            sw.refresh_port(p, link);
        }
        // Fresh flows (free choice), then the same flows again with their pins live (one
        // request of each forwarded and not yet answered).
        let (fresh_max, fresh_mean) = measure_decisions(&sw);
        let now = Instant::from_ps(1_000_000);
        for dst in 0..MAX_IDS as u16 {
            if partition_index(dst) != 0 || dst == 1 {
                continue;
            }
            let h = request(1, dst, 0, u64::from(dst) << 12);
            let f = podlink_switch::Frame {
                handle: u32::from(dst),
                header: h,
                bytes: 64,
            };
            if sw.forward(now, 1, f, &mut ports).is_err() {
                fail(2, dst);
            }
        }
        let (pinned_max, pinned_mean) = measure_decisions(&sw);
        let decision_max = fresh_max.max(pinned_max);
        let ovh = overhead();
        if sw.stage_config(POD_CONFIG).is_err() {
            exit(2);
        }
        let a = instret();
        let r = sw.commit();
        let b = instret();
        if black_box(r).is_err() {
            exit(2);
        }
        let commit = b.wrapping_sub(a).saturating_sub(ovh);
        let _ = console::line(
            &mut out,
            format_args!(
                "PERF_DETAIL decision_max={decision_max} fresh_max={fresh_max} fresh_mean={fresh_mean} pinned_max={pinned_max} pinned_mean={pinned_mean} ports={MAX_PORTS} ids={MAX_IDS} local={} ways={}",
                // (As u32: formatting u16 and u8 would link two more integer formatters.)
                u32::from(LOCAL),
                u32::from(selftest::WAYS)
            ),
        );
        let _ = console::line(
            &mut out,
            format_args!(
                "PERF decision_instr={decision_max} commit_instr={commit} text_bytes={}",
                text_bytes()
            ),
        );
        let _ = console::line(
            &mut out,
            format_args!(
                "RAM link_port_bytes={} ports_over_links={MAX_PORTS} switch_bytes={}",
                core::mem::size_of::<TestPort>(),
                core::mem::size_of::<Switch>()
            ),
        );
        exit(0)
    }
}

#[cfg(not(target_os = "none"))]
fn main() {
    use podlink_switch::selftest::{self, new_port, switch_end};
    use podlink_switch::{Switch, MAX_PORTS};

    struct Stdout;
    impl embedded_io::ErrorType for Stdout {
        type Error = core::convert::Infallible;
    }
    impl embedded_io::Write for Stdout {
        fn write(&mut self, b: &[u8]) -> Result<usize, Self::Error> {
            print!("{}", String::from_utf8_lossy(b));
            Ok(b.len())
        }
        fn flush(&mut self) -> Result<(), Self::Error> {
            Ok(())
        }
    }

    let mut sw = Box::new(Switch::new());
    let idle = new_port(switch_end(0)).expect("the self-test port configuration fits");
    let mut ports = vec![idle.clone(); MAX_PORTS];
    let mut peers = vec![idle; MAX_PORTS];
    let mut buf = vec![0u8; 8192];
    // `qemu --emit-config FILE`: write the self-test pod's binary configuration (fuzz seeds,
    // an example of the format).
    let args: Vec<String> = std::env::args().collect();
    if let [_, flag, path] = args.as_slice() {
        if flag == "--emit-config" {
            sw.stage_with(selftest::pod_tables).expect("valid pod");
            sw.commit().expect("staged");
            let n = podlink_switch::config::emit(sw.tables(), &mut buf).expect("fits");
            std::fs::write(path, &buf[..n]).expect("write the configuration");
            println!("wrote {n} bytes to {path}");
            return;
        }
    }
    match selftest::run(&mut sw, &mut ports, &mut peers, &mut Stdout) {
        Ok(()) => {
            let _ = podlink_switch::hw::console::print_counters(&mut Stdout, sw.counters());
            println!("SELFTEST PASS (host; PERF figures come from the RISC-V build under QEMU)");
        }
        Err(f) => {
            println!("SELFTEST FAIL step={}", f.step);
            std::process::exit(2);
        }
    }
}
