//! The 640 B DL flit as the retry machine sees it: header (3) ‖ body (633) ‖ CRC (4).
//!
//! The body is the five segment headers and the 628 B payload, opaque to retry.
//! This is the only place that knows the offsets.
//! FIXME(dl): switch to the `wire::dl_flit` view once branch `dl` is merged.

use crate::wire::crc::{self, DlCrc};
use crate::wire::{DlFlitHeader, Error, Result};

/// Length of a DL flit in bytes.
pub const FLIT_LEN: usize = 640;
/// Length of the flit header in bytes.
pub(crate) const HEADER_LEN: usize = crate::wire::dl_header::HEADER_LEN;
/// Length of the part of a flit that retry stores and replays unchanged: the five segment
/// headers and the 628 B payload.
pub const BODY_LEN: usize = 633;
/// Offset of the big-endian CRC-32 (it covers every byte before it).
pub(crate) const CRC_OFFSET: usize = HEADER_LEN + BODY_LEN;

const ZERO_BODY: [u8; BODY_LEN] = [0; BODY_LEN];

/// Write a whole flit: `header`, `body` (zeros when `None`) and the CRC.
pub(crate) fn emit(
    buf: &mut [u8],
    header: &DlFlitHeader,
    body: Option<&[u8; BODY_LEN]>,
    crc_alg: DlCrc,
) -> Result<usize> {
    crate::wire::check_out(buf, FLIT_LEN)?;
    let (flit, _) = buf
        .split_at_mut_checked(FLIT_LEN)
        .ok_or(Error::BufferTooSmall {
            needed: FLIT_LEN,
            got: 0,
        })?;
    let (covered, crc_out) = flit.split_at_mut(CRC_OFFSET);
    let (hdr, body_out) = covered.split_at_mut(HEADER_LEN);
    header.emit(hdr)?;
    body_out.copy_from_slice(body.unwrap_or(&ZERO_BODY));
    let sum = crc_alg.checksum(covered);
    crc_out.copy_from_slice(&sum.to_be_bytes());
    Ok(FLIT_LEN)
}

/// Check the CRC and parse the header of a whole flit; returns the header and the body.
///
/// # Errors
/// `Truncated` (shorter than a flit), `LengthMismatch` (longer), `BadCrc`, or the header's
/// own errors (`Reserved`).
pub(crate) fn parse(flit: &[u8], crc_alg: DlCrc) -> Result<(DlFlitHeader, &[u8; BODY_LEN])> {
    crate::wire::check_len(flit, FLIT_LEN)?;
    if flit.len() != FLIT_LEN {
        return Err(Error::LengthMismatch("DL flit is not 640 bytes"));
    }
    let (covered, crc_in) = flit.split_at(CRC_OFFSET);
    let carried = u32::from_be_bytes(crc_in.try_into().map_err(|_| Error::Truncated {
        needed: FLIT_LEN,
        got: flit.len(),
    })?);
    let computed = crc_alg.checksum(covered);
    if !crc::verify(carried, computed) {
        return Err(Error::BadCrc { carried, computed });
    }
    let (hdr, body) = covered.split_at(HEADER_LEN);
    let header = DlFlitHeader::parse(hdr)?;
    let body: &[u8; BODY_LEN] = body.try_into().map_err(|_| Error::Truncated {
        needed: FLIT_LEN,
        got: flit.len(),
    })?;
    Ok((header, body))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::wire::DlExplicitHeader;

    #[test]
    fn test_round_trip_and_bad_crc() {
        let h = DlFlitHeader::Explicit(DlExplicitHeader {
            op: 0,
            payload: true,
            flit_seq_no: 511,
        });
        let mut body = [0u8; BODY_LEN];
        body[0] = 0xaa;
        body[BODY_LEN - 1] = 0x55;
        let mut buf = [0u8; FLIT_LEN];
        assert_eq!(emit(&mut buf, &h, Some(&body), DlCrc::Bzip2), Ok(FLIT_LEN));
        assert_eq!(&buf[..3], &[0x11, 0xff, 0x00]);
        let (ph, pb) = parse(&buf, DlCrc::Bzip2).unwrap();
        assert_eq!(ph, h);
        assert_eq!(pb, &body);
        let crc = u32::from_be_bytes(buf[CRC_OFFSET..].try_into().unwrap());
        assert_eq!(crc, DlCrc::Bzip2.checksum(&buf[..CRC_OFFSET]));
        buf[100] ^= 4;
        assert!(matches!(
            parse(&buf, DlCrc::Bzip2),
            Err(Error::BadCrc { .. })
        ));
    }

    #[test]
    fn test_truncated_and_long() {
        let buf = [0u8; FLIT_LEN + 1];
        assert_eq!(
            parse(&buf[..10], DlCrc::Bzip2),
            Err(Error::Truncated {
                needed: FLIT_LEN,
                got: 10
            })
        );
        assert!(matches!(
            parse(&buf, DlCrc::Bzip2),
            Err(Error::LengthMismatch(_))
        ));
        let h = DlFlitHeader::Explicit(DlExplicitHeader::default());
        assert_eq!(
            emit(&mut [0u8; 639], &h, None, DlCrc::Bzip2),
            Err(Error::BufferTooSmall {
                needed: FLIT_LEN,
                got: 639
            })
        );
    }
}
