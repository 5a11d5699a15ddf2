//! Response status codes: the 4-bit `status` field of a TL response
//! (`spec-notes/transactions.md#status-codes`).
//!
//! One table, in the style of quinn's `errors!`: name, value, description. Values 0x6–0xF
//! are reserved; they stay visible through [`Status::raw`] and are treated as errors.

use core::fmt;

/// A 4-bit response status.
#[derive(Clone, Copy, PartialEq, Eq, Hash)]
pub struct Status(u8);

macro_rules! status_codes {
    {$($(#[$doc:meta])* $name:ident($val:literal) $desc:literal;)*} => {
        impl Status {
            $($(#[$doc])* pub const $name: Status = Status($val);)*

            /// Every defined status, in value order.
            pub const DEFINED: &'static [Status] = &[$(Status::$name),*];

            /// A one-line description (`"reserved"` for undefined values).
            pub const fn description(self) -> &'static str {
                match self.0 {
                    $($val => $desc,)*
                    _ => "reserved status",
                }
            }

            const fn name(self) -> Option<&'static str> {
                match self.0 {
                    $($val => Some(stringify!($name)),)*
                    _ => None,
                }
            }
        }
    }
}

status_codes! {
    /// The request was carried out.
    OK(0x0) "success";
    /// No memory is mapped at the address (nothing was changed).
    ADDRESS_NOT_MAPPED(0x1) "address not mapped";
    /// The completer does not support the operation, its size or shape (nothing was changed).
    UNSUPPORTED(0x2) "unsupported operation";
    /// The requester is in another partition (virtual pod); memory was not touched.
    PARTITION_DENIED(0x3) "partition denied";
    /// The memory target failed (the effect on memory is target-defined).
    TARGET_ERROR(0x4) "target error";
    /// The request's data, or the memory an atomic reads, was poisoned; nothing was written.
    POISONED(0x5) "data poisoned";
}

impl Status {
    /// The status of a raw value (only the low 4 bits are kept).
    pub const fn from_raw(v: u8) -> Status {
        Status(v & 0xf)
    }

    /// The raw 4-bit value.
    pub const fn raw(self) -> u8 {
        self.0
    }

    /// Success.
    pub const fn is_ok(self) -> bool {
        self.0 == 0
    }

    /// A value the table does not define.
    pub const fn is_reserved(self) -> bool {
        self.name().is_none()
    }
}

impl fmt::Debug for Status {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.name() {
            Some(n) => f.write_str(n),
            None => write!(f, "Status({:#x})", self.0),
        }
    }
}

impl fmt::Display for Status {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{} ({:#x})", self.description(), self.0)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn table() {
        assert_eq!(Status::DEFINED.len(), 6);
        for (i, s) in Status::DEFINED.iter().enumerate() {
            assert_eq!(usize::from(s.raw()), i);
            assert!(!s.is_reserved());
        }
        assert!(Status::OK.is_ok());
        assert!(!Status::PARTITION_DENIED.is_ok());
        assert_eq!(Status::from_raw(0x13), Status::from_raw(3));
        assert_eq!(Status::from_raw(0x13), Status::PARTITION_DENIED);
        assert!(Status::from_raw(9).is_reserved());
        assert_eq!(format!("{:?}", Status::UNSUPPORTED), "UNSUPPORTED");
        assert_eq!(format!("{:?}", Status::from_raw(9)), "Status(0x9)");
        assert_eq!(format!("{}", Status::from_raw(9)), "reserved status (0x9)");
        assert_eq!(format!("{}", Status::POISONED), "data poisoned (0x5)");
    }
}
