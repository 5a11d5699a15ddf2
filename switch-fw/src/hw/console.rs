//! The console: counters and figures as text lines on any [`embedded_io::Write`].

use crate::event::Counters;
use crate::selftest::LineBuf;
use core::fmt::Write as _;
use embedded_io::Write;

/// Write one formatted line (up to 256 bytes) to `out`.
///
/// # Errors
/// The writer's error.
pub fn line<W: Write>(out: &mut W, args: core::fmt::Arguments<'_>) -> Result<(), W::Error> {
    let mut b = LineBuf::new();
    // A line longer than the buffer is cut, not an error.
    let _ = b.write_fmt(args);
    out.write_all(b.as_bytes())?;
    out.write_all(b"\n")
}

/// Print the counters of every port that saw traffic, then the totals.
///
/// # Errors
/// The writer's error.
pub fn print_counters<W: Write>(out: &mut W, c: &Counters) -> Result<(), W::Error> {
    for (p, pc) in c.ports.iter().enumerate() {
        if pc.rx_frames == 0 && pc.tx_frames == 0 && pc.drops() == 0 {
            continue;
        }
        line(
            out,
            format_args!(
                "port {p:2}: rx={} tx={} cut={} queued={} drops={} (spoofed={} xpart={} noroute={} unreach={} full={} flushed={} pinlost={})",
                pc.rx_frames, pc.tx_frames, pc.cut_through, pc.queued, pc.drops(), pc.spoofed,
                pc.cross_partition, pc.no_route, pc.unreachable, pc.queue_full, pc.flushed,
                pc.pin_lost
            ),
        )?;
    }
    let t = c.total();
    line(
        out,
        format_args!(
            "total: rx={} tx={} drops={} commits={} refusals={} events_lost={}",
            t.rx_frames,
            t.tx_frames,
            t.drops(),
            c.commits,
            c.refusals,
            c.events_lost
        ),
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    struct Out(Vec<u8>);
    impl embedded_io::ErrorType for Out {
        type Error = core::convert::Infallible;
    }
    impl Write for Out {
        fn write(&mut self, b: &[u8]) -> Result<usize, Self::Error> {
            self.0.extend_from_slice(b);
            Ok(b.len())
        }
        fn flush(&mut self) -> Result<(), Self::Error> {
            Ok(())
        }
    }

    #[test]
    fn test_print_counters() {
        let mut c = Counters::new();
        c.ports[3].rx_frames = 5;
        c.ports[3].spoofed = 2;
        let mut o = Out(Vec::new());
        print_counters(&mut o, &c).unwrap();
        let s = String::from_utf8(o.0).unwrap();
        assert!(s.contains("port  3: rx=5 tx=0"), "{s}");
        assert!(s.contains("spoofed=2"));
        assert!(s.ends_with("total: rx=5 tx=0 drops=2 commits=0 refusals=0 events_lost=0\n"));
        assert_eq!(s.lines().count(), 2);
    }
}
