//! Property tests for the Ethernet profile frame (`protocol/src/wire/eth.rs`).

use podlink_protocol::wire::crc::CRC32_ISO_HDLC;
use podlink_protocol::wire::eth::{FLIT_LEN, MAX_FLITS, MIN_LEN_BEFORE_FCS};
use podlink_protocol::wire::{
    AccelId, EthAddr, EthFrame, EthFrameRepr, EthRelHeader, EthRelOp, PartitionId, Psn, Vc,
};
use proptest::prelude::*;

fn rel_op() -> impl Strategy<Value = EthRelOp> {
    prop_oneof![
        Just(EthRelOp::Data),
        Just(EthRelOp::Ack),
        Just(EthRelOp::Nack)
    ]
}

fn rel_header() -> impl Strategy<Value = EthRelHeader> {
    (
        rel_op(),
        0u8..4,
        0u16..1024,
        0u16..1024,
        any::<u16>(),
        any::<u16>(),
    )
        .prop_map(|(op, vc, src, partition, psn, ack)| EthRelHeader {
            op,
            vc: Vc::new(vc).unwrap(),
            src: AccelId::new(src).unwrap(),
            partition: PartitionId::new(partition).unwrap(),
            psn: Psn(psn),
            ack_psn: Psn(ack),
        })
}

/// A header and flits that agree: data carries 1..=64 flits, ACK/NACK none.
fn header_and_flits() -> impl Strategy<Value = (EthRelHeader, Vec<[u8; FLIT_LEN]>)> {
    rel_header().prop_flat_map(|rel| {
        let count = if rel.op == EthRelOp::Data {
            1..=MAX_FLITS
        } else {
            0..=0
        };
        count
            .prop_flat_map(|n| proptest::collection::vec(any::<u8>(), n * FLIT_LEN))
            .prop_map(move |bytes| {
                let flits = bytes
                    .chunks_exact(FLIT_LEN)
                    .map(|c| c.try_into().unwrap())
                    .collect();
                (rel, flits)
            })
    })
}

/// Frame bytes built by hand (not by the emitter), from independent field values.
fn hand_built(dst: [u8; 6], src: [u8; 6], rel: &EthRelHeader, flits: &[[u8; FLIT_LEN]]) -> Vec<u8> {
    let mut b = Vec::new();
    b.extend_from_slice(&dst);
    b.extend_from_slice(&src);
    b.extend_from_slice(&[0x88, 0xb5]);
    let op = match rel.op {
        EthRelOp::Data => 0u64,
        EthRelOp::Ack => 1,
        EthRelOp::Nack => 2,
    };
    let word: u64 = (1 << 60)
        | (op << 58)
        | (u64::from(rel.vc.get()) << 56)
        | (u64::from(rel.src.get()) << 46)
        | (u64::from(rel.partition.get()) << 36)
        | (u64::from(rel.psn.0) << 16)
        | u64::from(rel.ack_psn.0);
    b.extend_from_slice(&word.to_be_bytes());
    for f in flits {
        b.extend_from_slice(f);
    }
    if b.len() < MIN_LEN_BEFORE_FCS {
        b.resize(MIN_LEN_BEFORE_FCS, 0);
    }
    let fcs = CRC32_ISO_HDLC.checksum(&b);
    b.extend_from_slice(&fcs.to_le_bytes());
    b
}

/// Exercise every getter of an unchecked view: none may panic.
fn touch_all<T: AsRef<[u8]>>(f: &EthFrame<T>) {
    let _ = (f.dst_addr(), f.src_addr(), f.ethertype(), f.rel_header());
    let _ = (
        f.flit_count(),
        f.payload(),
        f.padding(),
        f.tl_flits().count(),
    );
    let _ = (
        f.fcs(),
        f.compute_fcs(),
        f.verify_fcs(),
        f.rel_header_bytes(),
    );
}

proptest! {
    #[test]
    fn repr_emit_parse_round_trip(
        dst in any::<[u8; 6]>(),
        src in any::<[u8; 6]>(),
        (rel, flits) in header_and_flits(),
    ) {
        let repr = EthFrameRepr { dst_addr: EthAddr(dst), src_addr: EthAddr(src), rel, flits: &flits };
        let mut buf = vec![0u8; repr.buffer_len()];
        prop_assert_eq!(repr.emit(&mut buf), Ok(buf.len()));
        let frame = EthFrame::new_checked(&buf[..]).unwrap();
        prop_assert!(frame.verify_fcs());
        prop_assert_eq!(frame.flit_count(), flits.len());
        prop_assert_eq!(EthFrameRepr::parse(&frame), Ok(repr));
        // The emitter agrees with a frame built by hand.
        prop_assert_eq!(buf, hand_built(dst, src, &rel, &flits));
    }

    #[test]
    fn parse_emit_byte_identical(
        dst in any::<[u8; 6]>(),
        src in any::<[u8; 6]>(),
        (rel, flits) in header_and_flits(),
    ) {
        let bytes = hand_built(dst, src, &rel, &flits);
        let frame = EthFrame::new_checked(&bytes[..]).unwrap();
        let repr = EthFrameRepr::parse(&frame).unwrap();
        prop_assert_eq!(repr.rel, rel);
        let mut out = vec![0u8; repr.buffer_len()];
        prop_assert_eq!(repr.emit(&mut out), Ok(bytes.len()));
        prop_assert_eq!(out, bytes);
    }

    #[test]
    fn random_bytes_never_panic(bytes in proptest::collection::vec(any::<u8>(), 0..4300)) {
        touch_all(&EthFrame::new_unchecked(&bytes[..]));
        if let Ok(frame) = EthFrame::new_checked(&bytes[..]) {
            touch_all(&frame);
            let _ = EthFrameRepr::parse(&frame);
        }
    }

    /// Random frames of legal lengths with the EtherType, FCS and (often) version and reserved
    /// bits fixed up, so
    /// that parsing reaches the header and op checks; whatever parses re-emits identically.
    #[test]
    fn fixed_up_frames_parse_or_fail_cleanly(
        flits in 0usize..=MAX_FLITS,
        fill in proptest::collection::vec(any::<u8>(), 22 + MAX_FLITS * FLIT_LEN),
        keep_version in any::<bool>(),
    ) {
        let len = if flits == 0 { 64 } else { 22 + flits * FLIT_LEN + 4 };
        let mut b = fill[..len - 4].to_vec();
        b[12] = 0x88;
        b[13] = 0xb5;
        if keep_version {
            b[14] = (b[14] & 0x0f) | 0x10;
            b[17] &= 0xf0;
        }
        if flits == 0 && keep_version {
            b[22..60].fill(0);
        }
        let fcs = CRC32_ISO_HDLC.checksum(&b);
        b.extend_from_slice(&fcs.to_le_bytes());
        let frame = EthFrame::new_checked(&b[..]).unwrap();
        touch_all(&frame);
        if let Ok(repr) = EthFrameRepr::parse(&frame) {
            let mut out = vec![0u8; repr.buffer_len()];
            prop_assert_eq!(repr.emit(&mut out), Ok(b.len()));
            prop_assert_eq!(out, b);
        }
    }
}
