//! The `podlink` tool's codec registry: decode bytes of a KIND to a JSON object of fields,
//! encode a JSON object of fields to bytes. Kind and field names are those of the reference
//! vectors (`spec-notes/vectors/`), plus podlink's own kinds for whole flits and frames.

mod dl_kinds;
pub mod json;
mod kinds;
mod tl_kinds;

pub use self::json::{parse_hex, parse_object, to_hex, CliError, CliResult};
pub use self::kinds::{Kind, KINDS};

use serde_json::{Map, Value};

/// Decode `bytes` as `kind`; returns the JSON object of its fields.
///
/// # Errors
/// Unknown kind, wire errors, or trailing bytes after a fixed-size item.
pub fn decode(kind: &str, bytes: &[u8]) -> CliResult<Map<String, Value>> {
    (find(kind)?.decode)(bytes)
}

/// Encode a JSON object of fields as `kind`.
///
/// # Errors
/// Unknown kind, unknown or out-of-range fields, or wire errors.
pub fn encode(kind: &str, fields: &Map<String, Value>) -> CliResult<Vec<u8>> {
    (find(kind)?.encode)(fields)
}

fn find(kind: &str) -> CliResult<&'static Kind> {
    KINDS
        .iter()
        .find(|k| k.name == kind)
        .ok_or_else(|| CliError::UnknownKind(kind.to_string()))
}
