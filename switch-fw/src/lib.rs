//! # podlink-switch
//!
//! The reference switch of a podlink pod: a `no_std`, heap-free library that routes TL
//! frames by destination accelerator ID, plus firmware for a RISC-V soft core
//! (`src/bin/qemu.rs`). The simulator's switch model and the firmware run the same code.
//!
//! The switch keeps no request state. Its pipeline per frame (`spec-notes/switch.md`):
//!
//! 1. [`header`]: the switch's view of a TL control field ([`Header`]), taken from the
//!    protocol crate's `wire::TlField`.
//! 2. [`Switch::decide`]: route lookup ([`tables`]), isolation checks (spoofed source per
//!    ingress attachment, cross-partition), ordering pin, then adaptive choice by egress credit
//!    and queue depth or deterministic hashing.
//! 3. [`Switch::forward`]: cut-through when the egress VC is idle and has credit, else a
//!    bounded egress queue drained by per-VC and per-partition weighted round robin with an
//!    optional per-partition rate cap ([`qos`]), through [`Switch::poll_transmit`].
//! 4. Control plane: per-port [`health`] with hysteresis, two-bank tables swapped on
//!    [`Switch::commit`], binary [`config`] parsed with nom, counters and [`event`]s.
//! 5. Hardware through embedded-hal 1.0 and embedded-io traits only ([`hw`]).
//!
//! Ports are abstract ([`port::PortLink`]): link state, credits and health inputs come from
//! whatever drives the link. [`port::LinkPort`] is a port over the protocol crate's
//! UALink-profile link (bring-up, DL messages, replay) with the protocol's TL credit
//! accounting, and [`fabric`] moves frames between such ports and the switch;
//! [`port::SimPort`] is a bare stand-in for unit tests.
//!
//! ## Guarantees
//!
//! * No input (frame, configuration bytes, port readings) makes the library panic.
//! * Deterministic: time is an argument ([`podlink_protocol::time::Instant`]), no clock reads,
//!   no randomness.
//! * Bounded work per call and fixed memory (see the capacity constants below).
#![cfg_attr(not(test), no_std)]
#![forbid(unsafe_code)]
#![cfg_attr(
    not(test),
    deny(
        clippy::indexing_slicing,
        clippy::unwrap_used,
        clippy::expect_used,
        clippy::panic
    )
)]

pub mod config;
mod egress;
pub mod event;
pub mod fabric;
pub mod header;
pub mod health;
pub mod hw;
pub mod port;
pub mod qos;
pub mod selftest;
mod switch;
pub mod tables;

pub use self::event::{Counters, DropReason, Event};
pub use self::header::{FrameKind, Header};
pub use self::health::{Health, HealthPolicy};
pub use self::switch::{CommitError, Forwarded, Frame, Switch, Transmit};
pub use self::tables::{PortIndex, Tables};

/// Ports of the default instance, the firmware's (`Switch` = `Switch<MAX_PORTS, u8>`; port
/// numbers are `0..MAX_PORTS`). Other instances choose their capacity with the const
/// parameter `PORTS` and the port-number storage type ([`PortIndex`]: `u8` up to 255 ports,
/// `u16` up to [`WIDE_PORTS`]).
pub const MAX_PORTS: usize = 64;
/// Most ports of an instance whose tables store port numbers as `u16`.
pub const WIDE_PORTS: usize = 4096;
/// Number of accelerator IDs in a pod (10-bit IDs).
pub const MAX_IDS: usize = 1024;
/// Most egress ports one destination can be routed over (planes or parallel links).
pub const MAX_WAYS: usize = 8;
/// Most partitions one switch knows.
pub const MAX_PARTITIONS: usize = 16;
/// Virtual channels.
pub const NUM_VCS: usize = 4;
/// Buckets in the in-flight flow table (a power of two).
pub const FLOW_BUCKETS: usize = 4096;
/// Frame descriptors the egress queues hold in total.
pub const QUEUE_SLOTS: usize = 1024;
/// Descriptors only responses may take: requests hold at most `QUEUE_SLOTS -
/// RESPONSE_RESERVE`. Responses always drain (a requester sinks every response), so with
/// this reserve, and requests and responses in separate egress FIFOs, a switch full of
/// requests can still take the responses that let those requests' completers go on: no
/// request/response deadlock (`spec-notes/switch.md#buffers-and-deadlock`).
pub const RESPONSE_RESERVE: usize = QUEUE_SLOTS / 4;
/// Of the requests' share, descriptors that requests leaving the switch's own accelerators
/// for another switch (up toward a spine) may not take: they are kept for requests bound
/// for an accelerator attached here, which always drain. Without it a leaf full of requests
/// going up and a spine full of requests coming down wait for each other for good
/// (`spec-notes/switch.md#buffers-and-deadlock`).
pub const UPLINK_RESERVE: usize = QUEUE_SLOTS / 16;
/// Of the responses' reserve, descriptors that responses going up may not take: a response
/// going up is queued only while fewer than `RESPONSE_RESERVE - UPLINK_RESPONSE_RESERVE`
/// responses are, so a switch whose descriptors are all taken holds at least this many
/// responses bound for its own accelerators, which always drain (requesters sink them);
/// the responses coming down from a spine get in as they leave.
pub const UPLINK_RESPONSE_RESERVE: usize = RESPONSE_RESERVE / 4;
/// Events buffered before the oldest are counted as lost.
pub const EVENT_QUEUE: usize = 32;
