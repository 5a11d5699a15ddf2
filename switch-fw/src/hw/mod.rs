//! Hardware, through embedded-hal 1.0 and embedded-io traits only (`spec-notes/switch.md#hardware`).
//!
//! # For firmware authors
//! Board glue (PAC, pin muxing, the I2C peripheral) lives only in `src/bin/<board>.rs`; it
//! hands these drivers objects implementing [`embedded_hal::i2c::I2c`],
//! [`embedded_hal::digital::OutputPin`], [`embedded_hal::delay::DelayNs`] and
//! [`embedded_io::Write`].
//!
//! # For HAL implementers
//! Nothing beyond the embedded-hal 1.0 contracts is assumed: I2C write-then-read with a
//! repeated start, push-pull output pins, a blocking delay.

pub mod console;
pub mod port_io;
pub mod transceiver;
