//! DL message, DL flit and Ethernet frame kinds of the `podlink` tool.

use super::json::{
    check_keys, json_u64, parse_hex, struct_from_json, struct_to_json, to_hex, CliError, CliResult,
    JsonField,
};
use super::kinds::exact;
use crate::{json_struct, json_struct_named};
use podlink_protocol::wire::dl_msg::{
    self, ChannelNegotiation, DeviceId, PortNumber, TlRateNotification, UartCreditUpdate,
    UartResetRequest, UartResetResponse, UartStreamTransport, VendorDefined,
};
use podlink_protocol::wire::dl_stream::{PackSource, UnpackSink};
use podlink_protocol::wire::{
    crc::DlCrc, eth, AccelId, DlExplicitHeader, DlFlit, DlFlitHeader, DlFlitRepr, DlMessage,
    DlMessageSpace, DlOp, DlPacker, DlUnpacker, EthFrame, EthFrameRepr, EthMacScheme, EthRelHeader,
    EthRelOp,
};
use serde_json::{Map, Value};
use std::collections::VecDeque;

type Obj = Map<String, Value>;

json_struct!(TlRateNotification { rate, ack });
json_struct_named!(DeviceId { valid = "valid", r#type = "type", id = "id", ack = "ack" });
json_struct!(PortNumber {
    valid,
    port_number,
    ack
});
json_struct!(ChannelNegotiation {
    channel_response,
    channel_command,
    channel_target
});
json_struct!(UartCreditUpdate {
    data_fc_seq,
    stream_id
});
json_struct!(UartResetRequest {
    all_streams,
    stream_id
});
json_struct!(UartResetResponse {
    status,
    all_streams,
    stream_id
});
json_struct_named!(VendorDefined { vendor_id = "vendor_id", r#type = "type", length = "length" });

/// The standard-message trailer fields every `dl_msg_*` kind carries.
const TRAILER: &[&str] = &["mtype", "mclass", "compressed"];

/// (kind name, class, type) of every standard message kind.
pub const MSG_KINDS: &[(&str, u8, u8)] = &[
    ("dl_msg_no_op", dl_msg::mclass::BASIC, dl_msg::mtype::NO_OP),
    (
        "dl_msg_tl_rate_notification",
        dl_msg::mclass::BASIC,
        dl_msg::mtype::TL_RATE_NOTIFICATION,
    ),
    (
        "dl_msg_device_id",
        dl_msg::mclass::BASIC,
        dl_msg::mtype::DEVICE_ID,
    ),
    (
        "dl_msg_port_id",
        dl_msg::mclass::BASIC,
        dl_msg::mtype::PORT_NUMBER,
    ),
    (
        "dl_msg_uart_stream_transport",
        dl_msg::mclass::UART,
        dl_msg::mtype::UART_STREAM_TRANSPORT,
    ),
    (
        "dl_msg_uart_stream_credit_update",
        dl_msg::mclass::UART,
        dl_msg::mtype::UART_CREDIT_UPDATE,
    ),
    (
        "dl_msg_uart_stream_reset_request",
        dl_msg::mclass::UART,
        dl_msg::mtype::UART_RESET_REQUEST,
    ),
    (
        "dl_msg_uart_stream_reset_response",
        dl_msg::mclass::UART,
        dl_msg::mtype::UART_RESET_RESPONSE,
    ),
    (
        "dl_msg_channel_negotiation",
        dl_msg::mclass::CONTROL,
        dl_msg::mtype::CHANNEL_NEGOTIATION,
    ),
];

/// The vendor-defined kind.
pub const VENDOR_KIND: &str = "dl_msg_vendor_defined_type_length";

/// A message as (kind name, fields).
pub fn msg_to_json(m: &DlMessage) -> (&'static str, Obj) {
    let mut o = match m {
        DlMessage::NoOp => Obj::new(),
        DlMessage::TlRateNotification(x) => struct_to_json(x),
        DlMessage::DeviceId(x) => struct_to_json(x),
        DlMessage::PortNumber(x) => struct_to_json(x),
        DlMessage::UartStreamTransport(x) => {
            let mut o = Obj::new();
            o.insert("stream_id".into(), x.stream_id.to_json());
            let n = x.payload_dwords.len();
            o.insert("length".into(), Value::from(n.saturating_sub(1) as u64));
            o.insert(
                "payload_dwords".into(),
                Value::Array(x.payload_dwords.iter().map(|w| Value::from(*w)).collect()),
            );
            o
        }
        DlMessage::UartCreditUpdate(x) => struct_to_json(x),
        DlMessage::UartResetRequest(x) => struct_to_json(x),
        DlMessage::UartResetResponse(x) => struct_to_json(x),
        DlMessage::ChannelNegotiation(x) => struct_to_json(x),
        DlMessage::Vendor(x) => return (VENDOR_KIND, struct_to_json(x)),
    };
    let (kind, class, ty) = MSG_KINDS
        .iter()
        .copied()
        .find(|(_, c, t)| m.class_type() == Some((*c, *t)))
        .unwrap_or(("dl_msg_unknown", 0, 0));
    o.insert("mclass".into(), Value::from(class));
    o.insert("mtype".into(), Value::from(ty));
    o.insert("compressed".into(), Value::from(0));
    (kind, o)
}

/// A message from its kind name and fields.
pub fn msg_from_json(kind: &str, o: &Obj) -> CliResult<DlMessage> {
    if kind == VENDOR_KIND {
        return Ok(DlMessage::Vendor(struct_from_json(o, &["kind"])?));
    }
    let (_, class, ty) = MSG_KINDS
        .iter()
        .copied()
        .find(|(k, _, _)| *k == kind)
        .ok_or_else(|| CliError::UnknownKind(kind.to_string()))?;
    for (f, want) in [("mclass", class), ("mtype", ty), ("compressed", 0)] {
        if let Some(v) = o.get(f) {
            let n = json_u64(v, f)?;
            if n != u64::from(want) {
                return Err(CliError::Field {
                    field: f.into(),
                    why: format!("{n} does not match {kind} ({want})"),
                });
            }
        }
    }
    let extra: Vec<&str> = TRAILER.iter().copied().chain(["kind"]).collect();
    Ok(match ty {
        _ if class == dl_msg::mclass::BASIC && ty == dl_msg::mtype::NO_OP => {
            check_keys(o, &[&extra])?;
            DlMessage::NoOp
        }
        _ if class == dl_msg::mclass::BASIC && ty == dl_msg::mtype::TL_RATE_NOTIFICATION => {
            DlMessage::TlRateNotification(struct_from_json(o, &extra)?)
        }
        _ if class == dl_msg::mclass::BASIC && ty == dl_msg::mtype::DEVICE_ID => {
            DlMessage::DeviceId(struct_from_json(o, &extra)?)
        }
        _ if class == dl_msg::mclass::BASIC => DlMessage::PortNumber(struct_from_json(o, &extra)?),
        _ if class == dl_msg::mclass::CONTROL => {
            DlMessage::ChannelNegotiation(struct_from_json(o, &extra)?)
        }
        t if t == dl_msg::mtype::UART_STREAM_TRANSPORT => {
            let mut allowed = extra.clone();
            allowed.extend(["stream_id", "length", "payload_dwords"]);
            check_keys(o, &[&allowed])?;
            let mut x = UartStreamTransport::default();
            if let Some(v) = o.get("stream_id") {
                x.stream_id = u8::from_json(v, "stream_id")?;
            }
            let words = match o.get("payload_dwords") {
                Some(Value::Array(a)) => a,
                _ => {
                    return Err(CliError::Field {
                        field: "payload_dwords".into(),
                        why: "an array of 1..=32 numbers is required".into(),
                    })
                }
            };
            for w in words {
                let w = u32::from_json(w, "payload_dwords")?;
                x.payload_dwords.push(w).map_err(|_| CliError::Field {
                    field: "payload_dwords".into(),
                    why: "more than 32 words".into(),
                })?;
            }
            if let Some(v) = o.get("length") {
                let l = json_u64(v, "length")?;
                if l + 1 != words.len() as u64 {
                    return Err(CliError::Field {
                        field: "length".into(),
                        why: format!("{l} but {} payload words (length = words - 1)", words.len()),
                    });
                }
            }
            DlMessage::UartStreamTransport(x)
        }
        t if t == dl_msg::mtype::UART_CREDIT_UPDATE => {
            DlMessage::UartCreditUpdate(struct_from_json(o, &extra)?)
        }
        t if t == dl_msg::mtype::UART_RESET_REQUEST => {
            DlMessage::UartResetRequest(struct_from_json(o, &extra)?)
        }
        _ => DlMessage::UartResetResponse(struct_from_json(o, &extra)?),
    })
}

/// Decode a standard message of `kind`.
pub fn decode_msg(kind: &str, b: &[u8]) -> CliResult<Obj> {
    let space = if kind == VENDOR_KIND {
        DlMessageSpace::Vendor
    } else {
        DlMessageSpace::Standard
    };
    let (m, used) = DlMessage::parse_prefix(b, space)?;
    exact(kind, b, used)?;
    let (k, o) = msg_to_json(&m);
    if k != kind {
        return Err(CliError::Field {
            field: "mclass/mtype".into(),
            why: format!("the bytes hold a {k}, not a {kind}"),
        });
    }
    Ok(o)
}

/// Encode a message of `kind`.
pub fn encode_msg(kind: &str, o: &Obj) -> CliResult<Vec<u8>> {
    let m = msg_from_json(kind, o)?;
    let mut buf = vec![0u8; m.buffer_len()];
    m.emit(&mut buf)?;
    Ok(buf)
}

fn command_name(op: DlOp) -> &'static str {
    match op {
        DlOp::Ack => "Ack",
        DlOp::ReplayRequest => "ReplayRequest",
        DlOp::Payload => "Payload",
        DlOp::ReplayStart => "ReplayStart",
        DlOp::Other(_) => "Other",
    }
}

/// `dl_command_flit`: a whole 640 B command flit (Ack / Replay Request, zero payload).
pub fn decode_command_flit(b: &[u8]) -> CliResult<Obj> {
    exact(
        "dl_command_flit",
        b,
        podlink_protocol::wire::dl_flit::FLIT_LEN,
    )?;
    let flit = DlFlit::new_checked(b)?;
    let repr = DlFlitRepr::parse(&flit, DlCrc::default())?;
    let DlFlitHeader::Command(h) = repr.header else {
        return Err(CliError::Field {
            field: "op".into(),
            why: "not a command flit (op must be Ack or ReplayRequest)".into(),
        });
    };
    let mut o = struct_to_json(&h);
    o.insert(
        "command".into(),
        Value::from(command_name(DlOp::from_raw(h.op))),
    );
    o.insert("crc".into(), Value::from(flit.crc()));
    Ok(o)
}

/// Encode a command flit from `op` (or `command`), `ack_req_seq`, `flit_seq_lo`.
pub fn encode_command_flit(o: &Obj) -> CliResult<Vec<u8>> {
    check_keys(
        o,
        &[&[
            "op",
            "command",
            "payload",
            "ack_req_seq",
            "flit_seq_lo",
            "flit_seq_lo_in",
            "crc",
        ]],
    )?;
    let op = match (o.get("op"), o.get("command")) {
        (Some(v), _) => DlOp::from_raw(u8::from_json(v, "op")?),
        (None, Some(Value::String(s))) if s == "Ack" => DlOp::Ack,
        (None, Some(Value::String(s))) if s == "ReplayRequest" => DlOp::ReplayRequest,
        _ => {
            return Err(CliError::Field {
                field: "op".into(),
                why: "give op (2 or 3) or command (Ack, ReplayRequest)".into(),
            })
        }
    };
    if !op.is_command() {
        return Err(CliError::Field {
            field: "op".into(),
            why: "a command flit's op is 2 (Ack) or 3 (ReplayRequest)".into(),
        });
    }
    let seq = o
        .get("ack_req_seq")
        .map(|v| u16::from_json(v, "ack_req_seq"))
        .transpose()?
        .unwrap_or(0);
    let lo = o
        .get("flit_seq_lo")
        .map(|v| u8::from_json(v, "flit_seq_lo"))
        .transpose()?
        .unwrap_or(0);
    let mut buf = vec![0u8; podlink_protocol::wire::dl_flit::FLIT_LEN];
    DlFlitRepr::command(op, seq, lo).emit_zero_payload(&mut buf, DlCrc::default())?;
    Ok(buf)
}

struct Src {
    flits: VecDeque<[u8; 64]>,
    msgs: VecDeque<DlMessage>,
}

impl PackSource for Src {
    fn next_tl_flit(&mut self, out: &mut [u8; 64]) -> bool {
        match self.flits.pop_front() {
            Some(f) => {
                *out = f;
                true
            }
            None => false,
        }
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
    flits: Vec<Value>,
    msgs: Vec<Value>,
}

impl UnpackSink for Sink {
    fn tl_flit(&mut self, f: &[u8; 64]) {
        self.flits.push(Value::from(to_hex(f)));
    }
    fn message(&mut self, m: DlMessage) {
        let (k, mut o) = msg_to_json(&m);
        o.insert("kind".into(), Value::from(k));
        self.msgs.push(Value::Object(o));
    }
}

/// Most DL flits one `dl_flit` item may hold.
const MAX_DL_FLITS: usize = 64;

fn hex_flits(o: &Obj, key: &str, max: usize) -> CliResult<Vec<[u8; 64]>> {
    let arr = match o.get(key) {
        None => return Ok(Vec::new()),
        Some(Value::Array(a)) => a,
        Some(_) => {
            return Err(CliError::Field {
                field: key.into(),
                why: "an array of 64-byte hex strings".into(),
            })
        }
    };
    if arr.len() > max {
        return Err(CliError::Field {
            field: key.into(),
            why: format!("more than {max} TL flits"),
        });
    }
    arr.iter()
        .map(|v| {
            let s = v.as_str().ok_or_else(|| CliError::Field {
                field: key.into(),
                why: "not a string".into(),
            })?;
            let b = parse_hex(s)?;
            <[u8; 64]>::try_from(b.as_slice()).map_err(|_| CliError::Field {
                field: key.into(),
                why: format!("a TL flit is 64 bytes, got {}", b.len()),
            })
        })
        .collect()
}

/// `dl_flit`: one or more 640 B payload DL flits (a stream). Decoding checks each CRC and
/// header and unpacks the TL flits (straddling allowed) and DL messages.
pub fn decode_dl_flits(b: &[u8]) -> CliResult<Obj> {
    let n = podlink_protocol::wire::dl_flit::FLIT_LEN;
    if b.is_empty() || b.len() % n != 0 || b.len() / n > MAX_DL_FLITS {
        return Err(CliError::Field {
            field: "length".into(),
            why: format!(
                "{} bytes: a dl_flit item is 1..={MAX_DL_FLITS} flits of {n} bytes",
                b.len()
            ),
        });
    }
    let mut un = DlUnpacker::new();
    let mut sink = Sink::default();
    let mut headers = Vec::new();
    for chunk in b.chunks(n) {
        let flit = DlFlit::new_checked(chunk)?;
        let repr = DlFlitRepr::parse(&flit, DlCrc::default())?;
        let mut h = Obj::new();
        match repr.header {
            DlFlitHeader::Explicit(e) => {
                h = struct_to_json(&e);
            }
            DlFlitHeader::Command(c) => {
                h.extend(struct_to_json(&c));
            }
        }
        h.insert("crc".into(), Value::from(flit.crc()));
        headers.push(Value::Object(h));
        if repr.header.payload() {
            un.unpack(&flit, &mut sink).map_err(|e| CliError::Field {
                field: format!("segment {}", e.segment),
                why: e.error.to_string(),
            })?;
        }
    }
    let mut o = Obj::new();
    o.insert("flits".into(), Value::Array(headers));
    o.insert("tl_flits".into(), Value::Array(sink.flits));
    o.insert("messages".into(), Value::Array(sink.msgs));
    o.insert(
        "partial_tl_bytes".into(),
        Value::from(un.partial_len() as u64),
    );
    Ok(o)
}

/// Encode `{"seq": first sequence number, "tl_flits": [hex...], "messages": [{kind,...}]}` into
/// as many DL flits as it takes (the last one padded with NOP TL flits).
pub fn encode_dl_flits(o: &Obj) -> CliResult<Vec<u8>> {
    check_keys(o, &[&["seq", "tl_flits", "messages"]])?;
    let flits = hex_flits(o, "tl_flits", 9 * MAX_DL_FLITS / 2)?;
    let mut msgs = VecDeque::new();
    if let Some(v) = o.get("messages") {
        let a = v.as_array().ok_or_else(|| CliError::Field {
            field: "messages".into(),
            why: "an array".into(),
        })?;
        if a.len() > 64 {
            return Err(CliError::Field {
                field: "messages".into(),
                why: "more than 64 messages".into(),
            });
        }
        for m in a {
            let mo = m.as_object().ok_or_else(|| CliError::Field {
                field: "messages".into(),
                why: "each message is an object".into(),
            })?;
            let kind = mo
                .get("kind")
                .and_then(Value::as_str)
                .ok_or_else(|| CliError::Field {
                    field: "messages.kind".into(),
                    why: "missing".into(),
                })?;
            msgs.push_back(msg_from_json(kind, mo)?);
        }
    }
    let mut seq = o
        .get("seq")
        .map(|v| u16::from_json(v, "seq"))
        .transpose()?
        .unwrap_or(1);
    if !(1..=511).contains(&seq) {
        return Err(CliError::Field {
            field: "seq".into(),
            why: format!("{seq}: 1..=511"),
        });
    }
    let mut src = Src {
        flits: flits.into(),
        msgs,
    };
    let mut packer = DlPacker::new();
    let mut out = Vec::new();
    let n = podlink_protocol::wire::dl_flit::FLIT_LEN;
    while out.is_empty()
        || !src.flits.is_empty()
        || !src.msgs.is_empty()
        || packer.carrying_tl_flit()
    {
        if out.len() / n >= MAX_DL_FLITS {
            return Err(CliError::Field {
                field: "tl_flits".into(),
                why: "does not fit the item limit".into(),
            });
        }
        let start = out.len();
        out.resize(start + n, 0);
        let h = DlFlitHeader::Explicit(DlExplicitHeader {
            op: 0,
            payload: true,
            flit_seq_no: seq,
        });
        let slot = out.get_mut(start..).unwrap_or_default();
        packer.pack_flit(&mut src, &h, DlCrc::default(), slot)?;
        seq = if seq == 511 { 1 } else { seq + 1 };
    }
    Ok(out)
}

/// `eth_frame`: a podlink Ethernet-profile frame (MACs per podlink's scheme).
pub fn decode_eth(b: &[u8]) -> CliResult<Obj> {
    let frame = EthFrame::new_checked(b)?;
    let repr = EthFrameRepr::parse(&frame)?;
    exact("eth_frame", b, repr.buffer_len())?;
    let mut o = Obj::new();
    let scheme = EthMacScheme::DEFAULT;
    o.insert("dst_mac".into(), Value::from(repr.dst_addr.to_string()));
    o.insert("src_mac".into(), Value::from(repr.src_addr.to_string()));
    if let Some(d) = repr.dst_accel(&scheme) {
        o.insert("dst".into(), d.to_json());
    }
    let r = repr.rel;
    o.insert(
        "op".into(),
        Value::from(match r.op {
            EthRelOp::Data => "data",
            EthRelOp::Ack => "ack",
            EthRelOp::Nack => "nack",
        }),
    );
    o.insert("vc".into(), r.vc.to_json());
    o.insert("src".into(), r.src.to_json());
    o.insert("partition".into(), r.partition.to_json());
    o.insert("psn".into(), r.psn.to_json());
    o.insert("ack_psn".into(), r.ack_psn.to_json());
    o.insert(
        "tl_flits".into(),
        Value::Array(repr.flits.iter().map(|f| Value::from(to_hex(f))).collect()),
    );
    o.insert("fcs".into(), Value::from(frame.fcs()));
    Ok(o)
}

/// Encode an Ethernet-profile frame from `{dst, src, op, vc, partition, psn, ack_psn, tl_flits}`.
pub fn encode_eth(o: &Obj) -> CliResult<Vec<u8>> {
    check_keys(
        o,
        &[&[
            "dst",
            "src",
            "op",
            "vc",
            "partition",
            "psn",
            "ack_psn",
            "tl_flits",
            "dst_mac",
            "src_mac",
            "fcs",
        ]],
    )?;
    let get = |k: &str| {
        o.get(k).ok_or_else(|| CliError::Field {
            field: k.into(),
            why: "missing".into(),
        })
    };
    let dst = AccelId::from_json(get("dst")?, "dst")?;
    let op = match o.get("op").and_then(Value::as_str).unwrap_or("data") {
        "data" => EthRelOp::Data,
        "ack" => EthRelOp::Ack,
        "nack" => EthRelOp::Nack,
        other => {
            return Err(CliError::Field {
                field: "op".into(),
                why: format!("`{other}`: data, ack or nack"),
            })
        }
    };
    let rel = EthRelHeader {
        op,
        vc: o
            .get("vc")
            .map(|v| JsonField::from_json(v, "vc"))
            .transpose()?
            .unwrap_or_default(),
        src: AccelId::from_json(get("src")?, "src")?,
        partition: o
            .get("partition")
            .map(|v| JsonField::from_json(v, "partition"))
            .transpose()?
            .unwrap_or_default(),
        psn: o
            .get("psn")
            .map(|v| JsonField::from_json(v, "psn"))
            .transpose()?
            .unwrap_or_default(),
        ack_psn: o
            .get("ack_psn")
            .map(|v| JsonField::from_json(v, "ack_psn"))
            .transpose()?
            .unwrap_or_default(),
    };
    let flits = hex_flits(o, "tl_flits", eth::MAX_FLITS)?;
    let repr = EthFrameRepr::new(&EthMacScheme::DEFAULT, dst, rel, &flits);
    let mut buf = vec![0u8; repr.buffer_len()];
    repr.emit(&mut buf)?;
    Ok(buf)
}
