//! The Ethernet profile frame (ETH-X / SUE style; `spec-notes/wire.md`).
//!
//! ```text
//!  0      6      12   14           22                    22+64n   (len-4)
//! +------+------+----+------------+---------------------+-------+-----+
//! | dst  | src  | ET | reliability| n × 64 B TL flits   | (pad) | FCS |
//! | MAC  | MAC  |    | header 8 B | 1 ≤ n ≤ 64 (data)   |       | LE  |
//! +------+------+----+------------+---------------------+-------+-----+
//! ```
//!
//! * EtherType (ET) is [`ETHERTYPE`] (0x88B5, IEEE local experimental).
//! * The reliability header is [`super::eth_rel::RelHeader`].
//! * A data frame carries 1..=64 whole TL flits for one {destination accelerator, VC}; an
//!   ACK/NACK frame carries none and is zero-padded to Ethernet's 60-byte minimum, so every
//!   frame is at least [`MIN_FRAME_LEN`] = 64 bytes with its FCS, and the frame length alone
//!   says how many flits it holds (64 bytes: none; otherwise `(len - 26) / 64`).
//! * The destination accelerator is the destination MAC under a [`MacScheme`]: the header
//!   has no room for it, and an Ethernet switch forwards on the MAC anyway.
//! * The FCS is CRC-32/ISO-HDLC over everything from the destination MAC to the end of the
//!   payload (or pad), stored little-endian as Ethernet sends it.
//!
//! A frame here starts at the destination MAC and ends with the FCS: no preamble or SFD.

use core::fmt;
use core::ops::Range;

use zerocopy::byteorder::network_endian;
use zerocopy::{FromBytes, Immutable, IntoBytes, KnownLayout, Unaligned};

use super::crc::{self, CRC32_ISO_HDLC};
use super::eth_rel::{self, RelHeader};
use super::{check_out, AccelId, Error, Result};

/// podlink's EtherType (IEEE 802 "local experimental" 0x88B5).
pub const ETHERTYPE: u16 = 0x88b5;
/// Length of the Ethernet II header: destination MAC, source MAC, EtherType.
pub const ETH_HEADER_LEN: usize = 14;
/// Length of everything before the TL flits: Ethernet header + reliability header.
pub const HEADER_LEN: usize = ETH_HEADER_LEN + eth_rel::HEADER_LEN;
/// Length of the FCS.
pub const FCS_LEN: usize = 4;
/// Length of one TL flit.
pub const FLIT_LEN: usize = 64;
/// Most TL flits in one frame.
pub const MAX_FLITS: usize = 64;
/// Most payload bytes in one frame (4 KB).
pub const MAX_PAYLOAD_LEN: usize = MAX_FLITS * FLIT_LEN;
/// Ethernet's minimum frame length before the FCS.
pub const MIN_LEN_BEFORE_FCS: usize = 60;
/// Shortest frame, FCS included (an ACK or NACK).
pub const MIN_FRAME_LEN: usize = MIN_LEN_BEFORE_FCS + FCS_LEN;
/// Longest frame, FCS included (64 flits): needs a jumbo MTU of at least 4104 bytes.
pub const MAX_FRAME_LEN: usize = HEADER_LEN + MAX_PAYLOAD_LEN + FCS_LEN;
/// Bytes each frame also occupies on the wire: preamble + SFD (8) and inter-frame gap (12).
pub const WIRE_OVERHEAD: usize = 20;

/// Frame length, FCS included, of a frame carrying `flits` TL flits (0 for ACK/NACK).
pub const fn frame_len(flits: usize) -> usize {
    let body = HEADER_LEN.saturating_add(flits.saturating_mul(FLIT_LEN));
    let body = if body < MIN_LEN_BEFORE_FCS {
        MIN_LEN_BEFORE_FCS
    } else {
        body
    };
    body.saturating_add(FCS_LEN)
}

/// Bytes on the wire, preamble and inter-frame gap included, of a frame of `flits` flits.
pub const fn wire_len(flits: usize) -> usize {
    frame_len(flits).saturating_add(WIRE_OVERHEAD)
}

/// The fixed Ethernet II header, as a zero-copy layout.
#[derive(
    Debug, Clone, Copy, PartialEq, Eq, FromBytes, IntoBytes, KnownLayout, Immutable, Unaligned,
)]
#[repr(C)]
pub struct EthHeader {
    /// Destination MAC.
    pub dst: [u8; 6],
    /// Source MAC.
    pub src: [u8; 6],
    /// EtherType (big-endian on the wire).
    pub ethertype: network_endian::U16,
}

const _: () = assert!(core::mem::size_of::<EthHeader>() == ETH_HEADER_LEN);

/// A 48-bit Ethernet MAC address, byte 0 first on the wire.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Default)]
pub struct EthAddr(pub [u8; 6]);

impl EthAddr {
    /// The broadcast address.
    pub const BROADCAST: EthAddr = EthAddr([0xff; 6]);

    /// Individual (unicast) address: the I/G bit (bit 0 of byte 0) is clear.
    pub const fn is_unicast(&self) -> bool {
        let [b0, ..] = self.0;
        b0 & 0x01 == 0
    }

    /// Locally administered: the U/L bit (bit 1 of byte 0) is set.
    pub const fn is_local(&self) -> bool {
        let [b0, ..] = self.0;
        b0 & 0x02 != 0
    }
}

impl fmt::Display for EthAddr {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let [a, b, c, d, e, g] = self.0;
        write!(f, "{a:02x}:{b:02x}:{c:02x}:{d:02x}:{e:02x}:{g:02x}")
    }
}

/// How accelerator IDs map to MAC addresses (`spec-notes/wire.md#addressing`).
///
/// An accelerator's MAC is a pod-wide 4-byte prefix followed by the 10-bit accelerator ID
/// as a big-endian 16-bit number (top 6 bits zero): `pp:pp:pp:pp:0h:ll`. The destination
/// MAC of a frame therefore names its destination accelerator.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct MacScheme {
    prefix: [u8; 4],
}

impl MacScheme {
    /// `02:50:4c:4b:..:..`: locally administered unicast, "PLK".
    pub const DEFAULT: MacScheme = MacScheme {
        prefix: [0x02, 0x50, 0x4c, 0x4b],
    };

    /// A scheme with the given prefix, or `None` if the prefix has the multicast bit set.
    pub const fn new(prefix: [u8; 4]) -> Option<Self> {
        let [b0, ..] = prefix;
        if b0 & 0x01 != 0 {
            None
        } else {
            Some(MacScheme { prefix })
        }
    }

    /// The pod-wide prefix.
    pub const fn prefix(&self) -> [u8; 4] {
        self.prefix
    }

    /// The MAC of accelerator `id`.
    pub const fn mac(&self, id: AccelId) -> EthAddr {
        let [a, b, c, d] = self.prefix;
        let [hi, lo] = id.get().to_be_bytes();
        EthAddr([a, b, c, d, hi, lo])
    }

    /// The accelerator a MAC names, or `None` if the MAC is not of this scheme.
    pub fn accel(&self, mac: EthAddr) -> Option<AccelId> {
        let [a, b, c, d, hi, lo] = mac.0;
        if [a, b, c, d] != self.prefix {
            return None;
        }
        AccelId::new(u16::from_be_bytes([hi, lo]))
    }
}

impl Default for MacScheme {
    fn default() -> Self {
        Self::DEFAULT
    }
}

/// Number of TL flits a frame of `len` bytes (FCS included) carries, by length alone.
const fn flit_count_of(len: usize) -> usize {
    if len <= MIN_FRAME_LEN {
        0
    } else {
        len.saturating_sub(HEADER_LEN + FCS_LEN) / FLIT_LEN
    }
}

/// Where the payload (the flits) sits in a frame of `len` bytes; empty for 64 bytes or fewer.
const fn payload_range(len: usize) -> Range<usize> {
    let end = if len <= MIN_FRAME_LEN {
        HEADER_LEN
    } else {
        len.saturating_sub(FCS_LEN)
    };
    HEADER_LEN..end
}

/// The payload bytes (the flits; empty for a 64-byte frame).
fn payload_of(bytes: &[u8]) -> &[u8] {
    bytes.get(payload_range(bytes.len())).unwrap_or(&[])
}

/// The payload as whole flits (a trailing partial flit is left out).
fn flits_of(bytes: &[u8]) -> &[[u8; FLIT_LEN]] {
    let payload = payload_of(bytes);
    let whole = payload.len() / FLIT_LEN * FLIT_LEN;
    payload
        .get(..whole)
        .and_then(|p| <[[u8; FLIT_LEN]]>::ref_from_bytes(p).ok())
        .unwrap_or(&[])
}

/// A read/write view of a podlink Ethernet frame (destination MAC to FCS).
///
/// Getters never panic: on a buffer too short for the field they read they return zeros
/// (or an empty slice), and setters do nothing. After [`Frame::check_len`] succeeds every
/// field is present.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Frame<T: AsRef<[u8]>> {
    buffer: T,
}

impl<T: AsRef<[u8]>> Frame<T> {
    /// Wrap a buffer without checking its length.
    pub const fn new_unchecked(buffer: T) -> Frame<T> {
        Frame { buffer }
    }

    /// Wrap a received frame, checking its length ([`Frame::check_len`]).
    ///
    /// # Errors
    /// As [`Frame::check_len`].
    pub fn new_checked(buffer: T) -> Result<Frame<T>> {
        let frame = Self::new_unchecked(buffer);
        frame.check_len()?;
        Ok(frame)
    }

    /// Check that the length is one a podlink frame can have: exactly 64 bytes (an
    /// ACK/NACK), or 22 + 64·n + 4 bytes with 1 ≤ n ≤ 64.
    ///
    /// # Errors
    /// `Truncated` below 64 bytes; `LengthMismatch` when the payload is over 4096 bytes or
    /// not whole 64-byte flits.
    pub fn check_len(&self) -> Result<()> {
        let len = self.buffer.as_ref().len();
        if len < MIN_FRAME_LEN {
            return Err(Error::Truncated {
                needed: MIN_FRAME_LEN,
                got: len,
            });
        }
        if len == MIN_FRAME_LEN {
            return Ok(());
        }
        let payload = len.saturating_sub(HEADER_LEN + FCS_LEN);
        if payload > MAX_PAYLOAD_LEN {
            Err(Error::LengthMismatch("eth payload over 4096 bytes"))
        } else if payload % FLIT_LEN != 0 {
            Err(Error::LengthMismatch("eth payload not whole 64-byte flits"))
        } else {
            Ok(())
        }
    }

    /// The underlying buffer.
    pub fn into_inner(self) -> T {
        self.buffer
    }

    fn eth_header(&self) -> Option<&EthHeader> {
        EthHeader::ref_from_prefix(self.buffer.as_ref())
            .ok()
            .map(|(h, _)| h)
    }

    /// Destination MAC: names the destination accelerator (see [`MacScheme`]).
    pub fn dst_addr(&self) -> EthAddr {
        EthAddr(self.eth_header().map_or([0; 6], |h| h.dst))
    }

    /// Source MAC.
    pub fn src_addr(&self) -> EthAddr {
        EthAddr(self.eth_header().map_or([0; 6], |h| h.src))
    }

    /// EtherType.
    pub fn ethertype(&self) -> u16 {
        self.eth_header().map_or(0, |h| h.ethertype.get())
    }

    /// The 8 reliability-header bytes (fewer on a short buffer).
    pub fn rel_header_bytes(&self) -> &[u8] {
        let b = self.buffer.as_ref();
        b.get(ETH_HEADER_LEN..HEADER_LEN)
            .or_else(|| b.get(ETH_HEADER_LEN..))
            .unwrap_or(&[])
    }

    /// The decoded reliability header.
    ///
    /// # Errors
    /// As [`RelHeader::parse`].
    pub fn rel_header(&self) -> Result<RelHeader> {
        RelHeader::parse(self.rel_header_bytes())
    }

    /// Number of TL flits, from the frame length.
    pub fn flit_count(&self) -> usize {
        flit_count_of(self.buffer.as_ref().len())
    }

    /// The payload: the TL flits (empty for an ACK/NACK frame).
    pub fn payload(&self) -> &[u8] {
        payload_of(self.buffer.as_ref())
    }

    /// The pad after the header of a 64-byte (ACK/NACK) frame; empty for a data frame.
    pub fn padding(&self) -> &[u8] {
        let b = self.buffer.as_ref();
        if b.len() == MIN_FRAME_LEN {
            b.get(HEADER_LEN..MIN_LEN_BEFORE_FCS).unwrap_or(&[])
        } else {
            &[]
        }
    }

    /// The payload as whole TL flits.
    pub fn flits(&self) -> &[[u8; FLIT_LEN]] {
        flits_of(self.buffer.as_ref())
    }

    /// Iterator over the TL flits, in order.
    pub fn tl_flits(&self) -> core::slice::Iter<'_, [u8; FLIT_LEN]> {
        self.flits().iter()
    }

    /// The FCS the frame carries (its last 4 bytes, little-endian).
    pub fn fcs(&self) -> u32 {
        let b = self.buffer.as_ref();
        b.len()
            .checked_sub(FCS_LEN)
            .and_then(|start| b.get(start..))
            .and_then(|s| <[u8; FCS_LEN]>::try_from(s).ok())
            .map_or(0, u32::from_le_bytes)
    }

    /// The FCS the frame should carry: CRC-32/ISO-HDLC of everything before the last 4 bytes.
    pub fn compute_fcs(&self) -> u32 {
        let b = self.buffer.as_ref();
        let covered = b
            .len()
            .checked_sub(FCS_LEN)
            .and_then(|end| b.get(..end))
            .unwrap_or(&[]);
        CRC32_ISO_HDLC.checksum(covered)
    }

    /// Whether the FCS is right.
    ///
    /// # Fuzzing
    /// Always true under `cfg(fuzzing)` ([`crc::verify`]).
    pub fn verify_fcs(&self) -> bool {
        crc::verify(self.fcs(), self.compute_fcs())
    }
}

impl<T: AsRef<[u8]> + AsMut<[u8]>> Frame<T> {
    fn eth_header_mut(&mut self) -> Option<&mut EthHeader> {
        EthHeader::mut_from_prefix(self.buffer.as_mut())
            .ok()
            .map(|(h, _)| h)
    }

    /// Set the destination MAC.
    pub fn set_dst_addr(&mut self, addr: EthAddr) {
        if let Some(h) = self.eth_header_mut() {
            h.dst = addr.0;
        }
    }

    /// Set the source MAC.
    pub fn set_src_addr(&mut self, addr: EthAddr) {
        if let Some(h) = self.eth_header_mut() {
            h.src = addr.0;
        }
    }

    /// Set the EtherType.
    pub fn set_ethertype(&mut self, ethertype: u16) {
        if let Some(h) = self.eth_header_mut() {
            h.ethertype.set(ethertype);
        }
    }

    /// Write the reliability header.
    ///
    /// # Errors
    /// `BufferTooSmall` if the buffer ends before byte 22.
    pub fn set_rel_header(&mut self, rel: &RelHeader) -> Result<()> {
        let b = self.buffer.as_mut();
        let got = b.len().saturating_sub(ETH_HEADER_LEN);
        let out = b.get_mut(ETH_HEADER_LEN..).ok_or(Error::BufferTooSmall {
            needed: eth_rel::HEADER_LEN,
            got,
        })?;
        rel.emit(out).map(|_| ())
    }

    /// The payload, mutable (same extent as [`Frame::payload`]).
    pub fn payload_mut(&mut self) -> &mut [u8] {
        let b = self.buffer.as_mut();
        b.get_mut(payload_range(b.len())).unwrap_or(&mut [])
    }

    /// Compute the FCS and store it in the last 4 bytes.
    pub fn fill_fcs(&mut self) {
        let fcs = self.compute_fcs().to_le_bytes();
        let b = self.buffer.as_mut();
        if let Some(dst) = b
            .len()
            .checked_sub(FCS_LEN)
            .and_then(|start| b.get_mut(start..))
        {
            dst.copy_from_slice(&fcs);
        }
    }
}

/// A podlink Ethernet frame, decoded: what [`Repr::emit`] needs to build one.
///
/// The version and EtherType are implied; the flits are borrowed from the frame (parse)
/// or from the caller (emit).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Repr<'a> {
    /// Destination MAC (names the destination accelerator, see [`MacScheme`]).
    pub dst_addr: EthAddr,
    /// Source MAC.
    pub src_addr: EthAddr,
    /// The reliability header.
    pub rel: RelHeader,
    /// The TL flits: 1..=64 for a data frame, none for ACK/NACK.
    pub flits: &'a [[u8; FLIT_LEN]],
}

impl<'a> Repr<'a> {
    /// A frame from `rel.src` to accelerator `dst`, with MACs from `scheme`.
    pub const fn new(
        scheme: &MacScheme,
        dst: AccelId,
        rel: RelHeader,
        flits: &'a [[u8; FLIT_LEN]],
    ) -> Self {
        Repr {
            dst_addr: scheme.mac(dst),
            src_addr: scheme.mac(rel.src),
            rel,
            flits,
        }
    }

    /// The destination accelerator under `scheme`, or `None` if the MAC is not of it.
    pub fn dst_accel(&self, scheme: &MacScheme) -> Option<AccelId> {
        scheme.accel(self.dst_addr)
    }

    /// Parse a received frame.
    ///
    /// Checks, in order: length ([`Frame::check_len`]), FCS, EtherType, reliability header,
    /// then that the op matches the flit count (data: 1..=64 flits; ACK/NACK: none) and
    /// that an ACK/NACK's pad is zero. Every frame this accepts re-emits byte for byte
    /// (outside `cfg(fuzzing)`, where a wrong FCS is accepted and re-emitted corrected).
    ///
    /// # Errors
    /// `Truncated`, `LengthMismatch`, `BadCrc`, `BadEtherType`, `BadVersion`, `Reserved`.
    ///
    /// # Fuzzing
    /// Under `cfg(fuzzing)` the FCS is not checked.
    pub fn parse<T: AsRef<[u8]> + ?Sized>(frame: &Frame<&'a T>) -> Result<Repr<'a>> {
        frame.check_len()?;
        let (carried, computed) = (frame.fcs(), frame.compute_fcs());
        if !crc::verify(carried, computed) {
            return Err(Error::BadCrc { carried, computed });
        }
        let ethertype = frame.ethertype();
        if ethertype != ETHERTYPE {
            return Err(Error::BadEtherType(ethertype));
        }
        let rel = frame.rel_header()?;
        let bytes: &'a [u8] = frame.buffer.as_ref();
        let flits = flits_of(bytes);
        check_op_flits(&rel, flits.len())?;
        if frame.padding().iter().any(|&b| b != 0) {
            return Err(Error::Reserved("eth pad"));
        }
        Ok(Repr {
            dst_addr: frame.dst_addr(),
            src_addr: frame.src_addr(),
            rel,
            flits,
        })
    }

    /// Length of the emitted frame, FCS included.
    pub const fn buffer_len(&self) -> usize {
        frame_len(self.flits.len())
    }

    /// Emit the frame into the first [`Repr::buffer_len`] bytes of `buf` (header,
    /// reliability header, flits, zero pad for ACK/NACK, FCS); returns that length.
    /// Bytes after it are left alone.
    ///
    /// # Errors
    /// `LengthMismatch` for more than 64 flits or an op that does not match the flit count;
    /// `BufferTooSmall`.
    pub fn emit(&self, buf: &mut [u8]) -> Result<usize> {
        if self.flits.len() > MAX_FLITS {
            return Err(Error::LengthMismatch("eth payload over 4096 bytes"));
        }
        check_op_flits(&self.rel, self.flits.len())?;
        let len = self.buffer_len();
        check_out(buf, len)?;
        let small = Error::BufferTooSmall {
            needed: len,
            got: buf.len(),
        };
        let frame = buf.get_mut(..len).ok_or(small)?;
        let (body, fcs) = frame
            .split_at_mut_checked(len.saturating_sub(FCS_LEN))
            .ok_or(small)?;
        let (eth, rest) = body.split_at_mut_checked(ETH_HEADER_LEN).ok_or(small)?;
        EthHeader {
            dst: self.dst_addr.0,
            src: self.src_addr.0,
            ethertype: network_endian::U16::new(ETHERTYPE),
        }
        .write_to(eth)
        .map_err(|_| small)?;
        let (rel, rest) = rest
            .split_at_mut_checked(eth_rel::HEADER_LEN)
            .ok_or(small)?;
        self.rel.emit(rel)?;
        let flit_bytes = self.flits.as_bytes();
        let (payload, pad) = rest.split_at_mut_checked(flit_bytes.len()).ok_or(small)?;
        payload.copy_from_slice(flit_bytes);
        pad.fill(0);
        let crc = CRC32_ISO_HDLC.checksum(body).to_le_bytes();
        fcs.copy_from_slice(&crc);
        Ok(len)
    }
}

/// A data frame carries 1..=64 flits; an ACK/NACK carries none.
fn check_op_flits(rel: &RelHeader, flits: usize) -> Result<()> {
    match (rel.op.carries_flits(), flits) {
        (true, 0) => Err(Error::LengthMismatch("eth data frame without flits")),
        (false, n) if n > 0 => Err(Error::LengthMismatch("eth ACK/NACK frame with flits")),
        _ => Ok(()),
    }
}

#[cfg(test)]
mod tests {
    use super::super::eth_rel::RelOp;
    use super::super::{PartitionId, Psn, Vc};
    use super::*;

    /// A captured ARP request (60 bytes + FCS) from the Cambridge "ethercrc" notes
    /// (cl.cam.ac.uk/research/srg/han/ACS-P35/ethercrc/): FCS on the wire `9e d2 c2 af`,
    /// i.e. CRC-32/ISO-HDLC 0xAFC2D29E stored little-endian.
    static ARP_FRAME: [u8; 64] = [
        0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x00, 0x20, 0xaf, 0xb7, 0x80, 0xb8, 0x08, 0x06, 0x00,
        0x01, 0x08, 0x00, 0x06, 0x04, 0x00, 0x01, 0x00, 0x20, 0xaf, 0xb7, 0x80, 0xb8, 0x80, 0xe8,
        0x0f, 0x94, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x80, 0xe8, 0x0f, 0xde, 0xde, 0xde, 0xde,
        0xde, 0xde, 0xde, 0xde, 0xde, 0xde, 0xde, 0xde, 0xde, 0xde, 0xde, 0xde, 0xde, 0xde, 0xde,
        0x9e, 0xd2, 0xc2, 0xaf,
    ];

    /// Data frame, accelerator 3 → 7, VC 1, partition 5, PSN 0x0102, ack 0xFFFE, one flit
    /// 00 01 .. 3f. FCS computed independently (Python `zlib.crc32`).
    static DATA_FRAME: [u8; 90] = [
        0x02, 0x50, 0x4c, 0x4b, 0x00, 0x07, 0x02, 0x50, 0x4c, 0x4b, 0x00, 0x03, 0x88, 0xb5, 0x11,
        0x00, 0xc0, 0x50, 0x01, 0x02, 0xff, 0xfe, 0x00, 0x01, 0x02, 0x03, 0x04, 0x05, 0x06, 0x07,
        0x08, 0x09, 0x0a, 0x0b, 0x0c, 0x0d, 0x0e, 0x0f, 0x10, 0x11, 0x12, 0x13, 0x14, 0x15, 0x16,
        0x17, 0x18, 0x19, 0x1a, 0x1b, 0x1c, 0x1d, 0x1e, 0x1f, 0x20, 0x21, 0x22, 0x23, 0x24, 0x25,
        0x26, 0x27, 0x28, 0x29, 0x2a, 0x2b, 0x2c, 0x2d, 0x2e, 0x2f, 0x30, 0x31, 0x32, 0x33, 0x34,
        0x35, 0x36, 0x37, 0x38, 0x39, 0x3a, 0x3b, 0x3c, 0x3d, 0x3e, 0x3f, 0xaa, 0xb1, 0xb3, 0xd3,
    ];

    /// ACK frame, accelerator 7 → 3, VC 1, partition 5, PSN 0x0010, ack 0x0102, zero pad.
    static ACK_FRAME: [u8; 64] = [
        0x02, 0x50, 0x4c, 0x4b, 0x00, 0x03, 0x02, 0x50, 0x4c, 0x4b, 0x00, 0x07, 0x88, 0xb5, 0x15,
        0x01, 0xc0, 0x50, 0x00, 0x10, 0x01, 0x02, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00,
        0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00,
        0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00,
        0xbe, 0x76, 0xc1, 0xb4,
    ];

    fn ramp_flit() -> [[u8; 64]; 1] {
        let mut f = [0u8; 64];
        for (i, b) in f.iter_mut().enumerate() {
            *b = i as u8;
        }
        [f]
    }

    fn accel(id: u16) -> AccelId {
        AccelId::new(id).unwrap()
    }

    fn data_rel() -> RelHeader {
        RelHeader {
            op: RelOp::Data,
            vc: Vc::new(1).unwrap(),
            src: accel(3),
            partition: PartitionId::new(5).unwrap(),
            psn: Psn(0x0102),
            ack_psn: Psn(0xfffe),
        }
    }

    fn ack_repr() -> Repr<'static> {
        let rel = RelHeader {
            op: RelOp::Ack,
            src: accel(7),
            psn: Psn(0x0010),
            ack_psn: Psn(0x0102),
            ..data_rel()
        };
        Repr::new(&MacScheme::DEFAULT, accel(3), rel, &[])
    }

    /// A copy of `frame` with `edit` applied and the FCS recomputed.
    fn edited<const N: usize>(frame: &[u8; N], edit: impl FnOnce(&mut [u8; N])) -> [u8; N] {
        let mut b = *frame;
        edit(&mut b);
        Frame::new_unchecked(&mut b[..]).fill_fcs();
        b
    }

    fn parse(bytes: &[u8]) -> Result<Repr<'_>> {
        Repr::parse(&Frame::new_checked(bytes)?)
    }

    #[test]
    fn test_known_ethernet_fcs() {
        let f = Frame::new_checked(&ARP_FRAME[..]).unwrap();
        assert_eq!(f.fcs(), 0xafc2_d29e);
        assert_eq!(f.compute_fcs(), 0xafc2_d29e);
        assert!(f.verify_fcs());
        let mut b = ARP_FRAME;
        b[60..].fill(0);
        let mut f = Frame::new_unchecked(&mut b[..]);
        f.fill_fcs();
        assert_eq!(f.into_inner()[60..], [0x9e, 0xd2, 0xc2, 0xaf]);
    }

    #[test]
    fn test_deconstruct() {
        let f = Frame::new_checked(&DATA_FRAME[..]).unwrap();
        assert_eq!(f.dst_addr(), EthAddr([2, 0x50, 0x4c, 0x4b, 0, 7]));
        assert_eq!(f.src_addr(), EthAddr([2, 0x50, 0x4c, 0x4b, 0, 3]));
        assert_eq!(f.ethertype(), ETHERTYPE);
        assert_eq!(f.rel_header(), Ok(data_rel()));
        assert_eq!(f.flit_count(), 1);
        assert_eq!(f.payload(), &DATA_FRAME[22..86]);
        assert!(f.padding().is_empty());
        assert_eq!(f.tl_flits().collect::<Vec<_>>(), vec![&ramp_flit()[0]]);
        assert_eq!(f.fcs(), 0xd3b3_b1aa);
        assert!(f.verify_fcs());

        let a = Frame::new_checked(&ACK_FRAME[..]).unwrap();
        assert_eq!(a.flit_count(), 0);
        assert!(a.payload().is_empty());
        assert_eq!(a.tl_flits().count(), 0);
        assert_eq!(a.padding(), &[0u8; 38]);
        assert!(a.verify_fcs());
    }

    #[test]
    fn test_parse() {
        let flits = ramp_flit();
        let want = Repr::new(&MacScheme::DEFAULT, accel(7), data_rel(), &flits);
        assert_eq!(parse(&DATA_FRAME), Ok(want));
        assert_eq!(want.dst_accel(&MacScheme::DEFAULT), Some(accel(7)));
        assert_eq!(parse(&ACK_FRAME), Ok(ack_repr()));
    }

    #[test]
    fn test_construct() {
        let flits = ramp_flit();
        let repr = Repr::new(&MacScheme::DEFAULT, accel(7), data_rel(), &flits);
        assert_eq!(repr.buffer_len(), 90);
        let mut buf = [0xeeu8; 100];
        assert_eq!(repr.emit(&mut buf), Ok(90));
        assert_eq!(buf[..90], DATA_FRAME);
        assert_eq!(buf[90..], [0xee; 10], "bytes after the frame untouched");

        let mut buf = [0xeeu8; 64];
        assert_eq!(ack_repr().emit(&mut buf), Ok(64));
        assert_eq!(buf, ACK_FRAME);
    }

    #[test]
    fn test_construct_with_setters() {
        let mut buf = [0u8; 90];
        let mut f = Frame::new_unchecked(&mut buf[..]);
        f.set_dst_addr(EthAddr([2, 0x50, 0x4c, 0x4b, 0, 7]));
        f.set_src_addr(EthAddr([2, 0x50, 0x4c, 0x4b, 0, 3]));
        f.set_ethertype(ETHERTYPE);
        f.set_rel_header(&data_rel()).unwrap();
        f.payload_mut().copy_from_slice(&ramp_flit()[0]);
        f.fill_fcs();
        assert_eq!(buf, DATA_FRAME);
    }

    #[test]
    fn test_truncated() {
        for len in [0, 13, 21, 25, 63] {
            assert_eq!(
                parse(&DATA_FRAME[..len]),
                Err(Error::Truncated {
                    needed: 64,
                    got: len
                })
            );
        }
        // Getters and setters on short buffers do not panic.
        let mut short = [0xffu8; 5];
        let mut f = Frame::new_unchecked(&mut short[..]);
        assert_eq!(f.dst_addr(), EthAddr::default());
        assert_eq!(f.ethertype(), 0);
        assert_eq!(f.fcs(), 0xffff_ffff, "the last 4 bytes");
        assert_eq!(Frame::new_unchecked(&[1u8, 2, 3][..]).fcs(), 0);
        assert!(f.payload().is_empty() && f.rel_header_bytes().is_empty());
        assert!(matches!(f.rel_header(), Err(Error::Truncated { .. })));
        assert_eq!(
            f.set_rel_header(&data_rel()),
            Err(Error::BufferTooSmall { needed: 8, got: 0 })
        );
        f.set_dst_addr(EthAddr::BROADCAST);
        f.set_ethertype(1);
        f.fill_fcs();
        assert!(f.payload_mut().is_empty());
        assert_eq!(Frame::new_unchecked(&[][..]).compute_fcs(), 0);
    }

    #[test]
    fn test_bad_fcs() {
        if cfg!(fuzzing) {
            return;
        }
        let mut b = DATA_FRAME;
        b[40] ^= 0x01;
        assert_eq!(
            parse(&b),
            Err(Error::BadCrc {
                carried: 0xd3b3_b1aa,
                computed: Frame::new_unchecked(&b[..]).compute_fcs()
            })
        );
        assert!(!Frame::new_unchecked(&b[..]).verify_fcs());
    }

    #[test]
    fn test_bad_ethertype() {
        assert_eq!(parse(&ARP_FRAME), Err(Error::BadEtherType(0x0806)));
        let b = edited(&DATA_FRAME, |b| b[13] = 0xb6);
        assert_eq!(parse(&b), Err(Error::BadEtherType(0x88b6)));
    }

    #[test]
    fn test_bad_version() {
        let b = edited(&DATA_FRAME, |b| b[14] = 0x21);
        assert_eq!(parse(&b), Err(Error::BadVersion(2)));
    }

    #[test]
    fn test_reserved() {
        let b = edited(&DATA_FRAME, |b| b[17] |= 0x08);
        assert_eq!(parse(&b), Err(Error::Reserved("reliability header rsvd")));
        let b = edited(&ACK_FRAME, |b| b[14] = 0x1d);
        assert_eq!(parse(&b), Err(Error::Reserved("reliability header op")));
        let b = edited(&ACK_FRAME, |b| b[59] = 1);
        assert_eq!(parse(&b), Err(Error::Reserved("eth pad")));
    }

    #[test]
    fn test_length_not_multiple_of_64() {
        let mut b = [0u8; 91];
        b[..90].copy_from_slice(&DATA_FRAME);
        assert_eq!(
            parse(&b),
            Err(Error::LengthMismatch("eth payload not whole 64-byte flits"))
        );
        // 22 + 38 + 1 + 4: one byte more than an ACK frame.
        assert_eq!(
            parse(&b[..65]),
            Err(Error::LengthMismatch("eth payload not whole 64-byte flits"))
        );
    }

    #[test]
    fn test_over_4k() {
        let buf = [0u8; MAX_FRAME_LEN + FLIT_LEN];
        assert_eq!(
            parse(&buf),
            Err(Error::LengthMismatch("eth payload over 4096 bytes"))
        );
        let flits = [[0u8; 64]; MAX_FLITS + 1];
        let repr = Repr {
            flits: &flits,
            ..Repr::new(&MacScheme::DEFAULT, accel(1), data_rel(), &[])
        };
        let mut out = [0u8; MAX_FRAME_LEN + FLIT_LEN];
        assert_eq!(
            repr.emit(&mut out),
            Err(Error::LengthMismatch("eth payload over 4096 bytes"))
        );
        // 64 flits is the maximum and round-trips.
        let repr = Repr {
            flits: &flits[..MAX_FLITS],
            ..repr
        };
        assert_eq!(repr.emit(&mut out), Ok(MAX_FRAME_LEN));
        assert_eq!(parse(&out[..MAX_FRAME_LEN]), Ok(repr));
    }

    #[test]
    fn test_op_flit_mismatch() {
        // A data header on a 64-byte frame; an ACK header on a one-flit frame.
        let b = edited(&ACK_FRAME, |b| b[14] = 0x11);
        assert_eq!(
            parse(&b),
            Err(Error::LengthMismatch("eth data frame without flits"))
        );
        let b = edited(&DATA_FRAME, |b| b[14] = 0x15);
        assert_eq!(
            parse(&b),
            Err(Error::LengthMismatch("eth ACK/NACK frame with flits"))
        );
        let mut out = [0u8; 128];
        let data_no_flits = Repr {
            rel: data_rel(),
            ..ack_repr()
        };
        assert_eq!(
            data_no_flits.emit(&mut out),
            Err(Error::LengthMismatch("eth data frame without flits"))
        );
        let flits = ramp_flit();
        let ack_with_flits = Repr {
            flits: &flits,
            ..ack_repr()
        };
        assert_eq!(
            ack_with_flits.emit(&mut out),
            Err(Error::LengthMismatch("eth ACK/NACK frame with flits"))
        );
    }

    #[test]
    fn test_buffer_too_small() {
        let flits = ramp_flit();
        let repr = Repr::new(&MacScheme::DEFAULT, accel(7), data_rel(), &flits);
        assert_eq!(
            repr.emit(&mut [0u8; 89]),
            Err(Error::BufferTooSmall {
                needed: 90,
                got: 89
            })
        );
        assert_eq!(
            ack_repr().emit(&mut [0u8; 63]),
            Err(Error::BufferTooSmall {
                needed: 64,
                got: 63
            })
        );
    }

    #[test]
    fn test_sizes() {
        assert_eq!(HEADER_LEN, 22);
        assert_eq!(frame_len(0), 64);
        assert_eq!(frame_len(1), 90);
        assert_eq!(frame_len(64), 4122);
        assert_eq!(MAX_FRAME_LEN, 4122);
        assert_eq!(wire_len(0), 84);
        assert_eq!(wire_len(1), 110);
        assert_eq!(wire_len(64), 4142);
    }

    #[test]
    fn test_mac_scheme() {
        let s = MacScheme::DEFAULT;
        let mac = s.mac(accel(0x3ff));
        assert_eq!(mac, EthAddr([0x02, 0x50, 0x4c, 0x4b, 0x03, 0xff]));
        assert!(mac.is_unicast() && mac.is_local());
        assert_eq!(s.accel(mac), Some(accel(0x3ff)));
        assert_eq!(s.accel(EthAddr([0x02, 0x50, 0x4c, 0x4b, 0x04, 0x00])), None);
        assert_eq!(s.accel(EthAddr::BROADCAST), None);
        assert_eq!(MacScheme::new([0x01, 0, 0, 0]), None);
        let other = MacScheme::new([0x06, 1, 2, 3]).unwrap();
        assert_eq!(other.accel(mac), None);
        assert_eq!(other.prefix(), [0x06, 1, 2, 3]);
        assert_eq!(std::format!("{mac}"), "02:50:4c:4b:03:ff".to_string());
    }
}
