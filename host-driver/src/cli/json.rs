//! JSON ⇄ field conversion for the `podlink` tool.

use podlink_protocol::wire::{AccelId, Opcode, PartitionId, Psn, Tag, Vc};
use serde_json::{Map, Value};

/// A decode/encode error: a one-line message for stderr.
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum CliError {
    /// The kind is not one podlink knows.
    #[error("unknown kind `{0}` (try `podlink kinds`)")]
    UnknownKind(String),
    /// Hex input is malformed.
    #[error("bad hex: {0}")]
    BadHex(String),
    /// JSON input is malformed.
    #[error("bad JSON: {0}")]
    BadJson(String),
    /// A JSON field is missing, unknown, of the wrong type or out of range.
    #[error("field `{field}`: {why}")]
    Field {
        /// The field name.
        field: String,
        /// What is wrong.
        why: String,
    },
    /// The wire codec refused the input.
    #[error("{0}")]
    Wire(#[from] podlink_protocol::wire::Error),
    /// Extra bytes after a fixed-size item.
    #[error("trailing bytes: {kind} is {expected} bytes, input has {got}")]
    Trailing {
        /// The kind.
        kind: String,
        /// Its encoded length.
        expected: usize,
        /// The input's length.
        got: usize,
    },
}

/// Result of the tool's codec functions.
pub type CliResult<T> = Result<T, CliError>;

fn field_err(field: &str, why: impl Into<String>) -> CliError {
    CliError::Field {
        field: field.to_string(),
        why: why.into(),
    }
}

/// A value that converts to and from a JSON field.
pub trait JsonField: Sized {
    /// To JSON.
    fn to_json(&self) -> Value;
    /// From JSON; `name` is the field name for errors.
    fn from_json(v: &Value, name: &str) -> CliResult<Self>;
}

/// A JSON unsigned integer.
pub fn json_u64(v: &Value, name: &str) -> CliResult<u64> {
    match v {
        Value::Number(n) => n
            .as_u64()
            .ok_or_else(|| field_err(name, format!("{n} is not an unsigned integer"))),
        Value::Bool(b) => Ok(u64::from(*b)),
        other => Err(field_err(name, format!("expected a number, got {other}"))),
    }
}

macro_rules! int_json {
    ($($t:ty),*) => {$(
        impl JsonField for $t {
            fn to_json(&self) -> Value { Value::from(*self) }
            fn from_json(v: &Value, name: &str) -> CliResult<Self> {
                let n = json_u64(v, name)?;
                <$t>::try_from(n).map_err(|_| field_err(name, format!("{n} does not fit in {}", stringify!($t))))
            }
        }
    )*};
}
int_json!(u8, u16, u32, u64);

impl JsonField for bool {
    fn to_json(&self) -> Value {
        Value::from(u8::from(*self))
    }
    fn from_json(v: &Value, name: &str) -> CliResult<Self> {
        match json_u64(v, name)? {
            0 => Ok(false),
            1 => Ok(true),
            n => Err(field_err(name, format!("{n} is not 0 or 1"))),
        }
    }
}

macro_rules! id_json {
    ($($t:ident),*) => {$(
        impl JsonField for $t {
            fn to_json(&self) -> Value { Value::from(self.get()) }
            fn from_json(v: &Value, name: &str) -> CliResult<Self> {
                let n = json_u64(v, name)?;
                u16::try_from(n).ok().and_then(|x| x.try_into().ok()).and_then($t::new)
                    .ok_or_else(|| field_err(name, format!("{n} exceeds {} bits", $t::BITS)))
            }
        }
    )*};
}
id_json!(AccelId, Tag, Vc, PartitionId);

impl JsonField for Psn {
    fn to_json(&self) -> Value {
        Value::from(self.0)
    }
    fn from_json(v: &Value, name: &str) -> CliResult<Self> {
        u16::from_json(v, name).map(Psn)
    }
}

impl JsonField for Opcode {
    fn to_json(&self) -> Value {
        Value::from(self.raw())
    }
    fn from_json(v: &Value, name: &str) -> CliResult<Self> {
        let n = u8::from_json(v, name)?;
        if n > 0x3f {
            return Err(field_err(name, format!("{n} exceeds 6 bits")));
        }
        Ok(Opcode::from_raw(n))
    }
}

/// A struct whose fields convert to and from a JSON object, with the vectors' names.
pub trait JsonStruct: Sized + Default {
    /// The field names.
    const FIELDS: &'static [&'static str];
    /// Write the fields into `m`.
    fn write_json(&self, m: &mut Map<String, Value>);
    /// Read the fields present in `m` (absent ones keep their default).
    fn read_json(&mut self, m: &Map<String, Value>) -> CliResult<()>;
}

/// Implement [`JsonStruct`] for a struct by listing its fields.
#[macro_export]
macro_rules! json_struct {
    ($ty:ty { $($f:ident),* $(,)? }) => {
        impl $crate::cli::json::JsonStruct for $ty {
            const FIELDS: &'static [&'static str] = &[$(stringify!($f)),*];
            fn write_json(&self, m: &mut serde_json::Map<String, serde_json::Value>) {
                use $crate::cli::json::JsonField;
                $( m.insert(stringify!($f).to_string(), self.$f.to_json()); )*
            }
            fn read_json(&mut self, m: &serde_json::Map<String, serde_json::Value>) -> $crate::cli::json::CliResult<()> {
                use $crate::cli::json::JsonField;
                $( if let Some(v) = m.get(stringify!($f)) {
                    self.$f = JsonField::from_json(v, stringify!($f))?;
                } )*
                Ok(())
            }
        }
    };
}

/// Implement [`JsonStruct`] with explicit JSON names (for fields such as `r#type`).
#[macro_export]
macro_rules! json_struct_named {
    ($ty:ty { $($f:ident = $n:literal),* $(,)? }) => {
        impl $crate::cli::json::JsonStruct for $ty {
            const FIELDS: &'static [&'static str] = &[$($n),*];
            fn write_json(&self, m: &mut serde_json::Map<String, serde_json::Value>) {
                use $crate::cli::json::JsonField;
                $( m.insert($n.to_string(), self.$f.to_json()); )*
            }
            fn read_json(&mut self, m: &serde_json::Map<String, serde_json::Value>) -> $crate::cli::json::CliResult<()> {
                use $crate::cli::json::JsonField;
                $( if let Some(v) = m.get($n) {
                    self.$f = JsonField::from_json(v, $n)?;
                } )*
                Ok(())
            }
        }
    };
}

/// Check that every key of `m` is one of `allowed`.
pub fn check_keys(m: &Map<String, Value>, allowed: &[&[&str]]) -> CliResult<()> {
    for k in m.keys() {
        if !allowed.iter().any(|set| set.contains(&k.as_str())) {
            return Err(field_err(k, "unknown field for this kind"));
        }
    }
    Ok(())
}

/// Read a struct from a JSON object, refusing unknown keys (`extra` lists other allowed keys).
pub fn struct_from_json<S: JsonStruct>(m: &Map<String, Value>, extra: &[&str]) -> CliResult<S> {
    check_keys(m, &[S::FIELDS, extra])?;
    let mut s = S::default();
    s.read_json(m)?;
    Ok(s)
}

/// A struct as a JSON object.
pub fn struct_to_json<S: JsonStruct>(s: &S) -> Map<String, Value> {
    let mut m = Map::new();
    s.write_json(&mut m);
    m
}

/// Parse lowercase or uppercase hex (whitespace and an optional `0x` ignored).
pub fn parse_hex(s: &str) -> CliResult<Vec<u8>> {
    let t: String = s.chars().filter(|c| !c.is_whitespace()).collect();
    let t = t.strip_prefix("0x").unwrap_or(&t);
    if t.len() % 2 != 0 {
        return Err(CliError::BadHex(format!(
            "odd number of digits ({})",
            t.len()
        )));
    }
    // Bound the input: the largest item is an Ethernet frame (< 5 KB) or a CRC input.
    if t.len() > 2 * 1024 * 1024 {
        return Err(CliError::BadHex("more than 1 MiB of bytes".into()));
    }
    (0..t.len())
        .step_by(2)
        .map(|i| {
            let pair = t.get(i..i + 2).unwrap_or("");
            u8::from_str_radix(pair, 16)
                .map_err(|_| CliError::BadHex(format!("`{pair}` at offset {i}")))
        })
        .collect()
}

/// Lowercase hex.
pub fn to_hex(b: &[u8]) -> String {
    use std::fmt::Write;
    let mut s = String::with_capacity(b.len() * 2);
    for x in b {
        let _ = write!(s, "{x:02x}");
    }
    s
}

/// Parse a JSON object.
pub fn parse_object(s: &str) -> CliResult<Map<String, Value>> {
    match serde_json::from_str::<Value>(s) {
        Ok(Value::Object(m)) => Ok(m),
        Ok(other) => Err(CliError::BadJson(format!(
            "expected an object, got {other}"
        ))),
        Err(e) => Err(CliError::BadJson(e.to_string())),
    }
}
