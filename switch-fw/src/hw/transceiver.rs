//! Transceiver module driver over I2C, with a CMIS-like register map.
//!
//! | page | offset | size | content | unit |
//! |---|---|---|---|---|
//! | lower | 0 | 1 | identifier | SFF-8024 code |
//! | lower | 14 | 2 | module temperature | 1/256 °C, signed, big-endian |
//! | lower | 16 | 2 | supply voltage | 100 µV, big-endian |
//! | lower | 127 | 1 | page select | page number |
//! | 0x11 | 186 + 2·lane | 2 | rx optical power, lanes 0..8 | 0.1 µW, big-endian |
//! | 0x20 | 128 | 4 | module error counter (podlink's vendor page) | count, wrapping |
//!
//! The lower page and page 0x11 follow CMIS's layout; page 0x20 is podlink's own choice
//! (CMIS leaves error counters to vendor or VDM pages). After a read the driver selects the
//! lower page again.

use crate::health::TransceiverReading;
use embedded_hal::i2c::{self, I2c};

/// Usual 7-bit I2C address of a module's management interface.
pub const MODULE_ADDR: u8 = 0x50;
/// Register offsets and pages.
pub mod reg {
    /// Identifier (lower page).
    pub const IDENTIFIER: u8 = 0;
    /// Module temperature (lower page).
    pub const TEMPERATURE: u8 = 14;
    /// Supply voltage (lower page).
    pub const VCC: u8 = 16;
    /// Page select.
    pub const PAGE_SELECT: u8 = 127;
    /// Page with rx power monitors.
    pub const PAGE_LANE_MONITORS: u8 = 0x11;
    /// Rx power of lane 0 (then 2 bytes per lane).
    pub const RX_POWER_LANE0: u8 = 186;
    /// podlink's vendor page with the error counter.
    pub const PAGE_ERRORS: u8 = 0x20;
    /// Module error counter.
    pub const ERROR_COUNTER: u8 = 128;
}
/// Most lanes a module reports.
pub const MAX_LANES: u8 = 8;

/// Error of the transceiver driver.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum XcvrError<E> {
    /// The bus failed.
    I2c(E),
    /// The lane count given is 0 or above [`MAX_LANES`].
    BadLaneCount(u8),
}

impl<E: i2c::Error> XcvrError<E> {
    /// The embedded-hal error kind (`Other` for driver-level errors).
    pub fn kind(&self) -> i2c::ErrorKind {
        match self {
            XcvrError::I2c(e) => e.kind(),
            XcvrError::BadLaneCount(_) => i2c::ErrorKind::Other,
        }
    }
}

/// One transceiver module.
pub struct Transceiver<I> {
    i2c: I,
    addr: u8,
    lanes: u8,
}

impl<I: I2c> Transceiver<I> {
    /// A module at `addr` with `lanes` lanes.
    ///
    /// # Errors
    /// `BadLaneCount`.
    pub fn new(i2c: I, addr: u8, lanes: u8) -> Result<Self, XcvrError<I::Error>> {
        if lanes == 0 || lanes > MAX_LANES {
            return Err(XcvrError::BadLaneCount(lanes));
        }
        Ok(Transceiver { i2c, addr, lanes })
    }

    /// Give the bus back.
    pub fn release(self) -> I {
        self.i2c
    }

    /// The module's identifier byte.
    ///
    /// # Errors
    /// The bus error.
    pub fn identifier(&mut self) -> Result<u8, XcvrError<I::Error>> {
        let mut b = [0u8; 1];
        self.i2c
            .write_read(self.addr, &[reg::IDENTIFIER], &mut b)
            .map_err(XcvrError::I2c)?;
        let [id] = b;
        Ok(id)
    }

    fn select_page(&mut self, page: u8) -> Result<(), XcvrError<I::Error>> {
        self.i2c
            .write(self.addr, &[reg::PAGE_SELECT, page])
            .map_err(XcvrError::I2c)
    }

    /// Read temperature, voltage, the lowest lane rx power and the error counter.
    ///
    /// # Errors
    /// The bus error (the page select may then be left on another page; the next read sets
    /// it again).
    pub fn read(&mut self) -> Result<TransceiverReading, XcvrError<I::Error>> {
        let mut tv = [0u8; 4];
        self.i2c
            .write_read(self.addr, &[reg::TEMPERATURE], &mut tv)
            .map_err(XcvrError::I2c)?;
        self.select_page(reg::PAGE_LANE_MONITORS)?;
        let mut rx = [0u8; 2 * MAX_LANES as usize];
        let n = 2 * usize::from(self.lanes);
        let rx = rx.get_mut(..n).unwrap_or(&mut []);
        self.i2c
            .write_read(self.addr, &[reg::RX_POWER_LANE0], rx)
            .map_err(XcvrError::I2c)?;
        self.select_page(reg::PAGE_ERRORS)?;
        let mut err = [0u8; 4];
        self.i2c
            .write_read(self.addr, &[reg::ERROR_COUNTER], &mut err)
            .map_err(XcvrError::I2c)?;
        self.select_page(0)?;
        let rx_power_min_01uw = rx
            .chunks_exact(2)
            .filter_map(|c| c.try_into().ok().map(u16::from_be_bytes))
            .min()
            .unwrap_or(0);
        Ok(TransceiverReading {
            temp_c256: i16::from_be_bytes([tv[0], tv[1]]),
            vcc_100uv: u16::from_be_bytes([tv[2], tv[3]]),
            rx_power_min_01uw,
            errors: u32::from_be_bytes(err),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use embedded_hal::i2c::ErrorKind;
    use embedded_hal_mock::eh1::i2c::{Mock, Transaction as T};

    #[test]
    fn test_read_monitors() {
        let a = MODULE_ADDR;
        let expect = [
            T::write_read(a, vec![14], vec![0x28, 0x80, 0x80, 0xe8]), // 40.5 °C, 3.3 V
            T::write(a, vec![127, 0x11]),
            T::write_read(
                a,
                vec![186],
                vec![0x13, 0x88, 0x03, 0xe8, 0x27, 0x10, 0x13, 0x88],
            ),
            T::write(a, vec![127, 0x20]),
            T::write_read(a, vec![128], vec![0, 0, 1, 2]),
            T::write(a, vec![127, 0]),
        ];
        let mut i2c = Mock::new(&expect);
        let mut x = Transceiver::new(i2c.clone(), a, 4).unwrap();
        let r = x.read().unwrap();
        assert_eq!(
            r,
            TransceiverReading {
                temp_c256: 0x2880,
                vcc_100uv: 33_000,
                rx_power_min_01uw: 1000,
                errors: 258
            }
        );
        i2c.done();
    }

    #[test]
    fn test_identifier_and_errors() {
        let a = MODULE_ADDR;
        let expect = [
            T::write_read(a, vec![0], vec![0x18]),
            T::write_read(a, vec![14], vec![0, 0, 0, 0]).with_error(ErrorKind::Bus),
        ];
        let mut i2c = Mock::new(&expect);
        let mut x = Transceiver::new(i2c.clone(), a, 1).unwrap();
        assert_eq!(x.identifier().unwrap(), 0x18);
        let e = x.read().unwrap_err();
        assert_eq!(e.kind(), ErrorKind::Bus);
        i2c.done();
        assert!(matches!(
            Transceiver::new(i2c.clone(), a, 0),
            Err(XcvrError::BadLaneCount(0))
        ));
        assert!(matches!(
            Transceiver::new(i2c, a, 9),
            Err(XcvrError::BadLaneCount(9))
        ));
    }
}
