//! Router parameters and their validation.

use thiserror::Error;

/// The largest VC count a router supports (credits are 64-bit VC masks).
pub const MAX_VCS: usize = 64;

/// Which allocator matches requests (BookSim's allocator names).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum AllocatorKind {
    /// `separable_input_first` with round-robin arbiters, `alloc_iters` passes.
    SeparableInputFirst,
    /// `separable_output_first` with round-robin arbiters, one pass.
    SeparableOutputFirst,
    /// `islip` (BookSim's `iSLIP_Sparse`): `iters` request-grant-accept passes; priorities
    /// are ignored; pointers move only on a first-pass accept.
    Islip {
        /// Passes, at least 1.
        iters: usize,
    },
    /// `wavefront` (BookSim's `Wavefront`): one pass over the request matrix's diagonals,
    /// starting from a rotating one; with `skip_diags` (`rr_wavefront`) the next pass starts
    /// after the first diagonal that matched instead of after the last start.
    Wavefront {
        /// `rr_wavefront`.
        skip_diags: bool,
    },
    /// `max_size` (BookSim's `MaxSizeMatch`): a maximum matching by shortest augmenting
    /// paths from a rotating start.
    MaxSize,
    /// `loa` (BookSim's `LOA`, lonely output allocator).
    Loa,
    /// `pim` (BookSim's `PIM`, parallel iterative matching): `iters` passes in which every
    /// output grants a random requesting input and every input accepts a random grant,
    /// drawn from the simulation's shared generator.
    Pim {
        /// Passes, at least 1.
        iters: usize,
    },
    /// `select` (BookSim's `SelAlloc`, one pass): iSLIP whose grants and accepts go to the
    /// highest priority first, the round-robin pointers breaking ties.
    Select,
}

/// Parameters of an input-queued virtual-channel router (BookSim's `iq` router; the names are
/// BookSim's configuration keys).
#[derive(Clone, Debug, PartialEq)]
pub struct RouterConfig {
    /// Input ports.
    pub inputs: usize,
    /// Output ports.
    pub outputs: usize,
    /// VCs per port (`num_vcs`).
    pub vcs: usize,
    /// Flit slots per VC, private (`vc_buf_size`); also the size assumed for every downstream
    /// VC buffer when counting credits.
    pub vc_buf_size: usize,
    /// Keep an output VC allocated until the credit of its tail flit is back
    /// (`wait_for_tail_credit`).
    pub wait_for_tail_credit: bool,
    /// Route-computation stage, cycles; 0 selects lookahead routing (`routing_delay`).
    pub routing_delay: u32,
    /// VC-allocation stage, cycles, at least 1 (`vc_alloc_delay`).
    pub vc_alloc_delay: u32,
    /// Switch-allocation stage, cycles, at least 1 (`sw_alloc_delay`).
    pub sw_alloc_delay: u32,
    /// Switch-traversal preparation, cycles (`st_prepare_delay`).
    pub st_prepare_delay: u32,
    /// Crossbar traversal, cycles (`st_final_delay`); prepare + final must be at least 1.
    pub st_final_delay: u32,
    /// Extra cycles before a received credit is usable (`credit_delay`).
    pub credit_delay: u32,
    /// Crossbar inputs per input port (`input_speedup`).
    pub input_speedup: usize,
    /// Crossbar outputs per output port (`output_speedup`).
    pub output_speedup: usize,
    /// Internal steps per cycle, may be fractional (`internal_speedup`).
    pub internal_speedup: f64,
    /// Speculative switch allocation in parallel with VC allocation (`speculative`).
    pub speculative: bool,
    /// Speculative requests only for outputs with a free VC (`spec_check_elig`).
    pub spec_check_elig: bool,
    /// Speculative requests only for outputs with a free VC that has credit (`spec_check_cred`).
    pub spec_check_cred: bool,
    /// Iterations of the separable input-first allocators (`alloc_iters`). Iterations after the
    /// first match only still-unmatched inputs and outputs and leave the round-robin pointers
    /// alone (iSLIP's rule).
    pub alloc_iters: usize,
    /// The VC allocator (`vc_allocator`).
    pub vc_allocator: AllocatorKind,
    /// The switch allocator (`sw_allocator`).
    pub sw_allocator: AllocatorKind,
    /// Flits an output queue may hold before switch allocation stops granting it
    /// (`output_buffer_size`; `None` is unlimited, BookSim's -1).
    pub output_buffer_size: Option<usize>,
    /// Keep a switch connection for the rest of a packet once its head (or any flit with
    /// more of the packet buffered behind it) wins switch allocation: the packet's next flit
    /// crosses without competing, until the packet ends, the VC's buffer runs dry or the
    /// output VC has no credit (`hold_switch_for_packet`).
    pub hold_switch_for_packet: bool,
}

impl Default for RouterConfig {
    /// BookSim's defaults for a 5-port router with 16 VCs of 8 flits.
    fn default() -> Self {
        RouterConfig {
            inputs: 5,
            outputs: 5,
            vcs: 16,
            vc_buf_size: 8,
            wait_for_tail_credit: false,
            routing_delay: 1,
            vc_alloc_delay: 1,
            sw_alloc_delay: 1,
            st_prepare_delay: 0,
            st_final_delay: 1,
            credit_delay: 0,
            input_speedup: 1,
            output_speedup: 1,
            internal_speedup: 1.0,
            speculative: false,
            spec_check_elig: true,
            spec_check_cred: true,
            alloc_iters: 1,
            vc_allocator: AllocatorKind::SeparableInputFirst,
            sw_allocator: AllocatorKind::SeparableInputFirst,
            output_buffer_size: None,
            hold_switch_for_packet: false,
        }
    }
}

/// A router configuration that cannot be honoured.
#[derive(Clone, Debug, Error, PartialEq)]
#[non_exhaustive]
pub enum RouterConfigError {
    /// A router needs at least one input and one output, and at most 65535 of each.
    #[error("router ports: {inputs} inputs and {outputs} outputs (need 1..=65535 of each)")]
    Ports {
        /// Inputs asked for.
        inputs: usize,
        /// Outputs asked for.
        outputs: usize,
    },
    /// `num_vcs` outside 1..=64.
    #[error("num_vcs = {0}: the router model supports 1..=64 VCs per port")]
    Vcs(usize),
    /// `vc_buf_size` of zero (or absurdly large).
    #[error("vc_buf_size = {0}: need 1..=65535 flit slots per VC")]
    BufSize(usize),
    /// An allocator with no pipeline stage.
    #[error("{0} = 0: the allocator stages need at least one cycle")]
    ZeroAllocDelay(&'static str),
    /// No cycle for switch traversal.
    #[error("st_prepare_delay + st_final_delay = 0: switch traversal needs at least one cycle")]
    ZeroCrossbarDelay,
    /// A speedup of zero.
    #[error("{0} = 0: speedups must be at least 1")]
    ZeroSpeedup(&'static str),
    /// `internal_speedup` not a finite positive number.
    #[error("internal_speedup = {0}: must be a finite number greater than 0")]
    InternalSpeedup(f64),
    /// `alloc_iters` of zero.
    #[error("alloc_iters = 0: allocators need at least one iteration")]
    AllocIters,
    /// `output_buffer_size` of zero.
    #[error("output_buffer_size = 0: use a positive size, or none for unlimited")]
    OutputBufferSize,
    /// A held switch connection with a limited output buffer and output speedup: BookSim
    /// checks the held connection's output queue by its expanded output number, which is
    /// not an output then.
    #[error(
        "hold_switch_for_packet with output_buffer_size and output_speedup > 1: \
         BookSim indexes the output queues by expanded output there"
    )]
    HoldWithOutputSpeedup,
}

impl RouterConfig {
    /// Check every parameter; the error names the first one that cannot be honoured.
    pub fn validate(&self) -> Result<(), RouterConfigError> {
        if self.inputs == 0 || self.outputs == 0 || self.inputs > 65535 || self.outputs > 65535 {
            return Err(RouterConfigError::Ports {
                inputs: self.inputs,
                outputs: self.outputs,
            });
        }
        if self.vcs == 0 || self.vcs > MAX_VCS {
            return Err(RouterConfigError::Vcs(self.vcs));
        }
        if self.vc_buf_size == 0 || self.vc_buf_size > 65535 {
            return Err(RouterConfigError::BufSize(self.vc_buf_size));
        }
        if self.vc_alloc_delay == 0 {
            return Err(RouterConfigError::ZeroAllocDelay("vc_alloc_delay"));
        }
        if self.sw_alloc_delay == 0 {
            return Err(RouterConfigError::ZeroAllocDelay("sw_alloc_delay"));
        }
        if self.st_prepare_delay + self.st_final_delay == 0 {
            return Err(RouterConfigError::ZeroCrossbarDelay);
        }
        if self.input_speedup == 0 {
            return Err(RouterConfigError::ZeroSpeedup("input_speedup"));
        }
        if self.output_speedup == 0 {
            return Err(RouterConfigError::ZeroSpeedup("output_speedup"));
        }
        if !(self.internal_speedup.is_finite() && self.internal_speedup > 0.0) {
            return Err(RouterConfigError::InternalSpeedup(self.internal_speedup));
        }
        if self.alloc_iters == 0
            || [self.vc_allocator, self.sw_allocator].contains(&AllocatorKind::Islip { iters: 0 })
        {
            return Err(RouterConfigError::AllocIters);
        }
        if self.output_buffer_size == Some(0) {
            return Err(RouterConfigError::OutputBufferSize);
        }
        if self.hold_switch_for_packet
            && self.output_buffer_size.is_some()
            && self.output_speedup > 1
        {
            return Err(RouterConfigError::HoldWithOutputSpeedup);
        }
        Ok(())
    }

    /// Cycles of switch traversal (`st_prepare_delay + st_final_delay`).
    pub fn crossbar_delay(&self) -> u32 {
        self.st_prepare_delay + self.st_final_delay
    }

    /// Zero-load cycles from a head flit entering the input buffer to leaving on the output
    /// channel: route + VA + SA (VA and SA overlap when speculative) + crossbar.
    pub fn pipeline_cycles(&self) -> u32 {
        let alloc = if self.speculative {
            self.vc_alloc_delay.max(self.sw_alloc_delay)
        } else {
            self.vc_alloc_delay + self.sw_alloc_delay
        };
        self.routing_delay + alloc + self.crossbar_delay()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn default_is_valid() {
        assert_eq!(RouterConfig::default().validate(), Ok(()));
        assert_eq!(RouterConfig::default().pipeline_cycles(), 4);
    }

    #[test]
    fn each_error_names_its_parameter() {
        let base = RouterConfig::default();
        let cases: Vec<(RouterConfig, &str)> = vec![
            (
                RouterConfig {
                    inputs: 0,
                    ..base.clone()
                },
                "ports",
            ),
            (
                RouterConfig {
                    vcs: 65,
                    ..base.clone()
                },
                "num_vcs",
            ),
            (
                RouterConfig {
                    vc_buf_size: 0,
                    ..base.clone()
                },
                "vc_buf_size",
            ),
            (
                RouterConfig {
                    vc_alloc_delay: 0,
                    ..base.clone()
                },
                "vc_alloc_delay",
            ),
            (
                RouterConfig {
                    sw_alloc_delay: 0,
                    ..base.clone()
                },
                "sw_alloc_delay",
            ),
            (
                RouterConfig {
                    st_final_delay: 0,
                    ..base.clone()
                },
                "st_final_delay",
            ),
            (
                RouterConfig {
                    input_speedup: 0,
                    ..base.clone()
                },
                "input_speedup",
            ),
            (
                RouterConfig {
                    output_speedup: 0,
                    ..base.clone()
                },
                "output_speedup",
            ),
            (
                RouterConfig {
                    internal_speedup: f64::NAN,
                    ..base.clone()
                },
                "internal_speedup",
            ),
            (
                RouterConfig {
                    alloc_iters: 0,
                    ..base.clone()
                },
                "alloc_iters",
            ),
            (
                RouterConfig {
                    output_buffer_size: Some(0),
                    ..base.clone()
                },
                "output_buffer_size",
            ),
        ];
        for (cfg, name) in cases {
            let e = cfg.validate().expect_err(name).to_string();
            assert!(e.contains(name), "{e} should name {name}");
        }
    }
}
