//! Address compression (`spec-notes/wire.md#address-compression`).
//!
//! Each direction of a link has a pair of [`AddrCache`]s, one at the sender (encoder) and one
//! at the receiver (decoder), each holding up to four 1 MB regions. An uncompressed request
//! with `cload = 1` loads way `cway` with its address's region; a compressed request names a
//! way and carries only address bits 19..6. Both caches stay equal as long as the decoder sees
//! every request in the order the encoder produced it (the TL stream is in order and the DL
//! makes it lossless); reset both together on link reset.
//!
//! The encoder ([`AddrCache::encode_request`]) compresses only Read, Write and WriteFull that are
//! 64 B aligned, a multiple of 64 B long, inside one 256 B block, with full byte enables
//! (`attr = 0xFF`, and for a Write an all-ones mask over the data), `numbeats` = beats − 1 and
//! `metadata` ≤ 7 (the compressed field has 3 bits). On a miss it sends the request
//! uncompressed with `cload = 1` and loads the next way round-robin.
//!
//! The 3-bit compressed `cmd` (not given by the public facts) is podlink's choice:
//!
//! | cmd | opcode |
//! |---|---|
//! | 0 | Read (0x03) |
//! | 1 | Write (0x28), full byte enables: no byte-enable half-flit follows |
//! | 2 | WriteFull (0x29) |
//! | 3..=7 | reserved |

use core::fmt;

use super::tl_field::{
    CompressedRequest, CompressedSingleBeatReadResponse, CompressedWriteResponse, Ftype, Opcode,
    TlField, UncompressedRequest, UncompressedResponse,
};
use super::tl_flit::{BEAT_LEN, BYTE_ENABLE_LEN, MAX_DATA_LEN};
use super::AccelId;

/// Ways in the cache.
pub const WAYS: usize = 4;
/// log2 of the region size (1 MB).
pub const REGION_SHIFT: u32 = 20;
/// Width of a byte address.
pub const ADDR_BITS: u32 = 57;
/// `attr` of a request whose first and last words are fully enabled.
pub const FULL_ATTR: u8 = 0xff;

const ADDR_MASK: u64 = (1 << ADDR_BITS) - 1;
/// Byte-address bits 19..6 as carried by a compressed request.
const OFFSET_MASK: u64 = (1 << REGION_SHIFT) - (1 << 6);

/// The opcode of a compressed-request `cmd`, or `None` for a reserved value.
pub const fn compressed_cmd_opcode(cmd: u8) -> Option<Opcode> {
    match cmd {
        0 => Some(Opcode::Read),
        1 => Some(Opcode::Write),
        2 => Some(Opcode::WriteFull),
        _ => None,
    }
}

/// The compressed-request `cmd` of an opcode, or `None` if it cannot be compressed.
pub const fn opcode_compressed_cmd(op: Opcode) -> Option<u8> {
    match op {
        Opcode::Read => Some(0),
        Opcode::Write => Some(1),
        Opcode::WriteFull => Some(2),
        _ => None,
    }
}

/// The byte-enable mask of a fully enabled transfer of `bytes` bytes (bit *i* = byte *i*).
pub fn full_byte_enables(bytes: usize) -> [u8; BYTE_ENABLE_LEN] {
    let mut mask = [0u8; BYTE_ENABLE_LEN];
    let bytes = bytes.min(MAX_DATA_LEN);
    let (full, rest) = (bytes / 8, bytes % 8);
    for (i, m) in mask.iter_mut().enumerate() {
        *m = if i < full {
            0xff
        } else if i == full && rest != 0 {
            0xff >> (8 - rest)
        } else {
            0
        };
    }
    mask
}

/// A compressed request or response could not be expanded.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum ExpandError {
    /// The request names a way no `cload` has loaded (caches out of step: fatal for the link).
    WayNotLoaded(u8),
    /// A reserved compressed `cmd` (3..=7).
    ReservedCmd(u8),
    /// The field is not of the kind the call expands (the FTYPE says which it is).
    WrongKind(Ftype),
}

impl fmt::Display for ExpandError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match *self {
            ExpandError::WayNotLoaded(w) => write!(f, "address-cache way {w} was never loaded"),
            ExpandError::ReservedCmd(c) => write!(f, "reserved compressed cmd {c}"),
            ExpandError::WrongKind(t) => write!(f, "cannot expand a {}", t.name()),
        }
    }
}

impl core::error::Error for ExpandError {}

/// The 4-way cache of 1 MB address regions, shared by the encoder and the decoder.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct AddrCache {
    /// Region number (byte address >> 20) held by each way.
    ways: [Option<u64>; WAYS],
    /// Way the encoder loads on its next miss: the one after the last loaded (round-robin).
    victim: u8,
}

impl AddrCache {
    /// An empty cache (every way unloaded).
    pub const fn new() -> Self {
        AddrCache {
            ways: [None; WAYS],
            victim: 0,
        }
    }

    /// The region (byte address >> 20) in `way`, if loaded.
    pub fn region(&self, way: u8) -> Option<u64> {
        self.ways.get(usize::from(way)).copied().flatten()
    }

    /// The way holding the region of `byte_addr`, if any.
    pub fn lookup(&self, byte_addr: u64) -> Option<u8> {
        let region = (byte_addr & ADDR_MASK) >> REGION_SHIFT;
        (0..WAYS as u8).find(|&w| self.region(w) == Some(region))
    }

    /// Load `way` with the region of `byte_addr` (what `cload = 1` does); the next victim is
    /// the way after it. Ways past 3 are ignored (the 2-bit field cannot name them).
    pub fn load(&mut self, way: u8, byte_addr: u64) {
        if let Some(slot) = self.ways.get_mut(usize::from(way)) {
            *slot = Some((byte_addr & ADDR_MASK) >> REGION_SHIFT);
            self.victim = (way + 1) % WAYS as u8;
        }
    }

    /// Forget every region (link reset).
    pub fn clear(&mut self) {
        *self = Self::new();
    }

    /// Encoder: the field to send for `req` (its `cload` and `cway` are ignored and set here).
    ///
    /// `byte_enables` is the mask of a Write. Returns a compressed request on a hit; an
    /// uncompressed one with `cload = 1` on an eligible miss (loading the round-robin victim
    /// way, here and, when it arrives, at the decoder); an uncompressed one with `cload = 0`
    /// for anything that may not be compressed.
    pub fn encode_request(
        &mut self,
        req: &UncompressedRequest,
        byte_enables: Option<&[u8; BYTE_ENABLE_LEN]>,
    ) -> TlField {
        let mut out = UncompressedRequest {
            cload: false,
            cway: 0,
            ..*req
        };
        let Some(cmd) = compressible(req, byte_enables) else {
            return TlField::UncompressedRequest(out);
        };
        let byte_addr = byte_addr(req);
        if let Some(way) = self.lookup(byte_addr) {
            return TlField::CompressedRequest(CompressedRequest {
                cmd,
                vchan: req.vchan,
                asi: req.asi,
                tag: req.tag,
                pool: req.pool,
                len: (usize::from(req.len) + 1).div_ceil(16).saturating_sub(1) as u8,
                metadata: req.metadata,
                addr: ((byte_addr & OFFSET_MASK) >> 6) as u16,
                srcaccid: req.srcaccid,
                dstaccid: req.dstaccid,
                cway: way,
            });
        }
        let way = self.victim;
        self.load(way, byte_addr);
        out.cload = true;
        out.cway = way;
        TlField::UncompressedRequest(out)
    }

    /// Decoder: the full request behind a received request field.
    ///
    /// An uncompressed request is returned as is (after loading its way if `cload = 1`). A
    /// compressed one is expanded: `attr = 0xFF`, `len` in words, `numbeats = len`,
    /// `cload = 0`, `cway` = the way used; a Write comes with full byte enables
    /// ([`full_byte_enables`]).
    ///
    /// # Errors
    /// `WayNotLoaded`, `ReservedCmd`, or `WrongKind` for a field that is not a request.
    pub fn decode_request(&mut self, field: &TlField) -> Result<UncompressedRequest, ExpandError> {
        match field {
            TlField::UncompressedRequest(r) => {
                if r.cload {
                    self.load(r.cway, byte_addr(r));
                }
                Ok(*r)
            }
            TlField::CompressedRequest(c) => {
                let cmd = compressed_cmd_opcode(c.cmd).ok_or(ExpandError::ReservedCmd(c.cmd))?;
                let region = self
                    .region(c.cway)
                    .ok_or(ExpandError::WayNotLoaded(c.cway))?;
                let byte_addr = (region << REGION_SHIFT) | ((u64::from(c.addr) << 6) & OFFSET_MASK);
                Ok(UncompressedRequest {
                    cmd,
                    vchan: c.vchan,
                    asi: c.asi,
                    tag: c.tag,
                    pool: c.pool,
                    attr: FULL_ATTR,
                    len: ((u16::from(c.len & 3) + 1) * 16 - 1) as u8,
                    metadata: c.metadata,
                    addr: byte_addr >> 2,
                    srcaccid: c.srcaccid,
                    dstaccid: c.dstaccid,
                    cload: false,
                    cway: c.cway,
                    numbeats: c.len & 3,
                })
            }
            other => Err(ExpandError::WrongKind(other.ftype())),
        }
    }

    /// A hop's decoder (a switch port, or any receiver that passes requests on): what to
    /// forward for a received field. The caches are per link, so a request goes on
    /// uncompressed and loads no way downstream (`cload = 0`, `cway = 0`); this cache
    /// still loads or looks up the way as [`AddrCache::decode_request`] does. A Write
    /// expanded from a compressed one comes with full byte enables, which an uncompressed
    /// Write carries. `None`: the field goes on as it is (not a request, or an uncompressed
    /// request that loads no way).
    ///
    /// Call it for every field in arrival order, even one dropped afterwards: the sender's
    /// cache loaded its way when it sent it.
    ///
    /// # Errors
    /// `WayNotLoaded` or `ReservedCmd` for a compressed request that cannot be expanded (the
    /// caller drops it).
    pub fn forward_request(&mut self, field: &TlField) -> Result<Option<Forward>, ExpandError> {
        let compressed = match field {
            TlField::UncompressedRequest(r) if r.cload => false,
            TlField::CompressedRequest(_) => true,
            _ => return Ok(None),
        };
        let mut req = self.decode_request(field)?;
        req.cload = false;
        req.cway = 0;
        let byte_enables = (compressed && req.cmd == Opcode::Write)
            .then(|| full_byte_enables((usize::from(req.len) + 1) * 4));
        Ok(Some(Forward { req, byte_enables }))
    }
}

/// What [`AddrCache::forward_request`] sends on in place of a received request.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Forward {
    /// The request, uncompressed, loading no way.
    pub req: UncompressedRequest,
    /// Full byte enables for a Write that arrived compressed (`None`: keep the received
    /// transfer's).
    pub byte_enables: Option<[u8; BYTE_ENABLE_LEN]>,
}

/// Byte address of a request (`addr` holds bits 56..2).
fn byte_addr(req: &UncompressedRequest) -> u64 {
    (req.addr << 2) & ADDR_MASK
}

/// The compressed `cmd` for `req` if every compression rule holds.
fn compressible(
    req: &UncompressedRequest,
    byte_enables: Option<&[u8; BYTE_ENABLE_LEN]>,
) -> Option<u8> {
    let cmd = opcode_compressed_cmd(req.cmd)?;
    let bytes = (usize::from(req.len) + 1) * 4;
    let addr = byte_addr(req);
    let offset = (addr % MAX_DATA_LEN as u64) as usize;
    let beats = bytes / BEAT_LEN;
    let ok = bytes % BEAT_LEN == 0
        && bytes <= MAX_DATA_LEN
        && offset % BEAT_LEN == 0
        && offset + bytes <= MAX_DATA_LEN
        && req.attr == FULL_ATTR
        && usize::from(req.numbeats) + 1 == beats
        && req.metadata <= 7
        && match req.cmd {
            Opcode::Write => byte_enables == Some(&full_byte_enables(bytes)),
            _ => byte_enables.is_none(),
        };
    ok.then_some(cmd)
}

/// Encoder: the field to send for a response. Compressed only when `status` is OK (0) and
/// nothing would be lost: `spares` = 0, and either a single-beat read response (FTYPE 0x4,
/// `len` = 0), or a write response or multi-beat read response (FTYPE 0x5) that is whole
/// (`offset` = 0, `last` = 1). The compressed forms drop `srcaccid`: the requester knows it.
pub fn encode_response(rsp: &UncompressedResponse) -> TlField {
    if rsp.status != 0 || rsp.spares != 0 {
        return TlField::UncompressedResponse(*rsp);
    }
    if !rsp.rd_wr && rsp.len == 0 {
        return TlField::CompressedReadResponse(CompressedSingleBeatReadResponse {
            vchan: rsp.vchan,
            tag: rsp.tag,
            pool: rsp.pool,
            dstaccid: rsp.dstaccid,
            offset: rsp.offset,
            last: rsp.last,
        });
    }
    if rsp.offset == 0 && rsp.last {
        return TlField::CompressedWriteResponse(CompressedWriteResponse {
            vchan: rsp.vchan,
            tag: rsp.tag,
            pool: rsp.pool,
            dstaccid: rsp.dstaccid,
            len: rsp.len,
            rd_wr: rsp.rd_wr,
        });
    }
    TlField::UncompressedResponse(*rsp)
}

/// Decoder: the full response behind a received response field; `srcaccid` is the completer
/// the requester sent the request to (compressed responses do not carry it).
///
/// # Errors
/// `WrongKind` for a field that is not a response.
pub fn decode_response(
    field: &TlField,
    srcaccid: AccelId,
) -> Result<UncompressedResponse, ExpandError> {
    let base = UncompressedResponse {
        srcaccid,
        ..Default::default()
    };
    match field {
        TlField::UncompressedResponse(r) => Ok(*r),
        TlField::CompressedReadResponse(c) => Ok(UncompressedResponse {
            vchan: c.vchan,
            tag: c.tag,
            pool: c.pool,
            dstaccid: c.dstaccid,
            offset: c.offset,
            last: c.last,
            ..base
        }),
        TlField::CompressedWriteResponse(c) => Ok(UncompressedResponse {
            vchan: c.vchan,
            tag: c.tag,
            pool: c.pool,
            dstaccid: c.dstaccid,
            len: c.len,
            rd_wr: c.rd_wr,
            last: true,
            ..base
        }),
        other => Err(ExpandError::WrongKind(other.ftype())),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::wire::{Tag, Vc};

    fn read(byte_addr: u64, bytes: usize) -> UncompressedRequest {
        UncompressedRequest {
            cmd: Opcode::Read,
            vchan: Vc::new(2).unwrap(),
            tag: Tag::new(77).unwrap(),
            attr: FULL_ATTR,
            len: (bytes / 4 - 1) as u8,
            metadata: 5,
            addr: byte_addr >> 2,
            numbeats: (bytes / 64 - 1) as u8,
            srcaccid: AccelId::new(3).unwrap(),
            dstaccid: AccelId::new(900).unwrap(),
            ..Default::default()
        }
    }

    #[test]
    fn cmd_mapping() {
        for cmd in 0..8 {
            match compressed_cmd_opcode(cmd) {
                Some(op) => assert_eq!(opcode_compressed_cmd(op), Some(cmd)),
                None => assert!(cmd >= 3),
            }
        }
        assert_eq!(opcode_compressed_cmd(Opcode::AtomicR), None);
    }

    #[test]
    fn full_mask() {
        assert_eq!(full_byte_enables(256), [0xff; 32]);
        let m = full_byte_enables(100);
        assert_eq!(&m[..12], &[0xff; 12]);
        assert_eq!(m[12], 0x0f);
        assert_eq!(&m[13..], &[0; 19]);
    }

    #[test]
    fn miss_load_then_hit() {
        let (mut enc, mut dec) = (AddrCache::new(), AddrCache::new());
        let r = read(0x1_2345_6780 & !63, 128);
        let first = enc.encode_request(&r, None);
        let TlField::UncompressedRequest(u) = first else {
            panic!("expected uncompressed on a miss: {first:?}")
        };
        assert!(u.cload);
        assert_eq!(u.cway, 0);
        assert_eq!(dec.decode_request(&first).unwrap(), u);
        let second = enc.encode_request(&r, None);
        let TlField::CompressedRequest(c) = second else {
            panic!("expected compressed on a hit: {second:?}")
        };
        assert_eq!((c.cmd, c.len, c.cway), (0, 1, 0));
        let back = dec.decode_request(&second).unwrap();
        assert_eq!(back, UncompressedRequest { cway: 0, ..r });
        assert_eq!(enc, dec);
    }

    /// Two links in a row (A to a switch, the switch on to B): the switch port's cache
    /// follows A's encoder, and what it forwards is uncompressed, loads nothing at B, and
    /// is the request A's requester meant, a compressed Write with full byte enables.
    #[test]
    fn a_hop_forwards_requests_uncompressed() {
        let (mut enc, mut hop) = (AddrCache::new(), AddrCache::new());
        let write = UncompressedRequest {
            cmd: Opcode::Write,
            ..read(0x7_0010_0040 & !63, 128)
        };
        let enables = full_byte_enables(128);
        // A miss: uncompressed with cload, which the hop loads and clears.
        let first = enc.encode_request(&write, Some(&enables));
        let f = hop
            .forward_request(&first)
            .unwrap()
            .expect("a cload request changes");
        assert_eq!(f.req, UncompressedRequest { cway: 0, ..write });
        assert!(!f.req.cload && f.byte_enables.is_none());
        assert_eq!(hop, enc);
        // A hit: compressed, expanded with its byte enables.
        let second = enc.encode_request(&write, Some(&enables));
        assert!(matches!(second, TlField::CompressedRequest(_)));
        let f = hop.forward_request(&second).unwrap().expect("expanded");
        assert_eq!(f.req, UncompressedRequest { cway: 0, ..write });
        assert_eq!(f.byte_enables, Some(enables));
        // A compressed read needs none; an uncompressed request without cload and a
        // response go on as they are.
        let rd = enc.encode_request(&read(0x7_0010_0000, 64), None);
        let f = hop.forward_request(&rd).unwrap().expect("expanded");
        assert_eq!((f.req.cmd, f.byte_enables), (Opcode::Read, None));
        let plain = TlField::UncompressedRequest(read(0x40, 64));
        assert_eq!(hop.forward_request(&plain), Ok(None));
        let rsp = TlField::UncompressedResponse(UncompressedResponse::default());
        assert_eq!(hop.forward_request(&rsp), Ok(None));
        // A way never loaded (caches out of step) is refused.
        let mut cold = AddrCache::new();
        assert_eq!(
            cold.forward_request(&second),
            Err(ExpandError::WayNotLoaded(0))
        );
    }

    #[test]
    fn round_robin_victims() {
        let mut enc = AddrCache::new();
        for i in 0..6u64 {
            let f = enc.encode_request(&read(i << 20, 64), None);
            let TlField::UncompressedRequest(u) = f else {
                panic!("miss expected")
            };
            assert_eq!(u.cway as u64, i % 4);
        }
        assert_eq!(enc.lookup(5 << 20), Some(1));
        assert_eq!(enc.lookup(1 << 20), None);
    }

    #[test]
    fn ineligible_stays_uncompressed() {
        let mut enc = AddrCache::new();
        enc.load(0, 0);
        let cases = [
            UncompressedRequest {
                cmd: Opcode::AtomicR,
                ..read(0, 64)
            },
            UncompressedRequest {
                cmd: Opcode::VendorRead(9),
                ..read(0, 64)
            },
            UncompressedRequest {
                attr: 0x0f,
                ..read(0, 64)
            },
            UncompressedRequest {
                metadata: 8,
                ..read(0, 64)
            },
            UncompressedRequest {
                numbeats: 0,
                ..read(0, 128)
            },
            read(0x20, 64),
            read(0x80, 192),
            UncompressedRequest {
                len: 19,
                ..read(0, 64)
            },
            UncompressedRequest {
                cmd: Opcode::Write,
                ..read(0, 64)
            },
        ];
        for r in cases {
            let f = enc.encode_request(&r, None);
            assert_eq!(f, TlField::UncompressedRequest(r), "{r:?}");
        }
        let partial = [0x0f; 32];
        let w = UncompressedRequest {
            cmd: Opcode::Write,
            ..read(0, 64)
        };
        assert!(matches!(
            enc.encode_request(&w, Some(&partial)),
            TlField::UncompressedRequest(_)
        ));
        assert!(matches!(
            enc.encode_request(&w, Some(&full_byte_enables(64))),
            TlField::CompressedRequest(CompressedRequest { cmd: 1, .. })
        ));
        // A read with a mask given is not compressed either.
        assert!(matches!(
            enc.encode_request(&read(0, 64), Some(&[0xff; 32])),
            TlField::UncompressedRequest(_)
        ));
    }

    #[test]
    fn decode_errors() {
        let mut dec = AddrCache::new();
        let c = CompressedRequest {
            cway: 2,
            ..Default::default()
        };
        assert_eq!(
            dec.decode_request(&TlField::CompressedRequest(c)),
            Err(ExpandError::WayNotLoaded(2))
        );
        let c = CompressedRequest {
            cmd: 5,
            ..Default::default()
        };
        assert_eq!(
            dec.decode_request(&TlField::CompressedRequest(c)),
            Err(ExpandError::ReservedCmd(5))
        );
        let rsp = TlField::UncompressedResponse(Default::default());
        assert_eq!(
            dec.decode_request(&rsp),
            Err(ExpandError::WrongKind(Ftype::UncompressedResponse))
        );
        assert_eq!(
            decode_response(&TlField::CompressedRequest(c), AccelId::default()),
            Err(ExpandError::WrongKind(Ftype::CompressedRequest))
        );
        assert!(!format!("{}", ExpandError::WayNotLoaded(1)).is_empty());
    }

    #[test]
    fn responses() {
        let src = AccelId::new(12).unwrap();
        let base = UncompressedResponse {
            vchan: Vc::new(1).unwrap(),
            tag: Tag::new(99).unwrap(),
            pool: true,
            srcaccid: src,
            dstaccid: AccelId::new(44).unwrap(),
            last: true,
            ..Default::default()
        };
        let cases = [
            (base, Ftype::CompressedReadResponse),
            (
                UncompressedResponse {
                    offset: 2,
                    last: false,
                    ..base
                },
                Ftype::CompressedReadResponse,
            ),
            (
                UncompressedResponse { len: 3, ..base },
                Ftype::CompressedWriteResponse,
            ),
            (
                UncompressedResponse {
                    rd_wr: true,
                    len: 1,
                    ..base
                },
                Ftype::CompressedWriteResponse,
            ),
            (
                UncompressedResponse { status: 3, ..base },
                Ftype::UncompressedResponse,
            ),
            (
                UncompressedResponse { spares: 1, ..base },
                Ftype::UncompressedResponse,
            ),
            (
                UncompressedResponse {
                    len: 1,
                    offset: 1,
                    ..base
                },
                Ftype::UncompressedResponse,
            ),
            (
                UncompressedResponse {
                    len: 1,
                    last: false,
                    ..base
                },
                Ftype::UncompressedResponse,
            ),
        ];
        for (rsp, ftype) in cases {
            let f = encode_response(&rsp);
            assert_eq!(f.ftype(), ftype, "{rsp:?}");
            assert_eq!(decode_response(&f, src), Ok(rsp));
        }
    }
}
