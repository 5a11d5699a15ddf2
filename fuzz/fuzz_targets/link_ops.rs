//! An arbitrary sequence of operations on two UALink-profile `Link`s joined by a wire the
//! fuzzer controls: submits, deliveries, drops, duplicates, bit flips, forged bytes, timeouts,
//! link down/up. Invariants: nothing panics; every call's output fits its buffer; a link never
//! delivers more TL flits than were submitted plus forged ones; when the fuzzer only drops and
//! delays whole flits (no corruption, no forgery: CRCs are not checked under `cfg(fuzzing)`),
//! delivery is exactly once and in order, with or without a hold limit (which may end a link
//! in `Fault`).
#![no_main]

use libfuzzer_sys::fuzz_target;
use podlink_protocol::link::{TlSink, UaLink, UaLinkConfig};
use podlink_protocol::testing::{check_tl, fill_tl};
use podlink_protocol::time::{Duration, Instant};
use podlink_protocol::wire::dl_flit::FLIT_LEN;
use std::collections::VecDeque;

#[derive(Default)]
struct Log {
    ids: Vec<Option<u64>>,
}

impl TlSink for Log {
    fn tl_flit(&mut self, flit: &[u8; 64]) {
        self.ids.push(check_tl(flit));
    }
}

type L = UaLink<32, 16>;

fuzz_target!(|data: &[u8]| {
    let mut cfg = UaLinkConfig::default();
    cfg.retry.piggyback = false;
    // A first byte with its top bit set gives both links a hold limit of its low bits in µs
    // (0: every TL flit is past it at once): a link may then end in `Fault` on its own.
    if let Some(&b0) = data.first().filter(|&&b| b & 0x80 != 0) {
        cfg.hold_limit = Duration::from_us(u64::from(b0 & 0x7f));
    }
    let mut a: L = UaLink::new(cfg);
    let mut b: L = UaLink::new(cfg);
    let mut now = Instant::ZERO;
    a.handle_link_up(now);
    b.handle_link_up(now);
    let (mut la, mut lb) = (Log::default(), Log::default());
    let mut wire_ab: VecDeque<Vec<u8>> = VecDeque::new();
    let mut wire_ba: VecDeque<Vec<u8>> = VecDeque::new();
    let mut submitted = 0u64;
    let mut tampered = false;
    let mut buf = [0u8; FLIT_LEN + 64];
    let mut ops = data.iter().copied();
    let mut steps = 0;
    while let Some(op) = ops.next() {
        steps += 1;
        if steps > 4000 {
            break;
        }
        match op % 12 {
            0 | 1 => {
                let mut f = [0u8; 64];
                fill_tl(submitted, &mut f);
                if a.submit_tl_flit(now, &f).is_ok() {
                    submitted += 1;
                }
            }
            2 | 3 => {
                for (l, w) in [(&mut a, &mut wire_ab), (&mut b, &mut wire_ba)] {
                    if let Some(n) = l.poll_transmit(now, &mut buf) {
                        assert!(n <= buf.len());
                        if w.len() < 64 {
                            w.push_back(buf[..n].to_vec());
                        }
                    }
                }
            }
            4 | 5 => {
                if let Some(f) = wire_ab.pop_front() {
                    b.handle_flit(now, &f, &mut lb);
                }
                if let Some(f) = wire_ba.pop_front() {
                    a.handle_flit(now, &f, &mut la);
                }
            }
            6 => {
                wire_ab.pop_front();
            }
            7 => {
                if let Some(f) = wire_ab.front().cloned() {
                    wire_ab.push_back(f);
                }
            }
            8 => {
                // Flip a bit of the next flit (with CRC checks off, this corrupts content).
                let pos = usize::from(ops.next().unwrap_or(0)) * 3;
                if let Some(f) = wire_ab.front_mut() {
                    let at = pos % f.len().max(1);
                    if let Some(byte) = f.get_mut(at) {
                        *byte ^= 1 << (pos % 8);
                        tampered = true;
                    }
                }
            }
            9 => {
                // Forged bytes straight into b.
                let n = usize::from(ops.next().unwrap_or(0)) * 4;
                let forged: Vec<u8> = ops.by_ref().take(n).collect();
                b.handle_flit(now, &forged, &mut lb);
                tampered = true;
            }
            10 => {
                let dt = u64::from(ops.next().unwrap_or(1)) * 50_000;
                now = now + Duration::from_ps(dt);
                if let Some(t) = a.poll_timeout() {
                    if t <= now {
                        a.handle_timeout(now);
                    }
                }
                if let Some(t) = b.poll_timeout() {
                    if t <= now {
                        b.handle_timeout(now);
                    }
                }
            }
            _ => {
                if ops.next().unwrap_or(0) % 8 == 0 {
                    a.handle_link_down(now);
                    b.handle_link_down(now);
                    wire_ab.clear();
                    wire_ba.clear();
                    a.handle_link_up(now);
                    b.handle_link_up(now);
                }
            }
        }
        while a.poll_event().is_some() {}
        while b.poll_event().is_some() {}
    }
    if !tampered {
        for (i, id) in lb.ids.iter().enumerate() {
            assert_eq!(*id, Some(i as u64), "exactly once, in order");
        }
        assert!(lb.ids.len() as u64 <= submitted);
    }
});
