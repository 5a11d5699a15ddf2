//! The 640-byte DL flit (`spec-notes/wire.md#dl-flit`).
//!
//! Layout (the public model's order; byte offsets):
//!
//! | bytes | part |
//! |---|---|
//! | 0..3 | flit header ([`FlitHeader`]) |
//! | 3..8 | five segment headers, one byte each ([`SegmentHeader`]) |
//! | 8..636 | payload: five segments of 128/128/128/124/120 bytes |
//! | 636..640 | CRC over bytes 0..636, big-endian ([`DlCrc`], default CRC-32/BZIP2) |
//!
//! [`DlFlit`] is the zero-copy view; [`Repr`] holds the parsed headers and builds command
//! flits (Ack / Replay Request) whose payload is all zero.

use super::crc::{self, DlCrc};
use super::dl_header::{CommandHeader, DlOp, FlitHeader, SegmentHeader, HEADER_LEN};
use super::{check_out, Error, Result};
use zerocopy::network_endian::U32;
use zerocopy::{FromBytes, Immutable, IntoBytes, KnownLayout, Unaligned};

/// Length of a DL flit in bytes.
pub const FLIT_LEN: usize = 640;
/// Number of segments (and segment headers) in a flit.
pub const SEGMENT_COUNT: usize = 5;
/// Payload bytes per segment.
pub const SEGMENT_SIZES: [usize; SEGMENT_COUNT] = [128, 128, 128, 124, 120];
/// Offset of each segment inside the payload.
pub const SEGMENT_OFFSETS: [usize; SEGMENT_COUNT] = [0, 128, 256, 384, 508];
/// Payload bytes per flit (the sum of [`SEGMENT_SIZES`]).
pub const PAYLOAD_LEN: usize = 628;
/// Offset of the segment headers in the flit.
pub const SEGMENT_HEADERS_OFFSET: usize = HEADER_LEN;
/// Offset of the payload in the flit.
pub const PAYLOAD_OFFSET: usize = HEADER_LEN + SEGMENT_COUNT;
/// Bytes covered by the CRC (everything before it).
pub const CRC_COVERED_LEN: usize = PAYLOAD_OFFSET + PAYLOAD_LEN;
/// Length of the CRC in bytes.
pub const CRC_LEN: usize = 4;

/// The flit's fixed layout.
#[derive(Debug, FromBytes, IntoBytes, KnownLayout, Immutable, Unaligned)]
#[repr(C)]
pub struct FlitLayout {
    /// Flit header.
    pub header: [u8; HEADER_LEN],
    /// Segment headers.
    pub segment_headers: [u8; SEGMENT_COUNT],
    /// Payload (all five segments).
    pub payload: [u8; PAYLOAD_LEN],
    /// CRC over everything before it.
    pub crc: U32,
}

const _: () = assert!(core::mem::size_of::<FlitLayout>() == FLIT_LEN);
const _: () = {
    // Each segment starts where the previous one ends; the last one ends the payload.
    let [o0, o1, o2, o3, o4] = SEGMENT_OFFSETS;
    let [s0, s1, s2, s3, s4] = SEGMENT_SIZES;
    assert!(o0 == 0 && o1 == o0 + s0 && o2 == o1 + s1 && o3 == o2 + s2 && o4 == o3 + s3);
    assert!(o4 + s4 == PAYLOAD_LEN);
};
const _: () = assert!(CRC_COVERED_LEN + CRC_LEN == FLIT_LEN);

/// A zero-copy view of a DL flit.
///
/// After [`DlFlit::new_checked`] (or a successful [`DlFlit::check_len`]) no accessor can fail
/// for lack of bytes. On a short buffer wrapped with [`DlFlit::new_unchecked`] getters return
/// zero or empty values and setters do nothing; they never panic. Bytes beyond
/// [`FLIT_LEN`] are ignored.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DlFlit<T: AsRef<[u8]>> {
    buffer: T,
}

impl<T: AsRef<[u8]>> DlFlit<T> {
    /// Wrap a buffer without checking its length.
    pub const fn new_unchecked(buffer: T) -> DlFlit<T> {
        DlFlit { buffer }
    }

    /// Wrap a buffer after checking that it holds a whole flit.
    ///
    /// # Errors
    /// `Truncated` when the buffer is shorter than [`FLIT_LEN`].
    pub fn new_checked(buffer: T) -> Result<DlFlit<T>> {
        let f = Self::new_unchecked(buffer);
        f.check_len()?;
        Ok(f)
    }

    /// Check that the buffer holds a whole flit.
    ///
    /// # Errors
    /// `Truncated` when the buffer is shorter than [`FLIT_LEN`].
    pub fn check_len(&self) -> Result<()> {
        super::check_len(self.buffer.as_ref(), FLIT_LEN)
    }

    /// The underlying buffer.
    pub fn into_inner(self) -> T {
        self.buffer
    }

    /// Length of the underlying buffer.
    pub fn buffer_len(&self) -> usize {
        self.buffer.as_ref().len()
    }

    fn layout(&self) -> Option<&FlitLayout> {
        FlitLayout::ref_from_prefix(self.buffer.as_ref())
            .ok()
            .map(|(l, _)| l)
    }

    /// The raw flit header bytes.
    pub fn header_bytes(&self) -> [u8; HEADER_LEN] {
        self.layout().map_or([0; HEADER_LEN], |l| l.header)
    }

    /// The parsed flit header.
    ///
    /// # Errors
    /// As [`FlitHeader::parse`].
    pub fn flit_header(&self) -> Result<FlitHeader> {
        self.check_len()?;
        FlitHeader::parse(&self.header_bytes())
    }

    /// The raw segment header bytes.
    pub fn segment_header_bytes(&self) -> [u8; SEGMENT_COUNT] {
        self.layout()
            .map_or([0; SEGMENT_COUNT], |l| l.segment_headers)
    }

    /// The parsed header of segment `i` (0..5).
    ///
    /// # Errors
    /// `FieldRange` for a bad index; as [`SegmentHeader::parse`].
    pub fn segment_header(&self, i: usize) -> Result<SegmentHeader> {
        self.check_len()?;
        let b = self.segment_header_bytes();
        let byte = b.get(i).ok_or(Error::FieldRange("segment index"))?;
        SegmentHeader::parse(core::slice::from_ref(byte))
    }

    /// The whole payload ([`PAYLOAD_LEN`] bytes; empty on a short buffer).
    pub fn payload(&self) -> &[u8] {
        self.layout().map_or(&[], |l| l.payload.as_slice())
    }

    /// The payload bytes of segment `i`, or `None` for a bad index or a short buffer.
    pub fn segment(&self, i: usize) -> Option<&[u8]> {
        let (off, size) = segment_range(i)?;
        self.payload().get(off..off.checked_add(size)?)
    }

    /// The CRC the flit carries.
    pub fn crc(&self) -> u32 {
        self.layout().map_or(0, |l| l.crc.get())
    }

    /// The CRC of the first [`CRC_COVERED_LEN`] bytes under `alg` ([`DlCrc::checksum_flit`]:
    /// trailing zero padding may be skipped, same value).
    pub fn compute_crc(&self, alg: DlCrc) -> u32 {
        alg.checksum_flit(
            self.buffer
                .as_ref()
                .get(..CRC_COVERED_LEN)
                .unwrap_or_default(),
        )
    }

    /// Check the carried CRC.
    ///
    /// # Errors
    /// `Truncated`, or `BadCrc { carried, computed }`.
    ///
    /// # Fuzzing
    /// Under `cfg(fuzzing)` every CRC is accepted ([`crc::verify`]).
    pub fn verify_crc(&self, alg: DlCrc) -> Result<()> {
        self.check_len()?;
        let carried = self.crc();
        let computed = self.compute_crc(alg);
        if crc::verify(carried, computed) {
            Ok(())
        } else {
            Err(Error::BadCrc { carried, computed })
        }
    }
}

impl<T: AsRef<[u8]> + AsMut<[u8]>> DlFlit<T> {
    fn layout_mut(&mut self) -> Option<&mut FlitLayout> {
        FlitLayout::mut_from_prefix(self.buffer.as_mut())
            .ok()
            .map(|(l, _)| l)
    }

    /// Set the raw flit header bytes.
    pub fn set_header_bytes(&mut self, header: [u8; HEADER_LEN]) {
        if let Some(l) = self.layout_mut() {
            l.header = header;
        }
    }

    /// Emit a flit header.
    ///
    /// # Errors
    /// `BufferTooSmall`, or `FieldRange` from [`FlitHeader::emit`].
    pub fn set_flit_header(&mut self, header: &FlitHeader) -> Result<()> {
        let mut b = [0u8; HEADER_LEN];
        header.emit(&mut b)?;
        check_out(self.buffer.as_ref(), FLIT_LEN)?;
        self.set_header_bytes(b);
        Ok(())
    }

    /// Set the raw segment header bytes.
    pub fn set_segment_header_bytes(&mut self, headers: [u8; SEGMENT_COUNT]) {
        if let Some(l) = self.layout_mut() {
            l.segment_headers = headers;
        }
    }

    /// Emit the header of segment `i`.
    ///
    /// # Errors
    /// `BufferTooSmall`, `FieldRange` for a bad index or field.
    pub fn set_segment_header(&mut self, i: usize, header: &SegmentHeader) -> Result<()> {
        check_out(self.buffer.as_ref(), FLIT_LEN)?;
        let mut b = self.segment_header_bytes();
        let slot = b.get_mut(i).ok_or(Error::FieldRange("segment index"))?;
        header.emit(core::slice::from_mut(slot))?;
        self.set_segment_header_bytes(b);
        Ok(())
    }

    /// The whole payload, mutable (empty on a short buffer).
    pub fn payload_mut(&mut self) -> &mut [u8] {
        self.layout_mut()
            .map_or(&mut [], |l| l.payload.as_mut_slice())
    }

    /// The payload bytes of segment `i`, mutable.
    pub fn segment_mut(&mut self, i: usize) -> Option<&mut [u8]> {
        let (off, size) = segment_range(i)?;
        self.payload_mut().get_mut(off..off.checked_add(size)?)
    }

    /// Set the carried CRC.
    pub fn set_crc(&mut self, crc: u32) {
        if let Some(l) = self.layout_mut() {
            l.crc = U32::new(crc);
        }
    }

    /// Compute the CRC under `alg` and store it.
    pub fn fill_crc(&mut self, alg: DlCrc) {
        let crc = self.compute_crc(alg);
        self.set_crc(crc);
    }
}

/// `(offset in payload, size)` of segment `i`.
pub fn segment_range(i: usize) -> Option<(usize, usize)> {
    Some((*SEGMENT_OFFSETS.get(i)?, *SEGMENT_SIZES.get(i)?))
}

/// The headers of a DL flit (the payload stays in the view).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct Repr {
    /// Flit header.
    pub header: FlitHeader,
    /// Segment headers.
    pub segment_headers: [SegmentHeader; SEGMENT_COUNT],
}

impl Repr {
    /// Verify the CRC and parse the headers.
    ///
    /// # Errors
    /// `Truncated`, `BadCrc`, or a header's `Reserved`.
    pub fn parse<T: AsRef<[u8]>>(flit: &DlFlit<T>, alg: DlCrc) -> Result<Repr> {
        flit.verify_crc(alg)?;
        let header = flit.flit_header()?;
        let mut segment_headers = [SegmentHeader::default(); SEGMENT_COUNT];
        for (i, h) in segment_headers.iter_mut().enumerate() {
            *h = flit.segment_header(i)?;
        }
        Ok(Repr {
            header,
            segment_headers,
        })
    }

    /// Length of the emitted flit.
    pub const fn buffer_len(&self) -> usize {
        FLIT_LEN
    }

    /// A command flit (Ack or Replay Request) with zero segment headers.
    pub fn command(op: DlOp, ack_req_seq: u16, flit_seq_lo: u8) -> Repr {
        Repr {
            header: FlitHeader::Command(CommandHeader {
                op: op.raw(),
                payload: false,
                ack_req_seq,
                flit_seq_lo,
            }),
            segment_headers: [SegmentHeader::default(); SEGMENT_COUNT],
        }
    }

    /// Write the headers, then the CRC under `alg`. Write the payload first.
    ///
    /// # Errors
    /// `BufferTooSmall` or `FieldRange`.
    pub fn emit<T: AsRef<[u8]> + AsMut<[u8]>>(
        &self,
        flit: &mut DlFlit<T>,
        alg: DlCrc,
    ) -> Result<()> {
        flit.set_flit_header(&self.header)?;
        for (i, h) in self.segment_headers.iter().enumerate() {
            flit.set_segment_header(i, h)?;
        }
        flit.fill_crc(alg);
        Ok(())
    }

    /// Emit a whole flit with an all-zero payload (a command flit) into `buf`.
    ///
    /// # Errors
    /// `BufferTooSmall` or `FieldRange`.
    pub fn emit_zero_payload(&self, buf: &mut [u8], alg: DlCrc) -> Result<usize> {
        check_out(buf, FLIT_LEN)?;
        let mut flit = DlFlit::new_unchecked(buf);
        flit.payload_mut().fill(0);
        self.emit(&mut flit, alg)?;
        Ok(FLIT_LEN)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// `dl_command_flit` vectors: (op, ack_req_seq, flit_seq_lo, header, CRC).
    const COMMAND_VECTORS: [(DlOp, u16, u8, [u8; 3], u32); 5] = [
        (DlOp::Ack, 1, 0, [0x40, 0x08, 0x00], 0x933a_55f5),
        (DlOp::Ack, 291, 3, [0x49, 0x1b, 0x00], 0x8d69_3b77),
        (DlOp::Ack, 511, 5, [0x4f, 0xfd, 0x00], 0x2a3f_43af),
        (DlOp::ReplayRequest, 341, 2, [0x6a, 0xaa, 0x00], 0xb9a9_6a25),
        (DlOp::ReplayRequest, 0, 6, [0x60, 0x06, 0x00], 0x5444_0efd),
    ];

    #[test]
    fn test_command_flit_vectors() {
        for (op, seq, lo, header, crc) in COMMAND_VECTORS {
            let mut want = [0u8; FLIT_LEN];
            want[..3].copy_from_slice(&header);
            want[636..].copy_from_slice(&crc.to_be_bytes());
            let mut buf = [0xa5u8; FLIT_LEN];
            let repr = Repr::command(op, seq, lo);
            assert_eq!(repr.emit_zero_payload(&mut buf, DlCrc::Bzip2), Ok(FLIT_LEN));
            assert_eq!(buf, want, "{op:?} {seq}");
            let flit = DlFlit::new_checked(&buf[..]).unwrap();
            assert_eq!(Repr::parse(&flit, DlCrc::Bzip2), Ok(repr));
            assert_eq!(flit.flit_header().unwrap().op(), op);
        }
    }

    #[test]
    fn test_crc_vectors() {
        // `crc32` vectors: ascii 123456789, empty, zeros_636 and ramp_mod256_636.
        assert_eq!(DlCrc::Bzip2.checksum(b"123456789"), 0xfc89_1918);
        assert_eq!(DlCrc::Bzip2.checksum(&[]), 0);
        let zeros = [0u8; CRC_COVERED_LEN];
        assert_eq!(DlCrc::Bzip2.checksum(&zeros), 0x612e_ff3a);
        let ramp: [u8; CRC_COVERED_LEN] = core::array::from_fn(|i| i as u8);
        assert_eq!(DlCrc::Bzip2.checksum(&ramp), 0x16af_c1a4);
        let mut buf = [0u8; FLIT_LEN];
        buf[..CRC_COVERED_LEN].copy_from_slice(&ramp);
        let mut f = DlFlit::new_checked(&mut buf[..]).unwrap();
        f.fill_crc(DlCrc::Bzip2);
        assert_eq!(f.crc(), 0x16af_c1a4);
        assert_eq!(&buf[636..], &[0x16, 0xaf, 0xc1, 0xa4]);
    }

    #[test]
    fn test_construct_and_deconstruct() {
        let mut buf = [0u8; FLIT_LEN];
        let mut f = DlFlit::new_unchecked(&mut buf[..]);
        f.set_flit_header(&FlitHeader::parse(&[0x11, 0xff, 0x00]).unwrap())
            .unwrap();
        let sh = SegmentHeader {
            tl_flit0: true,
            dl_alt_sector: true,
            ..Default::default()
        };
        f.set_segment_header(2, &sh).unwrap();
        for i in 0..SEGMENT_COUNT {
            f.segment_mut(i).unwrap().fill(i as u8 + 1);
        }
        f.fill_crc(DlCrc::IsoHdlc);
        assert_eq!(buf[0..3], [0x11, 0xff, 0x00]);
        assert_eq!(buf[3..8], [0, 0, 0x11, 0, 0]);
        assert_eq!(buf[8], 1);
        assert_eq!(buf[8 + 128], 2);
        assert_eq!(buf[8 + 384 + 123], 4);
        assert_eq!(buf[8 + 508], 5);
        assert_eq!(buf[635], 5);
        let f = DlFlit::new_checked(&buf[..]).unwrap();
        assert_eq!(f.segment_header(2), Ok(sh));
        assert_eq!(f.segment(3).unwrap().len(), 124);
        assert_eq!(f.segment(4).unwrap().len(), 120);
        assert!(f.segment(5).is_none());
        assert_eq!(f.segment_header(5), Err(Error::FieldRange("segment index")));
        assert_eq!(f.payload().len(), PAYLOAD_LEN);
        f.verify_crc(DlCrc::IsoHdlc).unwrap();
        assert!(f.verify_crc(DlCrc::Bzip2).is_err());
        let r = Repr::parse(&f, DlCrc::IsoHdlc).unwrap();
        assert_eq!(r.segment_headers[2], sh);
        assert_eq!(r.buffer_len(), FLIT_LEN);
    }

    #[test]
    fn test_bad_crc() {
        let mut buf = [0u8; FLIT_LEN];
        Repr::command(DlOp::Ack, 1, 0)
            .emit_zero_payload(&mut buf, DlCrc::Bzip2)
            .unwrap();
        buf[100] ^= 0x10;
        let f = DlFlit::new_checked(&buf[..]).unwrap();
        let computed = f.compute_crc(DlCrc::Bzip2);
        assert_eq!(
            f.verify_crc(DlCrc::Bzip2),
            Err(Error::BadCrc {
                carried: 0x933a_55f5,
                computed
            })
        );
        assert!(matches!(
            Repr::parse(&f, DlCrc::Bzip2),
            Err(Error::BadCrc { .. })
        ));
    }

    #[test]
    fn test_truncated() {
        let buf = [0u8; FLIT_LEN - 1];
        assert_eq!(
            DlFlit::new_checked(&buf[..]),
            Err(Error::Truncated {
                needed: FLIT_LEN,
                got: FLIT_LEN - 1
            })
        );
        // A short unchecked view never panics.
        let f = DlFlit::new_unchecked(&buf[..10]);
        assert_eq!(f.payload(), &[] as &[u8]);
        assert_eq!(f.crc(), 0);
        assert!(f.segment(0).is_none());
        assert!(f.verify_crc(DlCrc::Bzip2).is_err());
        assert!(f.flit_header().is_err());
        let mut short = [0u8; 10];
        let mut f = DlFlit::new_unchecked(&mut short[..]);
        f.set_crc(1);
        f.fill_crc(DlCrc::Bzip2);
        assert!(f.payload_mut().is_empty());
        assert!(f.set_segment_header(0, &SegmentHeader::default()).is_err());
        assert_eq!(
            Repr::command(DlOp::Ack, 1, 0).emit_zero_payload(&mut [0u8; 639], DlCrc::Bzip2),
            Err(Error::BufferTooSmall {
                needed: FLIT_LEN,
                got: 639
            })
        );
    }

    #[test]
    fn test_reserved_header_in_repr() {
        let mut buf = [0u8; FLIT_LEN];
        buf[3] = 0x02; // segment header rsvd bit
        let mut f = DlFlit::new_unchecked(&mut buf[..]);
        f.fill_crc(DlCrc::Bzip2);
        assert_eq!(
            Repr::parse(&f, DlCrc::Bzip2),
            Err(Error::Reserved("segment header rsvd"))
        );
    }
}
