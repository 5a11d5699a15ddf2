//! Property tests for the DL layer: DL message and flit round trips, and the streaming
//! packer/unpacker (TL flits straddling segments and DL flits, DL messages with priority).

use podlink_protocol::wire::crc::DlCrc;
use podlink_protocol::wire::dl_flit::{DlFlit, Repr, CRC_COVERED_LEN, FLIT_LEN, SEGMENT_COUNT};
use podlink_protocol::wire::dl_msg::{
    ChannelNegotiation, DeviceId, DlMessage, MessageSpace, PortNumber, TlRateNotification,
    UartCreditUpdate, UartResetRequest, UartResetResponse, UartStreamTransport, VendorDefined,
};
use podlink_protocol::wire::dl_stream::{
    DlPacker, DlUnpacker, PackSource, PackStats, SegmentInfo, SegmentKind, UnpackSink, TL_FLIT_LEN,
};
use podlink_protocol::wire::{DlCommandHeader, DlExplicitHeader, DlFlitHeader, DlSegmentHeader};
use proptest::prelude::*;
use std::collections::VecDeque;

type TlFlit = [u8; TL_FLIT_LEN];

fn arb_message() -> impl Strategy<Value = DlMessage> {
    prop_oneof![
        Just(DlMessage::NoOp),
        (any::<u16>(), any::<bool>()).prop_map(|(rate, ack)| {
            DlMessage::TlRateNotification(TlRateNotification { rate, ack })
        }),
        (any::<bool>(), 0u8..4, 0u16..1024, any::<bool>()).prop_map(|(valid, r#type, id, ack)| {
            DlMessage::DeviceId(DeviceId {
                valid,
                r#type,
                id,
                ack,
            })
        }),
        (any::<bool>(), 0u16..4096, any::<bool>()).prop_map(|(valid, port_number, ack)| {
            DlMessage::PortNumber(PortNumber {
                valid,
                port_number,
                ack,
            })
        }),
        (0u8..8, prop::collection::vec(any::<u32>(), 1..=32)).prop_map(|(stream_id, words)| {
            DlMessage::UartStreamTransport(UartStreamTransport {
                stream_id,
                payload_dwords: heapless::Vec::from_slice(&words).unwrap(),
            })
        }),
        (0u16..4096, 0u8..8).prop_map(|(data_fc_seq, stream_id)| {
            DlMessage::UartCreditUpdate(UartCreditUpdate {
                data_fc_seq,
                stream_id,
            })
        }),
        (any::<bool>(), 0u8..8).prop_map(|(all_streams, stream_id)| {
            DlMessage::UartResetRequest(UartResetRequest {
                all_streams,
                stream_id,
            })
        }),
        (0u8..8, any::<bool>(), 0u8..8).prop_map(|(status, all_streams, stream_id)| {
            DlMessage::UartResetResponse(UartResetResponse {
                status,
                all_streams,
                stream_id,
            })
        }),
        (0u8..16, 0u8..16, 0u8..16).prop_map(|(r, c, t)| {
            DlMessage::ChannelNegotiation(ChannelNegotiation {
                channel_response: r,
                channel_command: c,
                channel_target: t,
            })
        }),
        (any::<u16>(), any::<u8>(), any::<u8>()).prop_map(|(vendor_id, r#type, length)| {
            DlMessage::Vendor(VendorDefined {
                vendor_id,
                r#type,
                length,
            })
        }),
    ]
}

fn arb_tl_flit() -> impl Strategy<Value = TlFlit> {
    prop_oneof![
        9 => prop::collection::vec(any::<u8>(), TL_FLIT_LEN)
            .prop_map(|v| <TlFlit>::try_from(v).unwrap()),
        // An all-zero TL flit is a NOP: the unpacker drops it.
        1 => Just([0u8; TL_FLIT_LEN]),
    ]
}

#[derive(Default)]
struct Src {
    tl: VecDeque<TlFlit>,
    msgs: VecDeque<DlMessage>,
}

impl PackSource for Src {
    fn next_tl_flit(&mut self, out: &mut TlFlit) -> bool {
        self.tl.pop_front().map(|f| *out = f).is_some()
    }
    fn peek_message(&self) -> Option<&DlMessage> {
        self.msgs.front()
    }
    fn pop_message(&mut self) {
        self.msgs.pop_front();
    }
}

#[derive(Default)]
struct Sink {
    tl: Vec<TlFlit>,
    msgs: Vec<DlMessage>,
}

impl UnpackSink for Sink {
    fn tl_flit(&mut self, flit: &TlFlit) {
        self.tl.push(*flit);
    }
    fn message(&mut self, msg: DlMessage) {
        self.msgs.push(msg);
    }
}

fn pack_one(p: &mut DlPacker, src: &mut Src, seq: u16) -> ([u8; FLIT_LEN], PackStats) {
    let mut buf = [0u8; FLIT_LEN];
    let h = DlFlitHeader::Explicit(DlExplicitHeader {
        op: 0,
        payload: true,
        flit_seq_no: seq % 511 + 1,
    });
    let st = p.pack_flit(src, &h, DlCrc::Bzip2, &mut buf).unwrap();
    (buf, st)
}

/// Per round: TL flits and DL messages that become ready before the next DL flit.
type Rounds = Vec<(Vec<TlFlit>, Vec<DlMessage>)>;

fn arb_rounds() -> impl Strategy<Value = Rounds> {
    prop::collection::vec(
        (
            prop::collection::vec(arb_tl_flit(), 0..16),
            prop::collection::vec(arb_message(), 0..5),
        ),
        1..12,
    )
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(128))]

    #[test]
    fn message_emit_parse(msg in arb_message()) {
        let mut buf = [0u8; 4 * 33];
        let n = msg.emit(&mut buf).unwrap();
        prop_assert_eq!(n, msg.buffer_len());
        let (back, used) = DlMessage::parse_prefix(&buf[..n], msg.space()).unwrap();
        prop_assert_eq!(used, n);
        prop_assert_eq!(back, msg);
    }

    #[test]
    fn message_parse_emit(bytes in prop::collection::vec(any::<u8>(), 0..140), vendor in any::<bool>()) {
        let space = if vendor { MessageSpace::Vendor } else { MessageSpace::Standard };
        if let Ok((msg, used)) = DlMessage::parse_prefix(&bytes, space) {
            let mut out = [0u8; 4 * 33];
            let n = msg.emit(&mut out).unwrap();
            prop_assert_eq!(&out[..n], &bytes[..used]);
        }
    }

    #[test]
    fn flit_view_crc(body in prop::collection::vec(any::<u8>(), CRC_COVERED_LEN),
                     iso in any::<bool>(), bit in 0usize..FLIT_LEN * 8) {
        let alg = if iso { DlCrc::IsoHdlc } else { DlCrc::Bzip2 };
        let mut buf = [0u8; FLIT_LEN];
        buf[..CRC_COVERED_LEN].copy_from_slice(&body);
        let mut f = DlFlit::new_checked(&mut buf[..]).unwrap();
        f.fill_crc(alg);
        prop_assert!(f.verify_crc(alg).is_ok());
        prop_assert_eq!(f.payload(), &body[8..]);
        buf[bit / 8] ^= 1 << (bit % 8);
        let f = DlFlit::new_checked(&buf[..]).unwrap();
        let is_bad_crc = matches!(f.verify_crc(alg), Err(podlink_protocol::wire::Error::BadCrc { .. }));
        prop_assert!(is_bad_crc);
    }

    #[test]
    fn flit_repr_round_trip(cmd in any::<bool>(), op in 0u8..8, payload in any::<bool>(),
                            seq in 0u16..512, lo in 0u8..8, seg in prop::array::uniform5(any::<u8>())) {
        let header = if cmd {
            DlFlitHeader::Command(DlCommandHeader { op: 2 + (op & 1), payload, ack_req_seq: seq, flit_seq_lo: lo })
        } else {
            DlFlitHeader::Explicit(DlExplicitHeader { op: if op & 6 == 2 { op + 2 } else { op }, payload, flit_seq_no: seq })
        };
        let segment_headers = seg.map(|b| DlSegmentHeader::parse(&[b & !2]).unwrap());
        let repr = Repr { header, segment_headers };
        let mut buf = [0x5au8; FLIT_LEN];
        let mut f = DlFlit::new_unchecked(&mut buf[..]);
        repr.emit(&mut f, DlCrc::Bzip2).unwrap();
        let f = DlFlit::new_checked(&buf[..]).unwrap();
        prop_assert_eq!(Repr::parse(&f, DlCrc::Bzip2).unwrap(), repr);
        let mut again = buf;
        repr.emit(&mut DlFlit::new_unchecked(&mut again[..]), DlCrc::Bzip2).unwrap();
        prop_assert_eq!(&again[..], &buf[..]);
    }

    /// Every TL flit and every message comes out once, in order, whatever the interleaving.
    #[test]
    fn stream_round_trip(rounds in arb_rounds(), budget in prop_oneof![Just(usize::MAX), 1usize..80]) {
        let mut p = DlPacker::new().with_max_message_words(budget);
        let mut u = DlUnpacker::new();
        let mut src = Src::default();
        let mut sink = Sink::default();
        let (mut sent_tl, mut sent_msgs) = (Vec::new(), Vec::new());
        let (mut started, mut finished, mut nops_packed, mut nops_seen) = (0, 0, 0, 0);
        let mut seq = 0u16;
        let mut carry = 0;
        let mut step = |src: &mut Src, sink: &mut Sink, seq: &mut u16| {
            let (buf, st) = pack_one(&mut p, src, *seq);
            *seq += 1;
            let f = DlFlit::new_checked(&buf[..]).unwrap();
            f.verify_crc(DlCrc::Bzip2).unwrap();
            // Every segment header decodes under podlink's semantics.
            for i in 0..SEGMENT_COUNT {
                SegmentInfo::from_header(&f.segment_header(i).unwrap()).unwrap();
            }
            let us = u.unpack(&f, sink).unwrap();
            (st, us.nop_flits, p.carry_bytes())
        };
        for (tl, msgs) in rounds {
            sent_tl.extend(tl.iter().copied());
            sent_msgs.extend(msgs.iter().cloned());
            src.tl.extend(tl);
            src.msgs.extend(msgs);
            let (st, nops, c) = step(&mut src, &mut sink, &mut seq);
            carry = c;
            started += st.tl_started;
            finished += st.tl_finished;
            nops_packed += st.nop_started;
            nops_seen += nops;
            prop_assert_eq!(st.dropped_messages, 0);
        }
        // Drain: bounded by the queued data.
        for _ in 0..200 {
            if src.tl.is_empty() && src.msgs.is_empty() && carry == 0 {
                break;
            }
            let (st, nops, c) = step(&mut src, &mut sink, &mut seq);
            carry = c;
            started += st.tl_started;
            finished += st.tl_finished;
            nops_packed += st.nop_started;
            nops_seen += nops;
        }
        prop_assert!(src.tl.is_empty() && src.msgs.is_empty() && carry == 0);
        prop_assert_eq!(u.partial_len(), 0);
        prop_assert_eq!(started, sent_tl.len());
        prop_assert_eq!(finished, sent_tl.len());
        // Padding is told by position, not content: all-zero TL flits are delivered too.
        prop_assert_eq!(nops_seen, nops_packed);
        prop_assert_eq!(sink.tl, sent_tl);
        prop_assert_eq!(sink.msgs, sent_msgs);
    }

    /// After a lost flit the unpacker re-synchronises: what it delivers after the gap is an
    /// unbroken run of the sent TL flits, none of them touched by the lost flit.
    #[test]
    fn stream_resync_after_loss(n in 4usize..10, lost in 1usize..3,
                                msgs in prop::collection::vec(arb_message(), 0..12),
                                fill in any::<u8>()) {
        let mut p = DlPacker::new();
        let mut src = Src::default();
        let total = n * 10 + 10;
        for i in 0..total as u32 {
            let mut f = [fill; TL_FLIT_LEN];
            f[..4].copy_from_slice(&(i + 1).to_be_bytes());
            src.tl.push_back(f);
        }
        src.msgs.extend(msgs);
        let mut flits = Vec::new();
        let mut started_before = vec![0usize];
        for k in 0..n {
            let (buf, st) = pack_one(&mut p, &mut src, k as u16);
            flits.push(buf);
            started_before.push(started_before[k] + st.tl_started);
        }
        let lost = lost.min(n - 2);
        let mut u = DlUnpacker::new();
        let mut sink = Sink::default();
        for (k, f) in flits.iter().enumerate() {
            if k == lost {
                u.lose_sync();
                continue;
            }
            u.unpack(&DlFlit::new_checked(&f[..]).unwrap(), &mut sink).unwrap();
        }
        let idx: Vec<usize> = sink.tl.iter()
            .map(|f| u32::from_be_bytes(f[..4].try_into().unwrap()) as usize - 1)
            .collect();
        // Before the gap: 0, 1, 2, ...; after it: a consecutive run starting no earlier
        // than the first TL flit that starts after the lost flit.
        let before = idx.iter().zip(0..).take_while(|(a, b)| **a == *b).count();
        prop_assert!(before <= started_before[lost]);
        if let Some(&j) = idx.get(before) {
            prop_assert!(j >= started_before[lost + 1], "{j} {:?}", started_before);
            for (k, &i) in idx[before..].iter().enumerate() {
                prop_assert_eq!(i, j + k);
            }
        }
        for f in &sink.tl {
            prop_assert!(f[4..].iter().all(|b| *b == fill));
        }
    }
}

#[test]
fn segment_kinds_cover_all_codes() {
    let mut kinds = [0usize; 3];
    for b in 0u8..=255 {
        if let Ok(h) = DlSegmentHeader::parse(&[b]) {
            if let Ok(info) = SegmentInfo::from_header(&h) {
                kinds[match info.kind {
                    SegmentKind::Tl { .. } => 0,
                    SegmentKind::Alt { .. } => 1,
                    SegmentKind::AltContinued => 2,
                }] += 1;
            }
        }
    }
    // Tl: 16 carries × 3 real-start counts (0, 1, 2); Alt: 15 count pairs × 3; continued: 3.
    assert_eq!(kinds, [48, 45, 3]);
}
