//! Beyond the reference vectors: random field values for every fixed-layout kind, checked
//! against a generic packer of the independent model's declared formats (its
//! `bit_fields::PacketFormat` tables: fields MSB first from bit 7 of byte 0, reserved fields
//! 0). The vectors hold two values per field (all zeros and all ones); this test holds
//! thousands, in both directions: `cli::encode` must produce the packer's bytes and
//! `cli::decode` must give every field back. See spec-notes/wire.md and
//! spec-notes/deviations.md for the layouts.

use podlink_host::cli;
use serde_json::{Map, Value};

/// A field: name (`_` for reserved), width in bits, and a fixed value (`ftype`, `mtype`,
/// `mclass`, reserved and spare bits) or `None` for a free field.
type Field = (&'static str, u32, Option<u64>);

const R: Option<u64> = Some(0);

/// The model's formats (`tl_fields.h`, `dl_flit.h`, `dl_messages.h`), by vector kind.
const FORMATS: &[(&str, &[Field])] = &[
    (
        "tl_uncompressed_request",
        &[
            ("ftype", 4, Some(1)),
            ("cmd", 6, None),
            ("vchan", 2, None),
            ("asi", 2, None),
            ("tag", 11, None),
            ("pool", 1, None),
            ("attr", 8, None),
            ("len", 6, None),
            ("metadata", 8, None),
            ("addr", 55, None),
            ("srcaccid", 10, None),
            ("dstaccid", 10, None),
            ("cload", 1, None),
            ("cway", 2, None),
            ("numbeats", 2, None),
        ],
    ),
    (
        "tl_uncompressed_response",
        &[
            ("ftype", 4, Some(2)),
            ("vchan", 2, None),
            ("tag", 11, None),
            ("pool", 1, None),
            ("len", 2, None),
            ("offset", 2, None),
            ("status", 4, None),
            ("rd_wr", 1, None),
            ("last", 1, None),
            ("srcaccid", 10, None),
            ("dstaccid", 10, None),
            ("spares", 16, None),
        ],
    ),
    (
        "tl_compressed_request",
        &[
            ("ftype", 4, Some(3)),
            ("cmd", 3, None),
            ("vchan", 2, None),
            ("asi", 2, None),
            ("tag", 11, None),
            ("pool", 1, None),
            ("len", 2, None),
            ("metadata", 3, None),
            ("addr", 14, None),
            ("srcaccid", 10, None),
            ("dstaccid", 10, None),
            ("cway", 2, None),
        ],
    ),
    (
        "tl_compressed_response_single_beat_read",
        &[
            ("ftype", 4, Some(4)),
            ("vchan", 2, None),
            ("tag", 11, None),
            ("pool", 1, None),
            ("dstaccid", 10, None),
            ("offset", 2, None),
            ("last", 1, None),
            ("spare", 1, R),
        ],
    ),
    (
        "tl_compressed_response_write_or_multibeat_read",
        &[
            ("ftype", 4, Some(5)),
            ("vchan", 2, None),
            ("tag", 11, None),
            ("pool", 1, None),
            ("dstaccid", 10, None),
            ("len", 2, None),
            ("rd_wr", 1, None),
            ("spare", 1, R),
        ],
    ),
    (
        "tl_flow_control_nop",
        &[
            ("ftype", 4, Some(0)),
            ("req_cmd", 6, None),
            ("rsp_cmd", 6, None),
            ("req_data", 8, None),
            ("rsp_data", 8, None),
        ],
    ),
    (
        "dl_explicit_flit_header",
        &[
            ("op", 3, None),
            ("payload", 1, None),
            ("_", 3, R),
            ("flit_seq_no", 9, None),
            ("_", 8, R),
        ],
    ),
    (
        "dl_command_flit_header",
        &[
            ("op", 3, None),
            ("payload", 1, None),
            ("ack_req_seq", 9, None),
            ("flit_seq_lo", 3, None),
            ("_", 8, R),
        ],
    ),
    (
        "dl_segment_header",
        &[
            ("tl_flit1", 1, None),
            ("message1", 2, None),
            ("tl_flit0", 1, None),
            ("message0", 2, None),
            ("_", 1, R),
            ("dl_alt_sector", 1, None),
        ],
    ),
    (
        "dl_msg_uart_stream_reset_request",
        &[
            ("_", 19, R),
            ("all_streams", 1, None),
            ("stream_id", 3, None),
            ("mtype", 3, Some(6)),
            ("mclass", 4, Some(1)),
            ("_", 1, R),
            ("compressed", 1, R),
        ],
    ),
    (
        "dl_msg_uart_stream_reset_response",
        &[
            ("_", 16, R),
            ("status", 3, None),
            ("all_streams", 1, None),
            ("stream_id", 3, None),
            ("mtype", 3, Some(7)),
            ("mclass", 4, Some(1)),
            ("_", 1, R),
            ("compressed", 1, R),
        ],
    ),
    (
        "dl_msg_uart_stream_credit_update",
        &[
            ("data_fc_seq", 12, None),
            ("_", 8, R),
            ("stream_id", 3, None),
            ("mtype", 3, Some(1)),
            ("mclass", 4, Some(1)),
            ("_", 1, R),
            ("compressed", 1, R),
        ],
    ),
    (
        "dl_msg_tl_rate_notification",
        &[
            ("rate", 16, None),
            ("_", 3, R),
            ("ack", 1, None),
            ("_", 3, R),
            ("mtype", 3, Some(4)),
            ("mclass", 4, Some(0)),
            ("_", 1, R),
            ("compressed", 1, R),
        ],
    ),
    (
        "dl_msg_device_id",
        &[
            ("valid", 1, None),
            ("type", 2, None),
            ("_", 3, R),
            ("id", 10, None),
            ("_", 3, R),
            ("ack", 1, None),
            ("_", 3, R),
            ("mtype", 3, Some(5)),
            ("mclass", 4, Some(0)),
            ("_", 1, R),
            ("compressed", 1, R),
        ],
    ),
    (
        "dl_msg_port_id",
        &[
            ("valid", 1, None),
            ("_", 3, R),
            ("port_number", 12, None),
            ("_", 3, R),
            ("ack", 1, None),
            ("_", 3, R),
            ("mtype", 3, Some(6)),
            ("mclass", 4, Some(0)),
            ("_", 1, R),
            ("compressed", 1, R),
        ],
    ),
    (
        "dl_msg_no_op",
        &[
            ("_", 23, R),
            ("mtype", 3, Some(0)),
            ("mclass", 4, Some(0)),
            ("_", 1, R),
            ("compressed", 1, R),
        ],
    ),
    (
        "dl_msg_channel_negotiation",
        &[
            ("_", 4, R),
            ("channel_response", 4, None),
            ("channel_command", 4, None),
            ("channel_target", 4, None),
            ("_", 7, R),
            ("mtype", 3, Some(4)),
            ("mclass", 4, Some(8)),
            ("_", 1, R),
            ("compressed", 1, R),
        ],
    ),
    (
        "dl_msg_vendor_defined_type_length",
        &[
            ("vendor_id", 16, None),
            ("type", 8, None),
            ("length", 8, None),
        ],
    ),
];

/// SplitMix64: a fixed, seeded sequence (the test must fail the same way every run).
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^ (z >> 31)
    }

    /// A value of `bits` bits: 0, all ones, or uniform, a quarter, a quarter, a half.
    fn field(&mut self, bits: u32) -> u64 {
        let max = if bits == 64 {
            u64::MAX
        } else {
            (1 << bits) - 1
        };
        match self.next() % 4 {
            0 => 0,
            1 => max,
            _ => self.next() & max,
        }
    }
}

/// The fields packed MSB first, as the model's `PacketFormat` does.
fn pack(format: &[Field], values: &[u64]) -> Vec<u8> {
    let bits: u32 = format.iter().map(|f| f.1).sum();
    assert_eq!(bits % 8, 0);
    let mut out = vec![0u8; (bits / 8) as usize];
    let mut pos = 0u32;
    for (f, &v) in format.iter().zip(values) {
        for b in (0..f.1).rev() {
            if v >> b & 1 == 1 {
                out[(pos / 8) as usize] |= 0x80 >> (pos % 8);
            }
            pos += 1;
        }
    }
    out
}

#[test]
fn random_fields_encode_and_decode_as_the_models_formats_pack_them() {
    let mut rng = Rng(0x5eed_0041);
    let mut checked = 0;
    for (kind, format) in FORMATS {
        for _ in 0..500 {
            let values: Vec<u64> = format
                .iter()
                .map(|&(_, bits, fixed)| fixed.unwrap_or_else(|| rng.field(bits)))
                .collect();
            let want = pack(format, &values);
            let mut fields = Map::new();
            for (&(name, _, _), &v) in format.iter().zip(&values) {
                // Reserved bits are not fields; `ftype`, `mtype`, `mclass`, `spare` and
                // `compressed` are listed at their fixed values, as in the vectors.
                if name != "_" {
                    fields.insert(name.to_string(), Value::from(v));
                }
            }
            let got =
                cli::encode(kind, &fields).unwrap_or_else(|e| panic!("{kind} {fields:?}: {e}"));
            assert_eq!(got, want, "{kind} encode {fields:?}");
            let back = cli::decode(kind, &want).unwrap_or_else(|e| panic!("{kind} decode: {e}"));
            for (name, v) in &fields {
                assert_eq!(
                    back.get(name),
                    Some(v),
                    "{kind} decode {name} of {want:02x?}"
                );
            }
            checked += 1;
        }
    }
    assert_eq!(checked, 500 * FORMATS.len());
}
