//! The Ethernet profile's CBFC credit-update frame (`spec-notes/link.md#cbfc-frame`),
//! podlink's own format: the reliability header has no room for credits.
//!
//! ```text
//!  0      6      12   14        15      16                 16+5n      (len-4)
//! +------+------+----+---------+-------+------------------+---------+-----+
//! | dst  | src  | ET | ver:4   | count | count × (vc:8,   | zero    | FCS |
//! | MAC  | MAC  |    | rsvd:4  | 1..=32| limit:32 BE)     | pad     | LE  |
//! +------+------+----+---------+-------+------------------+---------+-----+
//! ```
//!
//! EtherType [`ETHERTYPE`] = 0x88B6 (the second IEEE local experimental value). Each entry is a
//! VC's cumulative credit limit (`flow::cbfc`). Padded to Ethernet's 60-byte minimum; the FCS is
//! CRC-32/ISO-HDLC stored little-endian, as for data frames.

use super::crc::{self, CRC32_ISO_HDLC};
use super::eth::{EthAddr, ETH_HEADER_LEN, FCS_LEN, MIN_LEN_BEFORE_FCS};
use super::{check_len, check_out, Error, Result};

/// EtherType of CBFC frames.
pub const ETHERTYPE: u16 = 0x88b6;
/// Header version.
pub const VERSION: u8 = 1;
/// Most entries in one frame.
pub const MAX_ENTRIES: usize = 32;
/// Bytes per entry.
pub const ENTRY_LEN: usize = 5;
const BODY_OFFSET: usize = ETH_HEADER_LEN + 2;

/// One VC's cumulative credit limit.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub struct CreditEntry {
    /// VC (class) index.
    pub vc: u8,
    /// Cumulative credit limit.
    pub limit: u32,
}

/// Length, FCS included, of a frame with `n` entries.
pub const fn frame_len(n: usize) -> usize {
    let body = BODY_OFFSET + n * ENTRY_LEN;
    let body = if body < MIN_LEN_BEFORE_FCS {
        MIN_LEN_BEFORE_FCS
    } else {
        body
    };
    body + FCS_LEN
}

/// Whether `frame` is a CBFC frame (by EtherType; nothing else is checked).
pub fn is_cbfc(frame: &[u8]) -> bool {
    frame
        .get(12..14)
        .is_some_and(|t| t == ETHERTYPE.to_be_bytes())
}

/// Emit a CBFC frame from `src` to `dst` carrying `entries` (1..=32); returns its length.
///
/// # Errors
/// `LengthMismatch` for 0 or more than 32 entries; `BufferTooSmall`.
pub fn emit(buf: &mut [u8], dst: EthAddr, src: EthAddr, entries: &[CreditEntry]) -> Result<usize> {
    if entries.is_empty() || entries.len() > MAX_ENTRIES {
        return Err(Error::LengthMismatch("CBFC frame needs 1..=32 entries"));
    }
    let len = frame_len(entries.len());
    check_out(buf, len)?;
    let got = buf.len();
    let small = Error::BufferTooSmall { needed: len, got };
    let frame = buf.get_mut(..len).ok_or(small)?;
    frame.fill(0);
    let (body, fcs) = frame
        .split_at_mut_checked(len.saturating_sub(FCS_LEN))
        .ok_or(small)?;
    let (hdr, rest) = body.split_at_mut_checked(BODY_OFFSET).ok_or(small)?;
    let (macs, tail) = hdr.split_at_mut(12);
    let (d, s) = macs.split_at_mut(6);
    d.copy_from_slice(&dst.0);
    s.copy_from_slice(&src.0);
    let [t0, t1, ver, count] = tail else {
        return Err(small);
    };
    [*t0, *t1] = ETHERTYPE.to_be_bytes();
    *ver = VERSION << 4;
    *count = u8::try_from(entries.len()).unwrap_or(0);
    for (e, out) in entries.iter().zip(rest.chunks_exact_mut(ENTRY_LEN)) {
        let (v, l) = out.split_at_mut(1);
        v.copy_from_slice(&[e.vc]);
        l.copy_from_slice(&e.limit.to_be_bytes());
    }
    fcs.copy_from_slice(&CRC32_ISO_HDLC.checksum(body).to_le_bytes());
    Ok(len)
}

/// A parsed CBFC frame: addresses and the entries (borrowed).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct CbfcFrame<'a> {
    /// Destination MAC.
    pub dst: EthAddr,
    /// Source MAC.
    pub src: EthAddr,
    entries: &'a [u8],
}

impl CbfcFrame<'_> {
    /// The entries.
    pub fn entries(&self) -> impl Iterator<Item = CreditEntry> + '_ {
        self.entries.chunks_exact(ENTRY_LEN).map(|c| CreditEntry {
            vc: c.first().copied().unwrap_or(0),
            limit: c
                .get(1..5)
                .and_then(|b| b.try_into().ok())
                .map_or(0, u32::from_be_bytes),
        })
    }
}

/// Parse a received CBFC frame.
///
/// # Errors
/// `Truncated`, `LengthMismatch` (length disagrees with the count, or a count of 0 / above
/// 32), `BadCrc`, `BadEtherType`, `BadVersion`, `Reserved` (reserved bits or a non-zero pad).
///
/// # Fuzzing
/// Under `cfg(fuzzing)` the FCS is not checked.
pub fn parse(frame: &[u8]) -> Result<CbfcFrame<'_>> {
    check_len(frame, frame_len(1))?;
    let (body, fcs) = frame
        .split_at_checked(frame.len().saturating_sub(FCS_LEN))
        .ok_or(Error::Truncated {
            needed: frame_len(1),
            got: frame.len(),
        })?;
    let carried = fcs
        .try_into()
        .map(u32::from_le_bytes)
        .map_err(|_| Error::LengthMismatch("CBFC FCS"))?;
    let computed = CRC32_ISO_HDLC.checksum(body);
    if !crc::verify(carried, computed) {
        return Err(Error::BadCrc { carried, computed });
    }
    let b = |i: usize| body.get(i).copied().unwrap_or(0);
    let ethertype = u16::from_be_bytes([b(12), b(13)]);
    if ethertype != ETHERTYPE {
        return Err(Error::BadEtherType(ethertype));
    }
    if b(14) >> 4 != VERSION {
        return Err(Error::BadVersion(b(14) >> 4));
    }
    if b(14) & 0xf != 0 {
        return Err(Error::Reserved("CBFC header rsvd"));
    }
    let n = usize::from(b(15));
    if n == 0 || n > MAX_ENTRIES || frame.len() != frame_len(n) {
        return Err(Error::LengthMismatch("CBFC entry count"));
    }
    let end = BODY_OFFSET.saturating_add(n.saturating_mul(ENTRY_LEN));
    let entries = body.get(BODY_OFFSET..end).unwrap_or_default();
    if body.get(end..).unwrap_or_default().iter().any(|&x| x != 0) {
        return Err(Error::Reserved("CBFC pad"));
    }
    let mac = |r: core::ops::Range<usize>| {
        EthAddr(
            body.get(r)
                .and_then(|m| m.try_into().ok())
                .unwrap_or([0; 6]),
        )
    };
    Ok(CbfcFrame {
        dst: mac(0..6),
        src: mac(6..12),
        entries,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    const A: EthAddr = EthAddr([0x02, 0, 0, 0, 0, 1]);
    const B: EthAddr = EthAddr([0x02, 0, 0, 0, 0, 2]);

    #[test]
    fn test_construct_and_parse() {
        let entries = [
            CreditEntry {
                vc: 0,
                limit: 0x0102_0304,
            },
            CreditEntry {
                vc: 3,
                limit: u32::MAX,
            },
        ];
        let mut buf = [0u8; 128];
        let n = emit(&mut buf, A, B, &entries).unwrap();
        assert_eq!(n, 64);
        assert!(is_cbfc(&buf[..n]));
        assert_eq!(&buf[12..21], &[0x88, 0xb6, 0x10, 2, 0, 1, 2, 3, 4]);
        let f = parse(&buf[..n]).unwrap();
        assert_eq!((f.dst, f.src), (A, B));
        assert_eq!(f.entries().collect::<std::vec::Vec<_>>(), entries);
        // 32 entries: longer than the minimum frame.
        let many = [CreditEntry { vc: 1, limit: 7 }; 32];
        let n = emit(&mut buf[..], A, B, &many);
        assert!(matches!(n, Err(Error::BufferTooSmall { needed: 180, .. })));
        let mut big = [0u8; 200];
        let n = emit(&mut big, A, B, &many).unwrap();
        assert_eq!(parse(&big[..n]).unwrap().entries().count(), 32);
    }

    #[test]
    fn test_errors() {
        let mut buf = [0u8; 64];
        assert!(emit(&mut buf, A, B, &[]).is_err());
        let n = emit(&mut buf, A, B, &[CreditEntry::default()]).unwrap();
        assert!(matches!(parse(&buf[..n - 1]), Err(Error::Truncated { .. })));
        let mut bad = buf;
        bad[30] = 1;
        assert!(matches!(parse(&bad), Err(Error::BadCrc { .. })));
        let fix = |f: &mut [u8; 64]| {
            let c = CRC32_ISO_HDLC.checksum(&f[..60]).to_le_bytes();
            f[60..].copy_from_slice(&c);
        };
        let mut f = buf;
        f[30] = 1;
        fix(&mut f);
        assert_eq!(parse(&f), Err(Error::Reserved("CBFC pad")));
        let mut f = buf;
        f[14] = 0x20;
        fix(&mut f);
        assert_eq!(parse(&f), Err(Error::BadVersion(2)));
        let mut f = buf;
        f[14] = 0x11;
        fix(&mut f);
        assert_eq!(parse(&f), Err(Error::Reserved("CBFC header rsvd")));
        let mut f = buf;
        f[15] = 0;
        fix(&mut f);
        assert!(matches!(parse(&f), Err(Error::LengthMismatch(_))));
        let mut f = buf;
        f[13] = 0xb5;
        fix(&mut f);
        assert_eq!(parse(&f), Err(Error::BadEtherType(0x88b5)));
    }
}
