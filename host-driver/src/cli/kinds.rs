//! The table of kinds.

use super::dl_kinds as dk;
use super::json::{
    check_keys, json_u64, struct_from_json, struct_to_json, CliError, CliResult, JsonField,
};
use super::tl_kinds;
use crate::json_struct;
use podlink_protocol::wire::{
    self, crc::CRC32_BZIP2, DlCommandHeader, DlExplicitHeader, DlSegmentHeader, Ftype, TlField,
};
use serde_json::{Map, Value};

type Obj = Map<String, Value>;

/// One kind the tool can decode and encode.
pub struct Kind {
    /// The kind's name (as in the reference vectors).
    pub name: &'static str,
    /// One-line description.
    pub about: &'static str,
    /// Bytes → fields.
    pub decode: fn(&[u8]) -> CliResult<Obj>,
    /// Fields → bytes.
    pub encode: fn(&Obj) -> CliResult<Vec<u8>>,
}

json_struct!(wire::TlFlowControl {
    req_cmd,
    rsp_cmd,
    req_data,
    rsp_data
});
json_struct!(wire::TlUncompressedRequest {
    cmd,
    vchan,
    asi,
    tag,
    pool,
    attr,
    len,
    metadata,
    addr,
    srcaccid,
    dstaccid,
    cload,
    cway,
    numbeats
});
json_struct!(wire::TlUncompressedResponse {
    vchan,
    tag,
    pool,
    len,
    offset,
    status,
    rd_wr,
    last,
    srcaccid,
    dstaccid,
    spares
});
json_struct!(wire::TlCompressedRequest {
    cmd,
    vchan,
    asi,
    tag,
    pool,
    len,
    metadata,
    addr,
    srcaccid,
    dstaccid,
    cway
});
json_struct!(wire::TlCompressedReadResponse {
    vchan,
    tag,
    pool,
    dstaccid,
    offset,
    last
});
json_struct!(wire::TlCompressedWriteResponse {
    vchan,
    tag,
    pool,
    dstaccid,
    len,
    rd_wr
});
json_struct!(DlExplicitHeader {
    op,
    payload,
    flit_seq_no
});
json_struct!(DlCommandHeader {
    op,
    payload,
    ack_req_seq,
    flit_seq_lo
});
json_struct!(DlSegmentHeader {
    tl_flit1,
    message1,
    tl_flit0,
    message0,
    dl_alt_sector
});

/// Refuse input longer than the fixed-size item.
pub(super) fn exact(kind: &str, bytes: &[u8], len: usize) -> CliResult<()> {
    if bytes.len() > len {
        return Err(CliError::Trailing {
            kind: kind.to_string(),
            expected: len,
            got: bytes.len(),
        });
    }
    Ok(())
}

fn tl_decode(ftype: Ftype, bytes: &[u8]) -> CliResult<Obj> {
    let got = TlField::peek_ftype(bytes)?;
    if got != ftype {
        return Err(CliError::Field {
            field: "ftype".into(),
            why: format!("is {:#x}, this kind is {:#x}", got as u8, ftype as u8),
        });
    }
    let f = TlField::parse(bytes)?;
    exact("TL field", bytes, f.buffer_len())?;
    Ok(tl_field_to_json(&f).1)
}

/// (kind name, fields including `ftype`) of a TL control field.
pub(super) fn tl_field_to_json(f: &TlField) -> (&'static str, Obj) {
    let ftype = f.ftype();
    let mut m = match f {
        TlField::FlowControl(x) => struct_to_json(x),
        TlField::UncompressedRequest(x) => struct_to_json(x),
        TlField::UncompressedResponse(x) => struct_to_json(x),
        TlField::CompressedRequest(x) => struct_to_json(x),
        TlField::CompressedReadResponse(x) => struct_to_json(x),
        TlField::CompressedWriteResponse(x) => {
            let mut m = struct_to_json(x);
            m.insert("spare".into(), Value::from(0));
            m
        }
    };
    if matches!(f, TlField::CompressedReadResponse(_)) {
        m.insert("spare".into(), Value::from(0));
    }
    m.insert("ftype".into(), Value::from(ftype as u8));
    (ftype.name(), m)
}

/// A TL control field from its kind name and fields.
pub(super) fn tl_field_from_json(kind: &str, m: &Obj) -> CliResult<TlField> {
    let k = KINDS
        .iter()
        .find(|k| k.name == kind && k.name.starts_with("tl_") && k.name != "tl_flit")
        .ok_or_else(|| CliError::UnknownKind(kind.to_string()))?;
    let bytes = (k.encode)(m)?;
    Ok(TlField::parse(&bytes)?)
}

fn check_ftype(m: &Obj, ftype: Ftype) -> CliResult<()> {
    if let Some(v) = m.get("ftype") {
        let n = json_u64(v, "ftype")?;
        if n != ftype as u64 {
            return Err(CliError::Field {
                field: "ftype".into(),
                why: format!("{n} does not match this kind ({})", ftype as u8),
            });
        }
    }
    if let Some(v) = m.get("spare") {
        if json_u64(v, "spare")? != 0 {
            return Err(CliError::Field {
                field: "spare".into(),
                why: "reserved, must be 0".into(),
            });
        }
    }
    Ok(())
}

fn tl_encode(f: TlField) -> CliResult<Vec<u8>> {
    let mut buf = vec![0u8; f.buffer_len()];
    f.emit(&mut buf)?;
    Ok(buf)
}

macro_rules! tl_kind {
    ($name:literal, $about:literal, $ftype:ident, $variant:ident, $extra:expr) => {
        Kind {
            name: $name,
            about: $about,
            decode: |b| tl_decode(Ftype::$ftype, b),
            encode: |m| {
                check_ftype(m, Ftype::$ftype)?;
                tl_encode(TlField::$variant(struct_from_json(m, $extra)?))
            },
        }
    };
}

fn crc_input(m: &Obj) -> CliResult<Vec<u8>> {
    check_keys(m, &[&["input_hex", "input_name", "input_len", "crc_value"]])?;
    if let Some(Value::String(h)) = m.get("input_hex") {
        return super::json::parse_hex(h);
    }
    // Named inputs of the reference vectors: zeros_N and ramp_mod256_N.
    let name = match m.get("input_name") {
        Some(Value::String(s)) => s.as_str(),
        _ => {
            return Err(CliError::Field {
                field: "input_hex".into(),
                why: "missing (give input_hex or input_name)".into(),
            })
        }
    };
    let parse_n = |s: &str| -> CliResult<usize> {
        s.parse::<usize>()
            .ok()
            .filter(|n| *n <= 1 << 20)
            .ok_or_else(|| CliError::Field {
                field: "input_name".into(),
                why: format!("bad length `{s}`"),
            })
    };
    if let Some(n) = name.strip_prefix("zeros_") {
        Ok(vec![0; parse_n(n)?])
    } else if let Some(n) = name.strip_prefix("ramp_mod256_") {
        Ok((0..parse_n(n)?).map(|i| i as u8).collect())
    } else {
        Err(CliError::Field {
            field: "input_name".into(),
            why: format!("unknown input `{name}` (zeros_N, ramp_mod256_N)"),
        })
    }
}

/// Every kind, in `podlink kinds` order.
pub static KINDS: &[Kind] = &[
    tl_kind!("tl_flow_control_nop", "TL flow-control / NOP field (FTYPE 0, 4 B)", FlowControl, FlowControl, &["ftype"]),
    tl_kind!("tl_uncompressed_request", "TL uncompressed request (FTYPE 1, 16 B)", UncompressedRequest, UncompressedRequest, &["ftype"]),
    tl_kind!("tl_uncompressed_response", "TL uncompressed response (FTYPE 2, 8 B)", UncompressedResponse, UncompressedResponse, &["ftype"]),
    tl_kind!("tl_compressed_request", "TL compressed request (FTYPE 3, 8 B)", CompressedRequest, CompressedRequest, &["ftype"]),
    tl_kind!("tl_compressed_response_single_beat_read", "TL compressed single-beat read response (FTYPE 4, 4 B)", CompressedReadResponse, CompressedReadResponse, &["ftype", "spare"]),
    tl_kind!("tl_compressed_response_write_or_multibeat_read", "TL compressed write / multi-beat read response (FTYPE 5, 4 B)", CompressedWriteResponse, CompressedWriteResponse, &["ftype", "spare"]),
    Kind {
        name: "tl_flit",
        about: "TL flits, 64 B each: {items:[{kind: tl_* field | credits | message, ..., data, byte_enables, poisoned}]}",
        decode: tl_kinds::decode,
        encode: tl_kinds::encode,
    },
    Kind {
        name: "dl_explicit_flit_header",
        about: "DL explicit flit header (3 B)",
        decode: |b| {
            exact("dl_explicit_flit_header", b, 3)?;
            Ok(struct_to_json(&DlExplicitHeader::parse(b)?))
        },
        encode: |m| {
            let h: DlExplicitHeader = struct_from_json(m, &[])?;
            let mut buf = vec![0u8; 3];
            h.emit(&mut buf)?;
            Ok(buf)
        },
    },
    Kind {
        name: "dl_command_flit_header",
        about: "DL command flit header (3 B)",
        decode: |b| {
            exact("dl_command_flit_header", b, 3)?;
            Ok(struct_to_json(&DlCommandHeader::parse(b)?))
        },
        encode: |m| {
            let h: DlCommandHeader = struct_from_json(m, &[])?;
            let mut buf = vec![0u8; 3];
            h.emit(&mut buf)?;
            Ok(buf)
        },
    },
    Kind {
        name: "dl_segment_header",
        about: "DL segment header (1 B)",
        decode: |b| {
            exact("dl_segment_header", b, 1)?;
            Ok(struct_to_json(&DlSegmentHeader::parse(b)?))
        },
        encode: |m| {
            let h: DlSegmentHeader = struct_from_json(m, &[])?;
            let mut buf = vec![0u8; 1];
            h.emit(&mut buf)?;
            Ok(buf)
        },
    },
    Kind {
        name: "dl_msg_no_op",
        about: "DL message: no-op (Basic 0)",
        decode: |b| dk::decode_msg("dl_msg_no_op", b),
        encode: |m| dk::encode_msg("dl_msg_no_op", m),
    },
    Kind {
        name: "dl_msg_tl_rate_notification",
        about: "DL message: TL rate notification (Basic 4)",
        decode: |b| dk::decode_msg("dl_msg_tl_rate_notification", b),
        encode: |m| dk::encode_msg("dl_msg_tl_rate_notification", m),
    },
    Kind {
        name: "dl_msg_device_id",
        about: "DL message: device ID (Basic 5)",
        decode: |b| dk::decode_msg("dl_msg_device_id", b),
        encode: |m| dk::encode_msg("dl_msg_device_id", m),
    },
    Kind {
        name: "dl_msg_port_id",
        about: "DL message: port number (Basic 6)",
        decode: |b| dk::decode_msg("dl_msg_port_id", b),
        encode: |m| dk::encode_msg("dl_msg_port_id", m),
    },
    Kind {
        name: "dl_msg_uart_stream_transport",
        about: "DL message: UART stream transport (UART 0, 1+n words)",
        decode: |b| dk::decode_msg("dl_msg_uart_stream_transport", b),
        encode: |m| dk::encode_msg("dl_msg_uart_stream_transport", m),
    },
    Kind {
        name: "dl_msg_uart_stream_credit_update",
        about: "DL message: UART stream credit update (UART 1)",
        decode: |b| dk::decode_msg("dl_msg_uart_stream_credit_update", b),
        encode: |m| dk::encode_msg("dl_msg_uart_stream_credit_update", m),
    },
    Kind {
        name: "dl_msg_uart_stream_reset_request",
        about: "DL message: UART stream reset request (UART 6)",
        decode: |b| dk::decode_msg("dl_msg_uart_stream_reset_request", b),
        encode: |m| dk::encode_msg("dl_msg_uart_stream_reset_request", m),
    },
    Kind {
        name: "dl_msg_uart_stream_reset_response",
        about: "DL message: UART stream reset response (UART 7)",
        decode: |b| dk::decode_msg("dl_msg_uart_stream_reset_response", b),
        encode: |m| dk::encode_msg("dl_msg_uart_stream_reset_response", m),
    },
    Kind {
        name: "dl_msg_channel_negotiation",
        about: "DL message: channel online/offline negotiation (Control 4)",
        decode: |b| dk::decode_msg("dl_msg_channel_negotiation", b),
        encode: |m| dk::encode_msg("dl_msg_channel_negotiation", m),
    },
    Kind {
        name: "dl_msg_vendor_defined_type_length",
        about: "DL message: vendor-defined word",
        decode: |b| dk::decode_msg("dl_msg_vendor_defined_type_length", b),
        encode: |m| dk::encode_msg("dl_msg_vendor_defined_type_length", m),
    },
    Kind {
        name: "dl_command_flit",
        about: "DL command flit, 640 B (Ack / Replay Request, zero payload, CRC)",
        decode: dk::decode_command_flit,
        encode: dk::encode_command_flit,
    },
    Kind {
        name: "dl_flit",
        about: "DL payload flits, 640 B each: {seq, tl_flits:[hex], messages:[{kind,...}]} (TL flits straddle flits)",
        decode: dk::decode_dl_flits,
        encode: dk::encode_dl_flits,
    },
    Kind {
        name: "eth_frame",
        about: "Ethernet-profile frame (EtherType 0x88B5): {dst, src, op, vc, partition, psn, ack_psn, tl_flits}",
        decode: dk::decode_eth,
        encode: dk::encode_eth,
    },
    Kind {
        name: "crc32",
        about: "DL CRC-32/BZIP2 of the given bytes: decode HEX prints it, encode {input_hex} gives its 4 bytes",
        decode: |b| {
            let mut m = Obj::new();
            let c = CRC32_BZIP2.checksum(b);
            m.insert("crc_value".into(), c.to_json());
            m.insert("input_len".into(), b.len().to_json_usize());
            Ok(m)
        },
        encode: |m| Ok(CRC32_BZIP2.checksum(&crc_input(m)?).to_be_bytes().to_vec()),
    },
];

trait UsizeJson {
    fn to_json_usize(self) -> Value;
}
impl UsizeJson for usize {
    fn to_json_usize(self) -> Value {
        Value::from(self as u64)
    }
}
