//! # podlink-protocol
//!
//! The protocol core of podlink, a UALink-style scale-up accelerator interconnect.
//! It is `no_std`, never allocates, never reads a clock and contains no `unsafe`.
//!
//! Layers, bottom up (each one a module):
//!
//! * [`wire`]: bit-exact codecs. Transaction-layer (TL) control fields and 64 B TL flits,
//!   the address-compression cache, 640 B data-link (DL) flits with their headers, segment
//!   headers, DL messages and CRC, a streaming DL packer/unpacker in which TL flits straddle
//!   segments and DL flits, and the Ethernet profile frame (EtherType 0x88B5).
//! * [`phy`]: a seeded fault injector and a delay-line wire, for tests, simulation and bring-up.
//! * [`retry`]: DL link-level retry and link bring-up (`LinkRetry`).
//! * [`flow`]: TL credits and the Ethernet profile's CBFC.
//! * [`link`]: the composed link per profile (`UaLink`, `EthLink`) and DL control messages.
//! * [`txn`]: memory transactions — requester, completer, atomics, partitions — and the
//!   `Endpoint` that composes them with TL packing, TL credits and a `UaLink` per port.
//! * [`testing`]: a two-endpoint harness in virtual time (`LinkPair`) and checking endpoints.
//!
//! ## Guarantees
//!
//! * No input makes a parser panic; every parser returns a typed [`wire::Error`].
//! * Emitters write into caller-owned buffers and report a too-small buffer as an error.
//! * Deterministic: no clock, no randomness, no global state.
//!
//! The protocol as podlink implements it is described in `spec-notes/` at the repository root.
#![cfg_attr(not(any(test, feature = "std")), no_std)]
#![cfg_attr(
    not(test),
    deny(
        clippy::indexing_slicing,
        clippy::unwrap_used,
        clippy::expect_used,
        clippy::panic
    )
)]

pub mod flow;
pub mod link;
pub mod phy;
pub mod retry;
pub mod testing;
pub mod time;
mod timer;
pub mod txn;
pub mod wire;
