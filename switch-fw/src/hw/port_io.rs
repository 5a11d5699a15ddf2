//! Per-port GPIO: the module reset line and the port LED.
//!
//! LED: on when the link is up and healthy, blinking (follow `phase`) when degraded, off when
//! failed or down.

use crate::health::Health;
use embedded_hal::delay::DelayNs;
use embedded_hal::digital::OutputPin;

/// Reset pulse width in microseconds.
pub const RESET_PULSE_US: u32 = 10;
/// Time the module needs after reset before it answers on I2C, in milliseconds.
pub const RESET_SETTLE_MS: u32 = 2;

/// The GPIO of one port (active-low reset, active-high LED).
pub struct PortIo<P> {
    reset: P,
    led: P,
}

impl<P: OutputPin> PortIo<P> {
    /// Take the pins.
    pub fn new(reset: P, led: P) -> Self {
        PortIo { reset, led }
    }

    /// Give the pins back.
    pub fn release(self) -> (P, P) {
        (self.reset, self.led)
    }

    /// Pulse the module's reset line low, then wait for it to settle.
    ///
    /// # Errors
    /// The pin error.
    pub fn reset(&mut self, delay: &mut impl DelayNs) -> Result<(), P::Error> {
        self.reset.set_low()?;
        delay.delay_us(RESET_PULSE_US);
        self.reset.set_high()?;
        delay.delay_ms(RESET_SETTLE_MS);
        Ok(())
    }

    /// Show the port's state on its LED; `phase` is the blink phase.
    ///
    /// # Errors
    /// The pin error.
    pub fn show(&mut self, up: bool, health: Health, phase: bool) -> Result<(), P::Error> {
        let on = match health {
            Health::Healthy => up,
            Health::Degraded => up && phase,
            Health::Failed => false,
        };
        if on {
            self.led.set_high()
        } else {
            self.led.set_low()
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use embedded_hal_mock::eh1::delay::{CheckedDelay, Transaction as D};
    use embedded_hal_mock::eh1::digital::{Mock, State, Transaction as T};

    #[test]
    fn test_reset_pulse() {
        let mut reset = Mock::new(&[T::set(State::Low), T::set(State::High)]);
        let mut led = Mock::new(&[]);
        let mut delay =
            CheckedDelay::new(&[D::delay_us(RESET_PULSE_US), D::delay_ms(RESET_SETTLE_MS)]);
        let mut io = PortIo::new(reset.clone(), led.clone());
        io.reset(&mut delay).unwrap();
        reset.done();
        led.done();
        delay.done();
    }

    #[test]
    fn test_led_states() {
        let mut reset = Mock::new(&[]);
        let mut led = Mock::new(&[
            T::set(State::High),
            T::set(State::Low),
            T::set(State::High),
            T::set(State::Low),
            T::set(State::Low),
        ]);
        let mut io = PortIo::new(reset.clone(), led.clone());
        io.show(true, Health::Healthy, false).unwrap();
        io.show(false, Health::Healthy, true).unwrap();
        io.show(true, Health::Degraded, true).unwrap();
        io.show(true, Health::Degraded, false).unwrap();
        io.show(true, Health::Failed, true).unwrap();
        let (_r, _l) = io.release();
        reset.done();
        led.done();
    }
}
