//! The `tl_flit` kind: TL items (requests and responses with their data, credit returns, TL
//! messages) packed into 64 B TL flits, and TL flits unpacked back into items.

use super::json::{parse_hex, to_hex, CliError, CliResult, JsonField};
use super::kinds::{tl_field_from_json, tl_field_to_json};
use podlink_protocol::wire::tl_flit::BYTE_ENABLE_LEN;
use podlink_protocol::wire::{
    Tag, TlFlowControl, TlItem, TlMessage, TlPacker, TlTransfer, TlUnpacker,
};
use serde_json::{Map, Value};

type Obj = Map<String, Value>;

/// Most TL flits one item may hold (a bound on input and output).
const MAX_TL_FLITS: usize = 1024;

fn item_to_json(item: &TlItem<'_>) -> Obj {
    let mut o = Obj::new();
    match item {
        TlItem::Transfer(t) => {
            let (kind, mut f) = tl_field_to_json(&t.field);
            f.insert("kind".into(), Value::from(kind));
            if !t.data.is_empty() {
                f.insert("data".into(), Value::from(to_hex(t.data)));
            }
            if let Some(be) = t.byte_enables {
                f.insert("byte_enables".into(), Value::from(to_hex(be)));
            }
            if t.poisoned != 0 {
                f.insert("poisoned".into(), Value::from(t.poisoned));
            }
            return f;
        }
        TlItem::Credits(fc) => {
            let (_, f) = tl_field_to_json(&podlink_protocol::wire::TlField::FlowControl(*fc));
            o = f;
            o.insert("kind".into(), Value::from("credits"));
        }
        TlItem::Message(m) => {
            o.insert("kind".into(), Value::from("message"));
            o.insert("message".into(), Value::from(m.name()));
            if let TlMessage::PoisonedData { tag, beats } = m {
                o.insert("tag".into(), tag.to_json());
                o.insert("beats".into(), Value::from(*beats));
            }
            if let TlMessage::CreditTarget { target } = m {
                o.insert("target".into(), Value::from(*target));
            }
        }
    }
    o
}

/// Decode one or more TL flits into `{"items": [...], "in_transfer": bool}`.
pub fn decode(b: &[u8]) -> CliResult<Obj> {
    if b.is_empty() || b.len() % 64 != 0 || b.len() / 64 > MAX_TL_FLITS {
        return Err(CliError::Field {
            field: "length".into(),
            why: format!(
                "{} bytes: a tl_flit item is 1..={MAX_TL_FLITS} flits of 64 bytes",
                b.len()
            ),
        });
    }
    let mut un = TlUnpacker::new();
    let mut items = Vec::new();
    for chunk in b.chunks_exact(64) {
        let flit: &[u8; 64] = chunk
            .try_into()
            .map_err(|_| CliError::BadHex("flit".into()))?;
        un.unpack_flit(flit, |it| items.push(Value::Object(item_to_json(&it))))?;
    }
    let mut o = Obj::new();
    o.insert("items".into(), Value::Array(items));
    o.insert("in_transfer".into(), Value::Bool(un.in_transfer()));
    Ok(o)
}

/// Owned form of a transfer's buffers, so items can borrow them.
struct Owned {
    data: Vec<u8>,
    be: Option<[u8; BYTE_ENABLE_LEN]>,
}

/// Encode `{"items": [...]}` (the shape `decode` prints) into TL flits.
pub fn encode(o: &Obj) -> CliResult<Vec<u8>> {
    super::json::check_keys(o, &[&["items", "in_transfer"]])?;
    let items = o
        .get("items")
        .and_then(Value::as_array)
        .ok_or_else(|| CliError::Field {
            field: "items".into(),
            why: "an array of items is required".into(),
        })?;
    if items.len() > MAX_TL_FLITS {
        return Err(CliError::Field {
            field: "items".into(),
            why: format!("more than {MAX_TL_FLITS} items"),
        });
    }
    let mut packer: TlPacker = TlPacker::new();
    let mut out = Vec::new();
    let drain = |p: &mut TlPacker, out: &mut Vec<u8>| -> CliResult<()> {
        let mut f = [0u8; 64];
        while p.poll_flit(&mut f).is_some() {
            if out.len() / 64 >= MAX_TL_FLITS {
                return Err(CliError::Field {
                    field: "items".into(),
                    why: "too many flits".into(),
                });
            }
            out.extend_from_slice(&f);
        }
        Ok(())
    };
    for (i, v) in items.iter().enumerate() {
        let m = v.as_object().ok_or_else(|| CliError::Field {
            field: format!("items.{i}"),
            why: "not an object".into(),
        })?;
        let kind = m.get("kind").and_then(Value::as_str).unwrap_or("");
        let err = |why: String| CliError::Field {
            field: format!("items.{i}"),
            why,
        };
        let mut fields = m.clone();
        fields.remove("kind");
        let owned;
        let item = match kind {
            "credits" => {
                let f = tl_field_from_json("tl_flow_control_nop", &fields)?;
                match f {
                    podlink_protocol::wire::TlField::FlowControl(fc) => TlItem::Credits(fc),
                    _ => TlItem::Credits(TlFlowControl::default()),
                }
            }
            "message" => {
                let name = m.get("message").and_then(Value::as_str).unwrap_or("");
                TlItem::Message(match name {
                    "tl_msg_nop" => TlMessage::Nop,
                    "tl_msg_initial_credit_release_complete" => TlMessage::InitialCreditReleaseComplete,
                    "tl_msg_poisoned_data" => TlMessage::PoisonedData {
                        tag: m.get("tag").map(|t| Tag::from_json(t, "tag")).transpose()?.unwrap_or_default(),
                        beats: m.get("beats").map(|t| u8::from_json(t, "beats")).transpose()?.unwrap_or(1),
                    },
                    "tl_msg_credit_target" => TlMessage::CreditTarget {
                        target: m.get("target").map(|t| u8::from_json(t, "target")).transpose()?.unwrap_or(0),
                    },
                    other => return Err(err(format!("message `{other}`: tl_msg_nop, tl_msg_initial_credit_release_complete, tl_msg_poisoned_data, tl_msg_credit_target"))),
                })
            }
            k => {
                let data = match fields.remove("data") {
                    Some(Value::String(h)) => parse_hex(&h)?,
                    None => Vec::new(),
                    Some(_) => return Err(err("data must be a hex string".into())),
                };
                let be = match fields.remove("byte_enables") {
                    Some(Value::String(h)) => Some(
                        <[u8; BYTE_ENABLE_LEN]>::try_from(parse_hex(&h)?.as_slice())
                            .map_err(|_| err("byte_enables must be 32 bytes".into()))?,
                    ),
                    None => None,
                    Some(_) => return Err(err("byte_enables must be a hex string".into())),
                };
                let poisoned = fields
                    .remove("poisoned")
                    .map(|p| u8::from_json(&p, "poisoned"))
                    .transpose()?
                    .unwrap_or(0);
                let field = tl_field_from_json(k, &fields)?;
                owned = Owned { data, be };
                let mut t = TlTransfer::new(field, &owned.data);
                t.byte_enables = owned.be.as_ref();
                t.poisoned = poisoned;
                TlItem::Transfer(t)
            }
        };
        loop {
            match packer.push(&item) {
                Ok(()) => break,
                Err(podlink_protocol::wire::TlPushError::Full) => drain(&mut packer, &mut out)?,
                Err(podlink_protocol::wire::TlPushError::Invalid(e)) => {
                    return Err(err(e.to_string()))
                }
            }
        }
    }
    drain(&mut packer, &mut out)?;
    if out.is_empty() {
        out.resize(64, 0);
    }
    Ok(out)
}
