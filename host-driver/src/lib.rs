//! # podlink-host
//!
//! The accelerator side of podlink: the driver API applications use (built on the protocol
//! crate's state machines) and the `podlink` command-line tool.
//!
//! The [`cli`] module holds the tool's codec registry: every wire format podlink speaks, by the
//! kind names of the reference vectors, with JSON field conversion.

pub mod cli;
