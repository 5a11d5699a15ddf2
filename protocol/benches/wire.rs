//! Wire-format micro-benchmarks (criterion; stable harness).
//!
//! Run: `cargo bench -p podlink-protocol --bench wire` (add `-- <filter>` for one group).
//!
//! Layout: one function per benchmark group, each taking `&mut Criterion` and opening its own
//! `benchmark_group` with a `Throughput`. To add a group, write such a function (inputs built
//! outside the timed closure, results through `black_box`) and append it to `targets` in
//! `criterion_group!` at the bottom. Run times are kept short by [`config`].

use core::hint::black_box;
use core::time::Duration;

use criterion::{criterion_group, criterion_main, BenchmarkId, Criterion, Throughput};
use podlink_protocol::wire::crc::{DlCrc, CRC32_BZIP2, CRC32_ISO_HDLC};
use podlink_protocol::wire::dl_flit::{CRC_COVERED_LEN, FLIT_LEN};
use podlink_protocol::wire::dl_stream::{PackSource, UnpackSink};
use podlink_protocol::wire::{
    AccelId, EthFrame, EthFrameRepr, EthMacScheme, EthRelHeader, EthRelOp, Opcode, PartitionId,
    Psn, Tag, TlCompressedReadResponse, TlCompressedRequest, TlCompressedWriteResponse, TlField,
    TlFlowControl, TlUncompressedRequest, TlUncompressedResponse, Vc,
};
use podlink_protocol::wire::{
    DlExplicitHeader, DlFlit, DlFlitHeader, DlMessage, DlPacker, DlUnpacker,
};

/// Shared settings: short runs on a shared 2-core machine.
fn config() -> Criterion {
    Criterion::default()
        .warm_up_time(Duration::from_secs(1))
        .measurement_time(Duration::from_secs(2))
        .sample_size(20)
}

/// Deterministic xorshift64 for building inputs.
struct XorShift(u64);

impl XorShift {
    fn next(&mut self) -> u64 {
        let mut x = self.0;
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        self.0 = x;
        x
    }
}

/// Bytes 0, 1, 2, … (mod 256).
fn ramp(len: usize) -> Vec<u8> {
    (0..len).map(|i| i as u8).collect()
}

// ---------------------------------------------------------------------------------------
// TL control fields

/// Number of fields in the mixed TL buffer.
const TL_FIELDS: usize = 1024;

/// A buffer of `TL_FIELDS` control fields, FTYPEs 0x0..=0x5 in a pseudo-random order, with
/// varying tags, IDs and addresses.
fn mixed_tl_fields() -> Vec<u8> {
    let mut rng = XorShift(0x9e37_79b9_7f4a_7c15);
    let mut buf = Vec::new();
    for _ in 0..TL_FIELDS {
        let r = rng.next();
        let tag = Tag::from_bits_truncate(r as u16);
        let vc = Vc::from_bits_truncate((r >> 11) as u8);
        let src = AccelId::from_bits_truncate((r >> 13) as u16);
        let dst = AccelId::from_bits_truncate((r >> 23) as u16);
        let field = match (r >> 60) % 6 {
            0 => TlField::FlowControl(TlFlowControl {
                req_cmd: (r & 0x3f) as u8,
                rsp_cmd: ((r >> 6) & 0x3f) as u8,
                req_data: (r >> 12) as u8,
                rsp_data: (r >> 20) as u8,
            }),
            1 => TlField::UncompressedRequest(TlUncompressedRequest {
                cmd: Opcode::WriteFull,
                vchan: vc,
                tag,
                len: 15,
                addr: (r >> 9) & ((1 << 55) - 1),
                srcaccid: src,
                dstaccid: dst,
                ..Default::default()
            }),
            2 => TlField::UncompressedResponse(TlUncompressedResponse {
                vchan: vc,
                tag,
                last: true,
                srcaccid: src,
                dstaccid: dst,
                ..Default::default()
            }),
            3 => TlField::CompressedRequest(TlCompressedRequest {
                vchan: vc,
                tag,
                addr: (r >> 33) as u16 & 0x3fff,
                srcaccid: src,
                dstaccid: dst,
                ..Default::default()
            }),
            4 => TlField::CompressedReadResponse(TlCompressedReadResponse {
                vchan: vc,
                tag,
                dstaccid: dst,
                last: true,
                ..Default::default()
            }),
            _ => TlField::CompressedWriteResponse(TlCompressedWriteResponse {
                vchan: vc,
                tag,
                dstaccid: dst,
                rd_wr: true,
                ..Default::default()
            }),
        };
        let start = buf.len();
        buf.resize(start + field.buffer_len(), 0);
        field.emit(&mut buf[start..]).expect("emit TL field");
    }
    buf
}

/// Decode every field of `buf` in order; returns the count (and a checksum to keep it live).
fn decode_all(buf: &[u8]) -> (usize, u32) {
    let (mut off, mut n, mut acc) = (0usize, 0usize, 0u32);
    while off < buf.len() {
        let field = TlField::parse(&buf[off..]).expect("valid TL field");
        acc = acc.wrapping_add(field.ftype() as u32);
        off += field.buffer_len();
        n += 1;
    }
    (n, acc)
}

fn tl_field_decode(c: &mut Criterion) {
    let buf = mixed_tl_fields();
    assert_eq!(decode_all(&buf).0, TL_FIELDS);
    let mut g = c.benchmark_group("tl_field_decode");
    g.throughput(Throughput::Elements(TL_FIELDS as u64));
    g.bench_function("mixed_ftypes", |b| b.iter(|| decode_all(black_box(&buf))));
    g.finish();
}

// ---------------------------------------------------------------------------------------
// CRC

/// Bytes a DL flit CRC covers: the 640 B flit minus its 4 B CRC.
const DL_CRC_COVERED: usize = 636;

fn crc32_bzip2(c: &mut Criterion) {
    let buf = ramp(DL_CRC_COVERED);
    let mut g = c.benchmark_group("crc32_bzip2");
    g.throughput(Throughput::Bytes(DL_CRC_COVERED as u64));
    g.bench_function("636B", |b| b.iter(|| CRC32_BZIP2.checksum(black_box(&buf))));
    g.finish();
}

// ---------------------------------------------------------------------------------------
// Ethernet profile frame

/// An emitted data frame carrying `flits` TL flits.
fn eth_frame_bytes(flits: usize) -> Vec<u8> {
    let payload: Vec<[u8; 64]> = ramp(flits * 64)
        .chunks_exact(64)
        .map(|c| c.try_into().unwrap())
        .collect();
    let rel = EthRelHeader {
        op: EthRelOp::Data,
        vc: Vc::new(1).unwrap(),
        src: AccelId::new(3).unwrap(),
        partition: PartitionId::new(5).unwrap(),
        psn: Psn(0x1234),
        ack_psn: Psn(0x0042),
    };
    let repr = EthFrameRepr::new(
        &EthMacScheme::DEFAULT,
        AccelId::new(7).unwrap(),
        rel,
        &payload,
    );
    let mut buf = vec![0u8; repr.buffer_len()];
    repr.emit(&mut buf).expect("emit eth frame");
    buf
}

/// FCS check + full parse (what a receiver does) beside the bare CRC-32/ISO-HDLC over the
/// same bytes the FCS covers, for 1, 16 and 64 flits.
fn eth_frame(c: &mut Criterion) {
    let mut g = c.benchmark_group("eth_frame");
    for flits in [1usize, 16, 64] {
        let frame = eth_frame_bytes(flits);
        g.throughput(Throughput::Bytes(frame.len() as u64));
        g.bench_with_input(
            BenchmarkId::new("verify_parse", flits),
            &frame,
            |b, frame| {
                b.iter(|| {
                    let f = EthFrame::new_checked(black_box(&frame[..])).expect("length");
                    let repr = EthFrameRepr::parse(&f).expect("parse");
                    repr.flits.len()
                })
            },
        );
        let covered = &frame[..frame.len() - 4];
        g.bench_with_input(
            BenchmarkId::new("crc32_iso_hdlc", flits),
            &covered,
            |b, covered| b.iter(|| CRC32_ISO_HDLC.checksum(black_box(covered))),
        );
    }
    g.finish();
}

// ---------------------------------------------------------------------------------------
// DL flits: build (pack + header + CRC) and verify-and-unpack, each beside the CRC alone on
// the same bytes in the same run.

/// DL flits in the benchmark stream.
const DL_FLITS: usize = 64;

/// A TL-flit source cycling over pre-built non-zero flits (never runs dry).
struct Cycle {
    flits: Vec<[u8; 64]>,
    i: usize,
}

impl PackSource for Cycle {
    fn next_tl_flit(&mut self, out: &mut [u8; 64]) -> bool {
        *out = self.flits[self.i % self.flits.len()];
        self.i += 1;
        true
    }
}

/// Counts and folds what the unpacker delivers, so the work cannot be optimised away.
struct Fold(u64);

impl UnpackSink for Fold {
    fn tl_flit(&mut self, f: &[u8; 64]) {
        self.0 = self.0.wrapping_add(u64::from(f[0]) ^ u64::from(f[63]));
    }
    fn message(&mut self, _m: DlMessage) {
        self.0 = self.0.wrapping_add(1);
    }
}

fn tl_source() -> Cycle {
    let mut rng = XorShift(0x1234_5678_9abc_def1);
    let flits = (0..97)
        .map(|_| core::array::from_fn(|_| (rng.next() as u8) | 1))
        .collect();
    Cycle { flits, i: 0 }
}

/// A stream of `DL_FLITS` packed DL flits with sequence numbers 1, 2, ….
fn dl_stream() -> Vec<u8> {
    let mut src = tl_source();
    let mut packer = DlPacker::new();
    let mut out = vec![0u8; DL_FLITS * FLIT_LEN];
    for (i, chunk) in out.chunks_mut(FLIT_LEN).enumerate() {
        let h = DlFlitHeader::Explicit(DlExplicitHeader {
            op: 0,
            payload: true,
            flit_seq_no: (i % 511 + 1) as u16,
        });
        packer.pack_flit(&mut src, &h, DlCrc::Bzip2, chunk).unwrap();
    }
    out
}

fn dl_flit(c: &mut Criterion) {
    let stream = dl_stream();
    let mut g = c.benchmark_group("dl_flit");
    g.throughput(Throughput::Bytes(stream.len() as u64));
    g.bench_function("crc_alone_table", |b| {
        b.iter(|| {
            let mut acc = 0u32;
            for f in black_box(&stream).chunks(FLIT_LEN) {
                acc ^= DlCrc::Bzip2.checksum_table(&f[..CRC_COVERED_LEN]);
            }
            acc
        })
    });
    g.bench_function("crc_alone", |b| {
        b.iter(|| {
            let mut acc = 0u32;
            for f in black_box(&stream).chunks(FLIT_LEN) {
                acc ^= DlCrc::Bzip2.checksum(&f[..CRC_COVERED_LEN]);
            }
            acc
        })
    });
    // With `crc-fast`, `crc_alone` runs podlink-simd-crc's kernel: this is the crc-fast
    // crate's general entry point on the same bytes, the baseline that kernel replaced.
    #[cfg(feature = "crc-fast")]
    g.bench_function("crc_alone_crc_fast_crate", |b| {
        b.iter(|| {
            let mut acc = 0u64;
            for f in black_box(&stream).chunks(FLIT_LEN) {
                acc ^=
                    crc_fast::checksum(crc_fast::CrcAlgorithm::Crc32Bzip2, &f[..CRC_COVERED_LEN]);
            }
            acc
        })
    });
    g.bench_function("verify_and_unpack", |b| {
        b.iter(|| {
            let mut un = DlUnpacker::new();
            let mut sink = Fold(0);
            for f in black_box(&stream).chunks(FLIT_LEN) {
                let flit = DlFlit::new_checked(f).unwrap();
                flit.verify_crc(DlCrc::Bzip2).unwrap();
                un.unpack(&flit, &mut sink).unwrap();
            }
            sink.0
        })
    });
    let mut buf = vec![0u8; stream.len()];
    g.bench_function("build", |b| {
        let mut src = tl_source();
        let mut packer = DlPacker::new();
        b.iter(|| {
            for (i, chunk) in buf.chunks_mut(FLIT_LEN).enumerate() {
                let h = DlFlitHeader::Explicit(DlExplicitHeader {
                    op: 0,
                    payload: true,
                    flit_seq_no: (i + 1) as u16,
                });
                packer.pack_flit(&mut src, &h, DlCrc::Bzip2, chunk).unwrap();
            }
            black_box(&buf);
        })
    });
    g.finish();
}

criterion_group! {
    name = benches;
    config = config();
    targets = tl_field_decode, crc32_bzip2, eth_frame, dl_flit
}
criterion_main!(benches);
