//! How retry reads and writes a whole DL flit, through the [`DlFlit`] view.
//!
//! Retry owns the flit header (sequence number, op) and the CRC; everything between them
//! (segment headers and payload) is opaque to it and replayed unchanged.

use crate::wire::crc::DlCrc;
use crate::wire::dl_flit::{DlFlit, FLIT_LEN};
use crate::wire::{DlFlitHeader, Error, Result};

/// A whole DL flit.
pub(crate) type Flit = [u8; FLIT_LEN];

/// Write a flit into `buf`: `content` (zeros when `None`) with `header` and the CRC.
pub(crate) fn emit(
    buf: &mut [u8],
    header: &DlFlitHeader,
    content: Option<&Flit>,
    crc_alg: DlCrc,
) -> Result<usize> {
    let got = buf.len();
    let out = buf.get_mut(..FLIT_LEN).ok_or(Error::BufferTooSmall {
        needed: FLIT_LEN,
        got,
    })?;
    match content {
        Some(f) => out.copy_from_slice(f),
        None => out.fill(0),
    }
    let mut view = DlFlit::new_unchecked(out);
    view.set_flit_header(header)?;
    view.fill_crc(crc_alg);
    Ok(FLIT_LEN)
}

/// Check length and CRC and parse the header of a received flit.
///
/// # Errors
/// `Truncated` (shorter than a flit), `LengthMismatch` (longer), `BadCrc`, or the header's
/// own errors (`Reserved`).
pub(crate) fn parse(bytes: &[u8], crc_alg: DlCrc) -> Result<(DlFlitHeader, &Flit)> {
    let view = DlFlit::new_checked(bytes)?;
    let flit: &Flit = bytes
        .try_into()
        .map_err(|_| Error::LengthMismatch("DL flit is not 640 bytes"))?;
    view.verify_crc(crc_alg)?;
    Ok((view.flit_header()?, flit))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::wire::dl_flit::CRC_COVERED_LEN;
    use crate::wire::DlExplicitHeader;

    #[test]
    fn test_round_trip_and_bad_crc() {
        let h = DlFlitHeader::Explicit(DlExplicitHeader {
            op: 0,
            payload: true,
            flit_seq_no: 511,
        });
        let mut content = [0u8; FLIT_LEN];
        content[..3].copy_from_slice(&[0xee; 3]); // overwritten
        content[3] = 0xaa;
        content[CRC_COVERED_LEN - 1] = 0x55;
        let mut buf = [0u8; FLIT_LEN];
        assert_eq!(
            emit(&mut buf, &h, Some(&content), DlCrc::Bzip2),
            Ok(FLIT_LEN)
        );
        assert_eq!(&buf[..3], &[0x11, 0xff, 0x00]);
        let (ph, pf) = parse(&buf, DlCrc::Bzip2).unwrap();
        assert_eq!(ph, h);
        assert_eq!(pf[3..CRC_COVERED_LEN], content[3..CRC_COVERED_LEN]);
        let crc = u32::from_be_bytes(buf[CRC_COVERED_LEN..].try_into().unwrap());
        assert_eq!(crc, DlCrc::Bzip2.checksum(&buf[..CRC_COVERED_LEN]));
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
