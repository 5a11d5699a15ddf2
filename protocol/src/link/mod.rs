//! Composed link endpoints (`spec-notes/link.md#composed-link`): the machines the switch,
//! the host driver and the simulator all use unchanged.
//!
//! * [`UaLink`]: UALink profile. TL flits → DL stream packer → link-level retry → 640 B DL
//!   flits, and back; DL control messages ([`control`]) ride in the same flits.

pub mod control;
mod ualink;

pub use self::ualink::{TlSink, TxError, UaLink, UaLinkConfig, UaLinkEvent, UaLinkStats};
