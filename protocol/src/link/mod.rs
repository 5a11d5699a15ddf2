//! Composed link endpoints (`spec-notes/link.md#composed-link`): the machines the switch,
//! the host driver and the simulator all use unchanged.
//!
//! * [`UaLink`]: UALink profile. TL flits → DL stream packer → link-level retry → 640 B DL
//!   flits, and back; DL control messages ([`control`]) ride in the same flits.
//! * [`EthLink`]: Ethernet profile. TL flits for one {destination, VC} → one frame with a PSN
//!   → per-VC go-back-N link-level retry, with CBFC.

#![cfg_attr(not(test), deny(clippy::arithmetic_side_effects))]

pub mod control;
mod eth_tx;
mod ethernet;
mod ualink;

pub use self::ethernet::{EthEvent, EthLink, EthLinkConfig, EthStats, EthTimer};
pub use self::ualink::{TlSink, TxError, UaLink, UaLinkConfig, UaLinkEvent, UaLinkStats};
