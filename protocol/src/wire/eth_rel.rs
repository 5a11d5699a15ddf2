//! The Ethernet profile's reliability header (`spec-notes/wire.md#reliability-header`).
//!
//! Eight bytes after the EtherType, podlink's own layout (public parsers disagree on where
//! version and op sit), MSB-first like every podlink header:
//!
//! | bytes | bits (MSB→LSB) | field |
//! |---|---|---|
//! | 0     | 63..60 | version:4 (= [`VERSION`]) |
//! | 0     | 59..58 | op:2 (data 0, ACK 1, NACK 2; 3 reserved) |
//! | 0     | 57..56 | vc:2 |
//! | 1..=3 | 55..46 | src accelerator ID:10 |
//! | 1..=3 | 45..36 | partition ID:10 |
//! | 1..=3 | 35..32 | reserved:4 (zero) |
//! | 4..=5 | 31..16 | PSN:16 |
//! | 6..=7 | 15..0  | acknowledged PSN:16 |
//!
//! The destination accelerator is not in this header: it is the destination MAC
//! (see [`super::eth::MacScheme`]).

use super::bits::{BitReader, BitWriter};
use super::{AccelId, Error, PartitionId, Psn, Result, Vc};

/// Length of the reliability header in bytes.
pub const HEADER_LEN: usize = 8;

/// The only header version podlink speaks. Version 0 is never used, so that an all-zero
/// header is rejected.
pub const VERSION: u8 = 1;

/// What a frame does for the go-back-N reliability machine.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
#[repr(u8)]
pub enum RelOp {
    /// Carries 1..=64 TL flits and consumes one PSN; `ack_psn` is a piggybacked
    /// cumulative acknowledgement.
    #[default]
    Data = 0,
    /// Carries no flits: every PSN up to and including `ack_psn` was received in order.
    Ack = 1,
    /// Carries no flits: as [`RelOp::Ack`] for `ack_psn`, and asks the sender to go back
    /// and resend from `ack_psn + 1`.
    Nack = 2,
}

impl RelOp {
    /// The op of a raw 2-bit value; 3 (and anything wider) is reserved.
    pub const fn from_raw(v: u8) -> Result<RelOp> {
        match v {
            0 => Ok(RelOp::Data),
            1 => Ok(RelOp::Ack),
            2 => Ok(RelOp::Nack),
            _ => Err(Error::Reserved("reliability header op")),
        }
    }

    /// The raw 2-bit value.
    pub const fn raw(self) -> u8 {
        self as u8
    }

    /// Whether a frame with this op carries TL flits (only [`RelOp::Data`] does).
    pub const fn carries_flits(self) -> bool {
        matches!(self, RelOp::Data)
    }
}

/// The reliability header, decoded.
///
/// The version is not a field: [`RelHeader::parse`] accepts only [`VERSION`] and
/// [`RelHeader::emit`] always writes it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub struct RelHeader {
    /// Data, ACK or NACK.
    pub op: RelOp,
    /// Virtual channel of the flits (data) or of the PSN space acknowledged (ACK/NACK).
    pub vc: Vc,
    /// Source accelerator: the sender of this frame.
    pub src: AccelId,
    /// Partition (virtual pod) the frame belongs to.
    pub partition: PartitionId,
    /// Packet sequence number. Consumed by data frames only; an ACK/NACK carries the
    /// sender's next unsent data PSN, which the receiver may ignore.
    pub psn: Psn,
    /// Cumulative acknowledgement: every PSN up to and including this one arrived in order.
    pub ack_psn: Psn,
}

impl RelHeader {
    /// Parse from the first [`HEADER_LEN`] bytes of `buf`.
    ///
    /// # Errors
    /// `Truncated`; `BadVersion` for any version but [`VERSION`] (checked first, so a
    /// later version with another layout is reported as such); `Reserved` for op 3 or a
    /// set reserved bit.
    pub fn parse(buf: &[u8]) -> Result<Self> {
        let mut r = BitReader::new::<HEADER_LEN>(buf)?;
        let version: u8 = r.take(4);
        if version != VERSION {
            return Err(Error::BadVersion(version));
        }
        let op = RelOp::from_raw(r.take(2))?;
        let vc = r.take(2);
        let src = r.take(10);
        let partition = r.take(10);
        r.reserved(4, "reliability header rsvd")?;
        let psn = Psn(r.take(16));
        let ack_psn = Psn(r.take(16));
        Ok(RelHeader {
            op,
            vc,
            src,
            partition,
            psn,
            ack_psn,
        })
    }

    /// Emit into the first [`HEADER_LEN`] bytes of `buf`; returns [`HEADER_LEN`].
    ///
    /// # Errors
    /// `BufferTooSmall`. (The typed fields always fit their widths.)
    pub fn emit(&self, buf: &mut [u8]) -> Result<usize> {
        let mut w = BitWriter::new(64);
        w.put(4, VERSION, "version")?;
        w.put(2, self.op.raw(), "op")?;
        w.put(2, self.vc, "vc")?;
        w.put(10, self.src, "src")?;
        w.put(10, self.partition, "partition")?;
        w.reserved(4);
        w.put(16, self.psn.0, "psn")?;
        w.put(16, self.ack_psn.0, "ack_psn")?;
        w.finish::<HEADER_LEN>(buf)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// op=NACK vc=3 src=0x2AB partition=0x155 psn=0x1234 ack_psn=0xFFFE.
    static HEADER_BYTES: [u8; 8] = [0x1b, 0xaa, 0xd5, 0x50, 0x12, 0x34, 0xff, 0xfe];

    fn header() -> RelHeader {
        RelHeader {
            op: RelOp::Nack,
            vc: Vc::new(3).unwrap(),
            src: AccelId::new(0x2ab).unwrap(),
            partition: PartitionId::new(0x155).unwrap(),
            psn: Psn(0x1234),
            ack_psn: Psn(0xfffe),
        }
    }

    #[test]
    fn test_deconstruct() {
        assert_eq!(RelHeader::parse(&HEADER_BYTES).unwrap(), header());
    }

    #[test]
    fn test_construct() {
        let mut buf = [0u8; 8];
        assert_eq!(header().emit(&mut buf).unwrap(), HEADER_LEN);
        assert_eq!(buf, HEADER_BYTES);
        // Defaults: version 1, everything else zero.
        RelHeader::default().emit(&mut buf).unwrap();
        assert_eq!(buf, [0x10, 0, 0, 0, 0, 0, 0, 0]);
    }

    #[test]
    fn test_truncated() {
        assert_eq!(
            RelHeader::parse(&HEADER_BYTES[..7]),
            Err(Error::Truncated { needed: 8, got: 7 })
        );
        assert_eq!(
            header().emit(&mut [0u8; 7]),
            Err(Error::BufferTooSmall { needed: 8, got: 7 })
        );
    }

    #[test]
    fn test_bad_version() {
        let mut b = HEADER_BYTES;
        b[0] = 0x0b; // version 0
        assert_eq!(RelHeader::parse(&b), Err(Error::BadVersion(0)));
        b[0] = 0xff; // version 15, and op 3 behind it: the version wins
        assert_eq!(RelHeader::parse(&b), Err(Error::BadVersion(15)));
    }

    #[test]
    fn test_reserved() {
        let mut b = HEADER_BYTES;
        b[0] = 0x1c; // op 3
        assert_eq!(
            RelHeader::parse(&b),
            Err(Error::Reserved("reliability header op"))
        );
        for bit in 0..4 {
            let mut b = HEADER_BYTES;
            b[3] |= 1 << bit;
            assert_eq!(
                RelHeader::parse(&b),
                Err(Error::Reserved("reliability header rsvd"))
            );
        }
    }

    #[test]
    fn op_raw_round_trip() {
        for op in [RelOp::Data, RelOp::Ack, RelOp::Nack] {
            assert_eq!(RelOp::from_raw(op.raw()), Ok(op));
        }
        assert!(RelOp::Data.carries_flits());
        assert!(!RelOp::Ack.carries_flits());
    }
}
