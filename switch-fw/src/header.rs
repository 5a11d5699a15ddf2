//! The switch's view of a frame: what routing, isolation and ordering need from a TL
//! control field (`spec-notes/switch.md#header`).
//!
//! The switch routes by `dstaccid` and checks `srcaccid`; requests also give the 256 B
//! region their address falls in, for the ordering rule. Parsing is the protocol crate's
//! ([`TlField::parse`]); nothing here re-implements a wire format.

use podlink_protocol::wire::tl_flit::DataShape;
use podlink_protocol::wire::{self, AccelId, TlField, Vc};

/// How the switch treats a frame class.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum FrameKind {
    /// A request: routed, and kept in order per (source, destination, VC, 256 B region).
    Request,
    /// A response: routed; responses carry no address and have no ordering rule here.
    Response,
    /// A link-local field (flow control / NOP): consumed by the link, never forwarded.
    LinkLocal,
}

/// Routing-relevant fields of one frame.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct Header {
    /// Frame class.
    pub kind: FrameKind,
    /// Source accelerator, `None` when the field does not carry one (compressed responses).
    pub src: Option<AccelId>,
    /// Destination accelerator.
    pub dst: AccelId,
    /// Virtual channel.
    pub vc: Vc,
    /// Key of the 256 B address region of a request (0 for other kinds); see [`Header::from_tl`].
    pub region: u32,
    /// 64 B data beats that follow the field: the data credits it needs on each hop (the
    /// protocol's credit classes: one command credit plus one data credit per beat).
    pub beats: u8,
    /// A response that is the last of its request (the ordering pins count answered
    /// requests by it); false for other kinds.
    pub last: bool,
}

impl Header {
    /// A request header (`addr` is the byte address; only its 256 B region matters).
    pub const fn request(src: AccelId, dst: AccelId, vc: Vc, addr: u64) -> Header {
        Header {
            kind: FrameKind::Request,
            src: Some(src),
            dst,
            vc,
            region: fold_region(addr >> 8),
            beats: 0,
            last: false,
        }
    }

    /// A response header (the last, or only, response of its request).
    pub const fn response(src: Option<AccelId>, dst: AccelId, vc: Vc) -> Header {
        Header {
            kind: FrameKind::Response,
            src,
            dst,
            vc,
            region: 0,
            beats: 0,
            last: true,
        }
    }

    /// The same response header with its `last` flag set to `last`.
    pub const fn with_last(mut self, last: bool) -> Header {
        self.last = last;
        self
    }

    /// The same header with `beats` data beats (data credits) following the field.
    pub const fn with_beats(mut self, beats: u8) -> Header {
        self.beats = beats;
        self
    }

    /// The header of a parsed TL control field.
    ///
    /// Region key: an uncompressed request carries address bits 56..2, so its region is bits
    /// 56..8, folded to 32 bits. A compressed request carries only bits 19..6 and the
    /// address-compression cache way; the way names the 1 MB region, so the key is
    /// (way, bits 19..8). That key is unique among the regions cached at one time, which is
    /// all the ordering pin needs (`spec-notes/switch.md#deviations-and-guesses`).
    pub fn from_tl(f: &TlField) -> Header {
        let beats = DataShape::of(f).map_or(0, |s| u8::try_from(s.beats).unwrap_or(u8::MAX));
        let h = match f {
            TlField::UncompressedRequest(r) => Header {
                kind: FrameKind::Request,
                src: Some(r.srcaccid),
                dst: r.dstaccid,
                vc: r.vchan,
                // addr holds byte-address bits 56..2; >> 6 leaves bits 56..8.
                region: fold_region(r.addr >> 6),
                beats: 0,
                last: false,
            },
            TlField::CompressedRequest(r) => Header {
                kind: FrameKind::Request,
                src: Some(r.srcaccid),
                dst: r.dstaccid,
                vc: r.vchan,
                // addr holds bits 19..6; >> 2 leaves bits 19..8 (12 bits). Way above them.
                region: (u32::from(r.cway & 3) << 12) | (u32::from(r.addr >> 2) & 0x0fff),
                beats: 0,
                last: false,
            },
            TlField::UncompressedResponse(r) => {
                Header::response(Some(r.srcaccid), r.dstaccid, r.vchan).with_last(r.last)
            }
            TlField::CompressedReadResponse(r) => {
                Header::response(None, r.dstaccid, r.vchan).with_last(r.last)
            }
            // One field answers the whole request (a write, or a multi-beat read).
            TlField::CompressedWriteResponse(r) => Header::response(None, r.dstaccid, r.vchan),
            TlField::FlowControl(_) => Header {
                kind: FrameKind::LinkLocal,
                src: None,
                dst: AccelId::from_bits_truncate(0),
                vc: Vc::from_bits_truncate(0),
                region: 0,
                beats: 0,
                last: false,
            },
        };
        h.with_beats(beats)
    }

    /// Parse the TL control field at the start of `buf` with the protocol crate and take its
    /// header.
    ///
    /// # Errors
    /// Whatever [`TlField::parse`] reports (`Truncated`, `UnknownFtype`, `Reserved`).
    pub fn parse(buf: &[u8]) -> wire::Result<Header> {
        TlField::parse(buf).map(|f| Header::from_tl(&f))
    }
}

/// Fold a region number (address bits 56..8, 49 bits) to 32 bits.
const fn fold_region(r: u64) -> u32 {
    (r as u32) ^ ((r >> 32) as u32)
}

#[cfg(test)]
mod tests {
    use super::*;
    use podlink_protocol::wire::{Opcode, TlCompressedRequest, TlUncompressedRequest};

    fn id(v: u16) -> AccelId {
        AccelId::new(v).unwrap()
    }

    #[test]
    fn test_uncompressed_request_region() {
        let r = TlUncompressedRequest {
            cmd: Opcode::Read,
            vchan: Vc::new(2).unwrap(),
            addr: 0x1234_5640 >> 2,
            srcaccid: id(3),
            dstaccid: id(9),
            ..Default::default()
        };
        let mut buf = [0u8; 16];
        TlField::UncompressedRequest(r).emit(&mut buf).unwrap();
        let h = Header::parse(&buf).unwrap();
        assert_eq!(
            h,
            Header::request(id(3), id(9), Vc::new(2).unwrap(), 0x1234_5640)
        );
        // Same 256 B region, same key; next region, different key.
        assert_eq!(
            h.region,
            Header::request(id(3), id(9), h.vc, 0x1234_56ff).region
        );
        assert_ne!(
            h.region,
            Header::request(id(3), id(9), h.vc, 0x1234_5700).region
        );
    }

    #[test]
    fn test_compressed_request_region() {
        let r = TlCompressedRequest {
            vchan: Vc::new(1).unwrap(),
            addr: 0x3fff,
            cway: 2,
            srcaccid: id(1),
            dstaccid: id(2),
            ..Default::default()
        };
        let h = Header::from_tl(&TlField::CompressedRequest(r));
        assert_eq!(h.kind, FrameKind::Request);
        assert_eq!(h.region, (2 << 12) | 0x0fff);
    }

    #[test]
    fn test_link_local_and_responses() {
        let h = Header::from_tl(&TlField::FlowControl(Default::default()));
        assert_eq!(h.kind, FrameKind::LinkLocal);
        let h = Header::from_tl(&TlField::CompressedReadResponse(Default::default()));
        assert_eq!((h.kind, h.src, h.last), (FrameKind::Response, None, false));
        let r = podlink_protocol::wire::TlCompressedReadResponse {
            last: true,
            ..Default::default()
        };
        assert!(Header::from_tl(&TlField::CompressedReadResponse(r)).last);
        assert!(Header::from_tl(&TlField::CompressedWriteResponse(Default::default())).last);
        let r = podlink_protocol::wire::TlUncompressedResponse {
            last: false,
            ..Default::default()
        };
        assert!(!Header::from_tl(&TlField::UncompressedResponse(r)).last);
    }

    #[test]
    fn test_truncated() {
        assert!(Header::parse(&[0x10, 0]).is_err());
        assert!(Header::parse(&[]).is_err());
        assert!(Header::parse(&[0xf0, 0, 0, 0]).is_err());
    }
}
