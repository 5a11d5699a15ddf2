//! Property tests for TL control fields and DL headers: emit then parse gives the same Repr;
//! parse then emit gives the same bytes for every valid input; no input panics.

use podlink_protocol::wire::{
    AccelId, DlCommandHeader, DlExplicitHeader, DlFlitHeader, DlSegmentHeader, Opcode, Tag,
    TlCompressedReadResponse, TlCompressedRequest, TlCompressedWriteResponse, TlField,
    TlFlowControl, TlUncompressedRequest, TlUncompressedResponse, Vc,
};
use proptest::prelude::*;

fn acc() -> impl Strategy<Value = AccelId> {
    (0u16..1024).prop_map(|v| AccelId::new(v).unwrap())
}
fn tag() -> impl Strategy<Value = Tag> {
    (0u16..2048).prop_map(|v| Tag::new(v).unwrap())
}
fn vc() -> impl Strategy<Value = Vc> {
    (0u8..4).prop_map(|v| Vc::new(v).unwrap())
}

fn tl_field() -> impl Strategy<Value = TlField> {
    prop_oneof![
        (0u8..64, 0u8..64, any::<u8>(), any::<u8>()).prop_map(|(a, b, c, d)| TlField::FlowControl(
            TlFlowControl {
                req_cmd: a,
                rsp_cmd: b,
                req_data: c,
                rsp_data: d
            }
        )),
        (
            (
                0u8..64,
                vc(),
                0u8..4,
                tag(),
                any::<bool>(),
                any::<u8>(),
                0u8..64
            ),
            (
                any::<u8>(),
                0u64..(1 << 55),
                acc(),
                acc(),
                any::<bool>(),
                0u8..4,
                0u8..4
            )
        )
            .prop_map(
                |(
                    (cmd, vchan, asi, tag, pool, attr, len),
                    (metadata, addr, s, d, cload, cway, nb),
                )| {
                    TlField::UncompressedRequest(TlUncompressedRequest {
                        cmd: Opcode::from_raw(cmd),
                        vchan,
                        asi,
                        tag,
                        pool,
                        attr,
                        len,
                        metadata,
                        addr,
                        srcaccid: s,
                        dstaccid: d,
                        cload,
                        cway,
                        numbeats: nb,
                    })
                }
            ),
        (
            vc(),
            tag(),
            any::<bool>(),
            0u8..4,
            0u8..4,
            0u8..16,
            any::<bool>(),
            any::<bool>(),
            acc(),
            acc(),
            any::<u16>()
        )
            .prop_map(
                |(vchan, tag, pool, len, offset, status, rd_wr, last, s, d, spares)| {
                    TlField::UncompressedResponse(TlUncompressedResponse {
                        vchan,
                        tag,
                        pool,
                        len,
                        offset,
                        status,
                        rd_wr,
                        last,
                        srcaccid: s,
                        dstaccid: d,
                        spares,
                    })
                }
            ),
        (
            0u8..8,
            vc(),
            0u8..4,
            tag(),
            any::<bool>(),
            0u8..4,
            0u8..8,
            0u16..(1 << 14),
            acc(),
            acc(),
            0u8..4
        )
            .prop_map(
                |(cmd, vchan, asi, tag, pool, len, metadata, addr, s, d, cway)| {
                    TlField::CompressedRequest(TlCompressedRequest {
                        cmd,
                        vchan,
                        asi,
                        tag,
                        pool,
                        len,
                        metadata,
                        addr,
                        srcaccid: s,
                        dstaccid: d,
                        cway,
                    })
                }
            ),
        (vc(), tag(), any::<bool>(), acc(), 0u8..4, any::<bool>()).prop_map(
            |(vchan, tag, pool, d, offset, last)| {
                TlField::CompressedReadResponse(TlCompressedReadResponse {
                    vchan,
                    tag,
                    pool,
                    dstaccid: d,
                    offset,
                    last,
                })
            }
        ),
        (vc(), tag(), any::<bool>(), acc(), 0u8..4, any::<bool>()).prop_map(
            |(vchan, tag, pool, d, len, rd_wr)| {
                TlField::CompressedWriteResponse(TlCompressedWriteResponse {
                    vchan,
                    tag,
                    pool,
                    dstaccid: d,
                    len,
                    rd_wr,
                })
            }
        ),
    ]
}

proptest! {
    #[test]
    fn tl_field_emit_then_parse(f in tl_field()) {
        let mut buf = [0u8; 16];
        let n = f.emit(&mut buf).unwrap();
        prop_assert_eq!(n, f.buffer_len());
        prop_assert_eq!(TlField::parse(&buf[..n]).unwrap(), f);
    }

    #[test]
    fn tl_field_parse_then_emit(bytes in proptest::collection::vec(any::<u8>(), 0..20)) {
        if let Ok(f) = TlField::parse(&bytes) {
            let mut out = [0u8; 16];
            let n = f.emit(&mut out).unwrap();
            prop_assert_eq!(&out[..n], &bytes[..n]);
        }
    }

    #[test]
    fn dl_headers_round_trip(b in any::<[u8; 3]>(), s in any::<u8>()) {
        if let Ok(h) = DlFlitHeader::parse(&b) {
            let mut out = [0u8; 3];
            h.emit(&mut out).unwrap();
            prop_assert_eq!(out, b);
        }
        for r in [DlExplicitHeader::parse(&b).map(DlFlitHeader::Explicit), DlCommandHeader::parse(&b).map(DlFlitHeader::Command)].into_iter().flatten() {
            let mut out = [0u8; 3];
            r.emit(&mut out).unwrap();
            prop_assert_eq!(out, b);
        }
        if let Ok(h) = DlSegmentHeader::parse(&[s]) {
            let mut out = [0u8; 1];
            h.emit(&mut out).unwrap();
            prop_assert_eq!(out[0], s);
        }
    }
}
