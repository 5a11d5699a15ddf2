//! Streaming DL packer and unpacker (`spec-notes/wire.md#packing`).
//!
//! TL flits (64 B) form one byte stream that runs through the TL areas of consecutive DL
//! flits: a TL flit may straddle segment boundaries and DL flit boundaries. DL messages go in
//! an alternative sector at the start of a segment, before any TL data of that segment (they
//! have priority). Every payload byte is either an alternative-sector word or TL stream data:
//! when the packer runs out of TL flits it pads with TL NOP flits (64 zero bytes), which the
//! unpacker drops and counts.
//!
//! ## Segment header semantics (podlink's)
//!
//! | `dl_alt_sector` | `message1:message0` | meaning |
//! |---|---|---|
//! | 0 | `carry_words` (4 bits, message1 high) | TL data from the segment's first byte; the first `4 × carry_words` bytes finish a TL flit begun earlier, so the first TL flit start is at that offset |
//! | 1 | `message0` = S ≥ 0, `message1` = V ≥ 0, S + V > 0 | opens an alternative sector: S standard messages, then V vendor-defined words |
//! | 1 | 0, 0 | the segment begins with the rest of the alternative sector opened by an earlier segment of this flit |
//!
//! `tl_flit0` = at least one TL flit starts in the segment, `tl_flit1` = two start
//! (at most two fit). Alternative sectors never cross a DL flit boundary; TL flits do.
//! A receiver that lost its place re-synchronises at the first segment without an
//! alternative sector, whose header gives the offset of the first TL flit start.

use super::dl_flit::{
    segment_range, DlFlit, FLIT_LEN, PAYLOAD_LEN, SEGMENT_COUNT, SEGMENT_OFFSETS, SEGMENT_SIZES,
};
use super::dl_header::{FlitHeader, SegmentHeader};
use super::dl_msg::{nom_message, DlMessage, MessageSpace, NomError};
use super::{check_out, crc::DlCrc, Error, Result};
use core::fmt;
use nom::Parser;

/// Length of a TL flit in bytes.
pub const TL_FLIT_LEN: usize = 64;
/// Largest number of standard messages (and, separately, vendor words) opening one alternative sector.
pub const MAX_ALT_COUNT: u8 = 3;

/// What a segment holds: a [`SegmentHeader`] under podlink's semantics (module docs).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum SegmentKind {
    /// No alternative sector; the first `carry_bytes` (0..=60, a multiple of 4) finish a TL
    /// flit begun earlier.
    Tl {
        /// Bytes before the first TL flit start.
        carry_bytes: u8,
    },
    /// Opens an alternative sector.
    Alt {
        /// Standard messages first (0..=3).
        standard: u8,
        /// Then vendor-defined words (0..=3).
        vendor: u8,
    },
    /// Continues the alternative sector of an earlier segment.
    AltContinued,
}

/// A decoded segment header.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct SegmentInfo {
    /// What the segment holds.
    pub kind: SegmentKind,
    /// Real (non-padding) TL flits starting in the segment (0..=2); any later start in the
    /// segment is a NOP padding flit.
    pub tl_starts: u8,
}

impl SegmentInfo {
    /// Decode a segment header.
    ///
    /// # Errors
    /// `Packing` when the header is impossible: `tl_flit1` without `tl_flit0`.
    pub fn from_header(h: &SegmentHeader) -> Result<SegmentInfo> {
        if h.tl_flit1 && !h.tl_flit0 {
            return Err(Error::Packing("segment header: tl_flit1 without tl_flit0"));
        }
        let tl_starts = u8::from(h.tl_flit0) + u8::from(h.tl_flit1);
        let kind = match (h.dl_alt_sector, h.message0, h.message1) {
            (false, lo, hi) => SegmentKind::Tl {
                carry_bytes: ((hi & 3) << 4) | ((lo & 3) << 2),
            },
            (true, 0, 0) => SegmentKind::AltContinued,
            (true, standard, vendor) => SegmentKind::Alt { standard, vendor },
        };
        Ok(SegmentInfo { kind, tl_starts })
    }

    /// Encode as a segment header.
    pub fn to_header(&self) -> SegmentHeader {
        let (dl_alt_sector, message0, message1) = match self.kind {
            SegmentKind::Tl { carry_bytes } => {
                (false, (carry_bytes >> 2) & 3, (carry_bytes >> 4) & 3)
            }
            SegmentKind::Alt { standard, vendor } => (true, standard & 3, vendor & 3),
            SegmentKind::AltContinued => (true, 0, 0),
        };
        SegmentHeader {
            tl_flit1: self.tl_starts >= 2,
            message1,
            tl_flit0: self.tl_starts >= 1,
            message0,
            dl_alt_sector,
        }
    }
}

/// The header byte of a TL-only segment (no alternative sector): the same bits
/// [`SegmentInfo::to_header`] emits, computed directly for the unpacker's fast path.
const fn tl_segment_header_byte(carry: usize, starts: usize) -> u8 {
    let carry = carry as u8;
    (((starts >= 2) as u8) << 7)
        | (((carry >> 4) & 3) << 5)
        | (((starts >= 1) as u8) << 4)
        | (((carry >> 2) & 3) << 2)
}

/// The five segment headers of a TL-only flit for each stream position at its start
/// (`have` = 0, 4, …, 60 bytes of a TL flit already received), computed at compile time.
// Indexing here runs in const evaluation: an out-of-range index fails the build, never a run.
#[allow(clippy::indexing_slicing)]
const TL_ONLY_HEADERS: [[u8; SEGMENT_COUNT]; TL_FLIT_LEN / 4] = {
    let mut table = [[0u8; SEGMENT_COUNT]; TL_FLIT_LEN / 4];
    let mut k = 0;
    while k < TL_FLIT_LEN / 4 {
        let mut have = k * 4;
        let mut i = 0;
        while i < SEGMENT_COUNT {
            let size = SEGMENT_SIZES[i];
            let carry = (TL_FLIT_LEN - have) % TL_FLIT_LEN;
            table[k][i] = tl_segment_header_byte(carry, starts_in(carry, size));
            have = (have + size) % TL_FLIT_LEN;
            i += 1;
        }
        k += 1;
    }
    table
};

/// The real TL flit starts of a flit (bit `k`: the `k`-th TL flit start, counted from the
/// first one at payload offset `first`) if `got` are the segment headers of a TL-only flit at
/// the stream position whose all-real headers are `expected`, with no more real starts than
/// fit in each segment: exactly the flits the general unpacker accepts as TL-only with these
/// carries. `None` for anything else (alternative sectors, other carries, a reserved bit,
/// `tl_flit1` without `tl_flit0`, too many starts).
fn tl_only_real_starts(
    got: [u8; SEGMENT_COUNT],
    expected: [u8; SEGMENT_COUNT],
    first: usize,
) -> Option<u16> {
    let word = |b: [u8; SEGMENT_COUNT]| {
        let [a, b, c, d, e] = b;
        u64::from_le_bytes([a, b, c, d, e, 0, 0, 0])
    };
    let (g, e) = (word(got), word(expected));
    /// Per byte: everything but the two start bits (message fields = the carry, reserved,
    /// alternative sector); `tl_flit0`; `tl_flit1`.
    const NOT_STARTS: u64 = 0x006f_6f6f_6f6f;
    const FLIT0: u64 = 0x0010_1010_1010;
    const STARTS: u64 = 0x0090_9090_9090;
    let impossible = (g >> 3) & !g & FLIT0 != 0; // tl_flit1 without tl_flit0
                                                 // With valid headers, "no more real starts than fit" is "no start bit the all-real
                                                 // header lacks".
    if (g ^ e) & NOT_STARTS != 0 || impossible || g & !e & STARTS != 0 {
        return None;
    }
    let layout = TL_SEGMENT_STARTS
        .get(first / 4 % (TL_FLIT_LEN / 4))
        .copied()
        .unwrap_or_default();
    let mut real = 0u16;
    for (&h, (_, lo, _)) in got.iter().zip(layout) {
        let n = u32::from(h >> 4 & 1) + u32::from(h >> 7);
        real |= ((1u16 << n) - 1) << lo;
    }
    Some(real)
}

/// For a TL-only flit whose first TL flit start is at payload offset `4 × k` (table row `k`),
/// per segment: its carry (bytes before its first start), the index of its first start among
/// the flit's starts, and how many starts it holds (at most two).
// Indexing here runs in const evaluation: an out-of-range index fails the build, never a run.
#[allow(clippy::indexing_slicing)]
const TL_SEGMENT_STARTS: [[(u8, u8, u8); SEGMENT_COUNT]; TL_FLIT_LEN / 4] = {
    let mut table = [[(0u8, 0u8, 0u8); SEGMENT_COUNT]; TL_FLIT_LEN / 4];
    let mut k = 0;
    while k < TL_FLIT_LEN / 4 {
        let first = k * 4;
        let mut i = 0;
        while i < SEGMENT_COUNT {
            let (off, size) = (SEGMENT_OFFSETS[i], SEGMENT_SIZES[i]);
            // Start j is at first + 64 j.
            let lo = start_at_or_after(first, off);
            let hi = start_at_or_after(first, off + size);
            let carry = first + lo * TL_FLIT_LEN - off;
            table[k][i] = (carry as u8, lo as u8, (hi - lo) as u8);
            i += 1;
        }
        k += 1;
    }
    table
};

/// Index of the first TL flit start at or after byte `at`, with starts at `first + 64 j`.
const fn start_at_or_after(first: usize, at: usize) -> usize {
    if at <= first {
        0
    } else {
        (at - first).div_ceil(TL_FLIT_LEN)
    }
}

/// TL flits starting in an area of `len` bytes whose first `carry` bytes finish an earlier one.
const fn starts_in(carry: usize, len: usize) -> usize {
    match len.checked_sub(carry) {
        Some(rest) if rest > 0 => rest.saturating_add(TL_FLIT_LEN - 1) / TL_FLIT_LEN,
        _ => 0,
    }
}

/// Where the packer gets TL flits and DL messages from.
pub trait PackSource {
    /// Write the next TL flit into `out` and return true, or return false when none is ready
    /// (the packer then pads with a NOP flit).
    fn next_tl_flit(&mut self, out: &mut [u8; TL_FLIT_LEN]) -> bool;
    /// The next DL message to send, left in place: what it returns changes only through
    /// [`PackSource::pop_message`] (the packer looks once per flit whether any is waiting).
    fn peek_message(&self) -> Option<&DlMessage> {
        None
    }
    /// Remove the message [`PackSource::peek_message`] returned.
    fn pop_message(&mut self) {}
}

/// What one [`DlPacker::pack`] call did.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct PackStats {
    /// TL flits from the source whose first byte is in this DL flit.
    pub tl_started: usize,
    /// TL flits from the source whose last byte is in this DL flit.
    pub tl_finished: usize,
    /// Padding NOP flits started.
    pub nop_started: usize,
    /// DL messages carried.
    pub messages: usize,
    /// Words of DL messages carried.
    pub message_words: usize,
    /// Messages taken from the source and dropped because they could not be emitted.
    pub dropped_messages: usize,
    /// The first emit error of a dropped message.
    pub message_error: Option<Error>,
}

/// Packs TL flits and DL messages into DL flits (see the module docs for the format).
///
/// State: the TL flit in progress, which may continue into the next DL flit.
/// Every call packs exactly one flit; work is bounded by the flit's size.
#[derive(Debug, Clone)]
pub struct DlPacker {
    cur: [u8; TL_FLIT_LEN],
    remaining: usize,
    cur_is_nop: bool,
    max_message_words: usize,
}

impl Default for DlPacker {
    fn default() -> Self {
        Self::new()
    }
}

impl DlPacker {
    /// A packer with no TL flit in progress and no limit on message words per flit.
    pub const fn new() -> Self {
        DlPacker {
            cur: [0; TL_FLIT_LEN],
            remaining: 0,
            cur_is_nop: false,
            max_message_words: PAYLOAD_LEN / 4,
        }
    }

    /// Limit the DL message words per flit (default: the whole payload). Messages still go
    /// before TL data; a limit keeps TL data moving when the message queue is long. The first
    /// message of a flit is always allowed, so a long message is never blocked.
    pub const fn with_max_message_words(mut self, words: usize) -> Self {
        self.max_message_words = words;
        self
    }

    /// Link reset: forget the TL flit in progress.
    pub fn reset(&mut self) {
        self.remaining = 0;
        self.cur_is_nop = false;
    }

    /// Bytes of the TL flit in progress still to be sent (0 when none).
    pub const fn carry_bytes(&self) -> usize {
        self.remaining
    }

    /// Whether the TL flit in progress is a real one (not padding): the next flit must then
    /// be sent for it to complete.
    pub const fn carrying_tl_flit(&self) -> bool {
        self.remaining > 0 && !self.cur_is_nop
    }

    /// Fill the segment headers and payload of `flit` (flit header and CRC untouched).
    ///
    /// # Errors
    /// `BufferTooSmall` when the buffer is shorter than a flit. A message that cannot be
    /// emitted is dropped and reported in [`PackStats`], never returned as an error.
    pub fn pack<S: PackSource + ?Sized, T: AsRef<[u8]> + AsMut<[u8]>>(
        &mut self,
        src: &mut S,
        flit: &mut DlFlit<T>,
    ) -> Result<PackStats> {
        if flit.payload().len() < PAYLOAD_LEN {
            return Err(Error::BufferTooSmall {
                needed: FLIT_LEN,
                got: flit.buffer_len(),
            });
        }
        if src.peek_message().is_none() {
            return Ok(self.pack_tl_only(src, flit));
        }
        let mut stats = PackStats::default();
        let mut headers = [0u8; SEGMENT_COUNT];
        let mut alt_end = 0;
        let mut messages_open = true;
        let mut budget = self.max_message_words;
        let payload = flit.payload_mut();
        for (i, hb) in headers.iter_mut().enumerate() {
            let (off, size) = segment_range(i).unwrap_or_default();
            let end = off.saturating_add(size);
            let kind = if alt_end > off {
                SegmentKind::AltContinued
            } else {
                let (standard, vendor, used) = place_messages(
                    src,
                    payload,
                    off,
                    &mut messages_open,
                    &mut budget,
                    &mut stats,
                );
                if standard + vendor > 0 {
                    alt_end = used;
                    SegmentKind::Alt { standard, vendor }
                } else {
                    SegmentKind::Tl {
                        carry_bytes: self.remaining as u8,
                    }
                }
            };
            let tl_from = alt_end.clamp(off, end);
            let area = payload.get_mut(tl_from..end).unwrap_or_default();
            let tl_starts = self.fill_tl(src, area, &mut stats);
            SegmentInfo { kind, tl_starts }
                .to_header()
                .emit(core::slice::from_mut(hb))?;
        }
        flit.set_segment_header_bytes(headers);
        Ok(stats)
    }

    /// Pack a whole flit into `buf`: header, segment headers, payload and CRC under `alg`.
    ///
    /// # Errors
    /// `BufferTooSmall`, or `FieldRange` from the header.
    pub fn pack_flit<S: PackSource + ?Sized>(
        &mut self,
        src: &mut S,
        header: &FlitHeader,
        alg: DlCrc,
        buf: &mut [u8],
    ) -> Result<PackStats> {
        check_out(buf, FLIT_LEN)?;
        let mut hb = [0u8; 3];
        header.emit(&mut hb)?;
        let mut flit = DlFlit::new_unchecked(buf);
        let stats = self.pack(src, &mut flit)?;
        flit.set_header_bytes(hb);
        flit.fill_crc(alg);
        Ok(stats)
    }

    /// [`DlPacker::pack`] when no DL message waits: the payload is one run of TL stream bytes
    /// (the TL flit in progress, then a TL flit start every 64 bytes), written in one pass,
    /// and each segment header follows from where the starts fall. Same bytes and
    /// [`PackStats`] as the general loop (tested against it).
    fn pack_tl_only<S: PackSource + ?Sized, T: AsRef<[u8]> + AsMut<[u8]>>(
        &mut self,
        src: &mut S,
        flit: &mut DlFlit<T>,
    ) -> PackStats {
        let mut stats = PackStats::default();
        // Offset of the first TL flit start (the carried flit's remaining bytes come first).
        let first = self.remaining;
        let payload = flit.payload_mut();
        let (carry, rest) = payload.split_at_mut(first.min(payload.len()));
        if !carry.is_empty() {
            let from = TL_FLIT_LEN.saturating_sub(self.remaining);
            if self.cur_is_nop {
                carry.fill(0);
            } else if let Some(src_bytes) = self.cur.get(from..from.saturating_add(carry.len())) {
                carry.copy_from_slice(src_bytes);
            }
            self.remaining = self.remaining.saturating_sub(carry.len());
            if self.remaining == 0 && !self.cur_is_nop {
                stats.tl_finished = stats.tl_finished.saturating_add(1);
            }
        }
        // Bit k set: the k-th TL flit start of this flit is a real TL flit.
        let mut real_starts: u16 = 0;
        let mut k = 0u32;
        let mut chunks = rest.chunks_exact_mut(TL_FLIT_LEN);
        for chunk in &mut chunks {
            let real = match <&mut [u8; TL_FLIT_LEN]>::try_from(chunk) {
                Ok(whole) => {
                    let real = src.next_tl_flit(whole);
                    if !real {
                        whole.fill(0);
                    }
                    real
                }
                Err(_) => false,
            };
            self.note_start(real, true, &mut stats);
            real_starts |= u16::from(real) << k;
            k += 1;
        }
        let tail = chunks.into_remainder();
        if !tail.is_empty() {
            let real = src.next_tl_flit(&mut self.cur);
            if !real {
                tail.fill(0);
            } else if let Some(src_bytes) = self.cur.get(..tail.len()) {
                tail.copy_from_slice(src_bytes);
            }
            self.remaining = TL_FLIT_LEN.saturating_sub(tail.len());
            self.note_start(real, false, &mut stats);
            real_starts |= u16::from(real) << k;
        }
        // Segment i: its carry and the range of start indices inside it, from a table by the
        // position of the first start; its real starts are those of the range.
        let mut headers = [0u8; SEGMENT_COUNT];
        let layout = TL_SEGMENT_STARTS
            .get(first / 4 % (TL_FLIT_LEN / 4))
            .copied()
            .unwrap_or_default();
        for (h, (carry, lo, n)) in headers.iter_mut().zip(layout) {
            let mask = (1u16 << n) - 1;
            let real = (real_starts >> lo) & mask;
            *h = tl_segment_header_byte(usize::from(carry), real.count_ones() as usize);
        }
        flit.set_segment_header_bytes(headers);
        stats
    }

    /// Count a TL flit start: real or padding, and whether it ends in this DL flit.
    fn note_start(&mut self, real: bool, whole: bool, stats: &mut PackStats) {
        self.cur_is_nop = !real;
        if real {
            stats.tl_started = stats.tl_started.saturating_add(1);
            if whole {
                stats.tl_finished = stats.tl_finished.saturating_add(1);
            }
        } else {
            stats.nop_started = stats.nop_started.saturating_add(1);
        }
    }

    /// Fill a TL area; returns the real (non-padding) TL flits started in it.
    ///
    /// Whole TL flits are written by the source straight into the area; padding is written
    /// as zeros (no copy); only a TL flit cut by the area's end goes through `cur`.
    fn fill_tl<S: PackSource + ?Sized>(
        &mut self,
        src: &mut S,
        area: &mut [u8],
        stats: &mut PackStats,
    ) -> u8 {
        let mut starts = 0;
        let mut rest = area;
        if self.remaining > 0 {
            // Finish the TL flit in progress.
            let n = self.remaining.min(rest.len());
            let from = TL_FLIT_LEN.saturating_sub(self.remaining);
            let (out, tail) = rest.split_at_mut(n);
            if self.cur_is_nop {
                out.fill(0);
            } else if let Some(src_bytes) = self.cur.get(from..from.saturating_add(n)) {
                out.copy_from_slice(src_bytes);
            }
            rest = tail;
            self.remaining = self.remaining.saturating_sub(n);
            if self.remaining == 0 && !self.cur_is_nop {
                stats.tl_finished = stats.tl_finished.saturating_add(1);
            }
        }
        // `remaining` is 0 from here on until the last, cut TL flit.
        while !rest.is_empty() {
            let area = core::mem::take(&mut rest);
            let real = if area.len() >= TL_FLIT_LEN {
                let (whole, tail) = area.split_at_mut(TL_FLIT_LEN);
                rest = tail;
                let real = match <&mut [u8; TL_FLIT_LEN]>::try_from(whole) {
                    Ok(whole) => {
                        let real = src.next_tl_flit(whole);
                        if !real {
                            whole.fill(0);
                        }
                        real
                    }
                    Err(_) => false,
                };
                if real {
                    stats.tl_finished = stats.tl_finished.saturating_add(1);
                }
                real
            } else {
                let real = src.next_tl_flit(&mut self.cur);
                let n = area.len();
                if !real {
                    area.fill(0);
                } else if let Some(src_bytes) = self.cur.get(..n) {
                    area.copy_from_slice(src_bytes);
                }
                self.remaining = TL_FLIT_LEN.saturating_sub(n);
                real
            };
            self.cur_is_nop = !real;
            if real {
                stats.tl_started = stats.tl_started.saturating_add(1);
                // Only real TL flits are counted: a start beyond the count is padding.
                starts += 1;
            } else {
                stats.nop_started = stats.nop_started.saturating_add(1);
            }
        }
        starts
    }
}

/// Open an alternative sector at `off`: up to 3 standard messages then up to 3 vendor words,
/// in source order, each wholly inside the payload. Returns (standard, vendor, end offset).
fn place_messages<S: PackSource + ?Sized>(
    src: &mut S,
    payload: &mut [u8],
    off: usize,
    open: &mut bool,
    budget: &mut usize,
    stats: &mut PackStats,
) -> (u8, u8, usize) {
    let (mut standard, mut vendor, mut pos) = (0u8, 0u8, off);
    while *open {
        let Some(msg) = src.peek_message() else { break };
        let words = msg.words();
        let fits_pattern = match msg.space() {
            MessageSpace::Standard => vendor == 0 && standard < MAX_ALT_COUNT,
            MessageSpace::Vendor => vendor < MAX_ALT_COUNT,
        };
        if !fits_pattern {
            break; // next segment
        }
        let end = pos.saturating_add(msg.buffer_len());
        if end > PAYLOAD_LEN || (words > *budget && stats.messages > 0) {
            *open = false; // keep order: nothing more in this flit
            break;
        }
        let space = msg.space();
        let res = msg.emit(payload.get_mut(pos..).unwrap_or_default());
        src.pop_message();
        match res {
            Ok(n) => {
                pos = pos.saturating_add(n);
                *budget = budget.saturating_sub(words);
                stats.messages = stats.messages.saturating_add(1);
                stats.message_words = stats.message_words.saturating_add(words);
                match space {
                    MessageSpace::Standard => standard += 1,
                    MessageSpace::Vendor => vendor += 1,
                }
            }
            Err(e) => {
                stats.dropped_messages = stats.dropped_messages.saturating_add(1);
                stats.message_error.get_or_insert(e);
            }
        }
    }
    (standard, vendor, pos)
}

/// Where the unpacker delivers what it finds.
pub trait UnpackSink {
    /// A complete TL flit (NOP flits are dropped, not delivered).
    fn tl_flit(&mut self, flit: &[u8; TL_FLIT_LEN]);
    /// A DL message.
    fn message(&mut self, msg: DlMessage);
}

struct NullSink;

impl UnpackSink for NullSink {
    fn tl_flit(&mut self, _: &[u8; TL_FLIT_LEN]) {}
    fn message(&mut self, _: DlMessage) {}
}

/// What one [`DlUnpacker::unpack`] call did.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct UnpackStats {
    /// TL flits delivered.
    pub tl_flits: usize,
    /// NOP (all-zero) TL flits dropped.
    pub nop_flits: usize,
    /// DL messages delivered.
    pub messages: usize,
    /// TL bytes dropped while looking for a TL flit start after [`DlUnpacker::lose_sync`].
    pub dropped_bytes: usize,
    /// The unpacker re-synchronised in this flit.
    pub resynced: bool,
}

/// A malformed DL flit. The unpacker state and the sink are untouched.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct UnpackError {
    /// Segment (0..5) where the problem was found.
    pub segment: u8,
    /// What is wrong.
    pub error: Error,
}

impl fmt::Display for UnpackError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "DL flit segment {}: {}", self.segment, self.error)
    }
}

impl core::error::Error for UnpackError {}

/// Unpacks DL flits into TL flits and DL messages (see the module docs for the format).
///
/// State: the partial TL flit carried across DL flits, and whether the unpacker knows where
/// TL flits start. Every call handles exactly one flit.
#[derive(Debug, Clone)]
pub struct DlUnpacker {
    partial: [u8; TL_FLIT_LEN],
    have: usize,
    /// The partial TL flit is padding.
    partial_nop: bool,
    synced: bool,
}

impl Default for DlUnpacker {
    fn default() -> Self {
        Self::new()
    }
}

impl DlUnpacker {
    /// An unpacker expecting a TL flit start at the first TL byte of the next flit.
    pub const fn new() -> Self {
        DlUnpacker {
            partial: [0; TL_FLIT_LEN],
            have: 0,
            partial_nop: false,
            synced: true,
        }
    }

    /// Link reset (both ends): drop the partial TL flit and expect a TL flit start at the
    /// first TL byte of the next flit (a reset packer's first flit has `carry_bytes` 0).
    pub fn reset(&mut self) {
        *self = Self::new();
    }

    /// The next flit may not follow the last one (a flit was lost, or the peer was not reset):
    /// drop the partial TL flit and re-synchronise at the next segment without an alternative
    /// sector. Returns the bytes dropped.
    pub fn lose_sync(&mut self) -> usize {
        let dropped = self.have;
        self.have = 0;
        self.partial_nop = false;
        self.synced = false;
        dropped
    }

    /// Whether the unpacker knows where TL flits start.
    pub const fn is_synced(&self) -> bool {
        self.synced
    }

    /// Bytes of the partial TL flit carried into the next DL flit.
    pub const fn partial_len(&self) -> usize {
        self.have
    }

    /// Unpack one CRC-verified payload flit: deliver complete TL flits and messages to `sink`.
    ///
    /// The flit is validated before anything is delivered.
    ///
    /// # Errors
    /// [`UnpackError`] for a short buffer, an impossible segment header, a malformed message,
    /// an alternative sector past the payload, or TL framing that disagrees with the stream
    /// (after which [`DlUnpacker::lose_sync`] and a retry re-synchronise).
    pub fn unpack<T: AsRef<[u8]>, S: UnpackSink + ?Sized>(
        &mut self,
        flit: &DlFlit<T>,
        sink: &mut S,
    ) -> core::result::Result<UnpackStats, UnpackError> {
        flit.check_len()
            .map_err(|error| UnpackError { segment: 0, error })?;
        // Fast path: a flit of TL data only, whose five segment headers are those the stream
        // position implies (each segment with at most as many real TL flit starts as fit; the
        // flit may end in padding), is one contiguous run of TL bytes.
        if self.synced {
            let first = self.carry();
            let got = flit.segment_header_bytes();
            if let Some(real) = tl_only_real_starts(got, self.expected_tl_headers(), first) {
                let mut stats = UnpackStats::default();
                self.feed_tl_run(flit.payload(), real, sink, &mut stats);
                return Ok(stats);
            }
        }
        // Check the whole flit first (no TL bytes are moved), so that an error delivers nothing.
        self.clone()
            .walk::<T, NullSink, false>(flit, &mut NullSink)?;
        self.walk::<T, S, true>(flit, sink)
    }

    fn walk<T: AsRef<[u8]>, S: UnpackSink + ?Sized, const DELIVER: bool>(
        &mut self,
        flit: &DlFlit<T>,
        sink: &mut S,
    ) -> core::result::Result<UnpackStats, UnpackError> {
        let mut stats = UnpackStats::default();
        let headers = flit.segment_header_bytes();
        let payload = flit.payload();
        let mut alt_end = 0;
        for (i, hb) in headers.iter().enumerate() {
            let err = |error| UnpackError {
                segment: i as u8,
                error,
            };
            let (off, size) = segment_range(i).unwrap_or_default();
            let end = off.saturating_add(size);
            let h = SegmentHeader::parse(core::slice::from_ref(hb)).map_err(err)?;
            let info = SegmentInfo::from_header(&h).map_err(err)?;
            let mut skip = 0;
            match info.kind {
                SegmentKind::AltContinued if alt_end <= off => {
                    return Err(err(Error::Packing(
                        "alt sector continuation without an open alt sector",
                    )))
                }
                SegmentKind::AltContinued => {}
                _ if alt_end > off => {
                    return Err(err(Error::Packing(
                        "alt sector overruns a segment that does not continue it",
                    )))
                }
                SegmentKind::Alt { standard, vendor } => {
                    let from = payload.get(off..).unwrap_or_default();
                    let used = parse_alt_sector(from, standard, vendor, |m| {
                        stats.messages = stats.messages.saturating_add(1);
                        sink.message(m);
                    })
                    .map_err(err)?;
                    alt_end = off.saturating_add(used);
                }
                SegmentKind::Tl { carry_bytes } if !self.synced => {
                    // Re-synchronise: the first `carry_bytes` end a TL flit we cannot use.
                    skip = usize::from(carry_bytes);
                    stats.dropped_bytes = stats.dropped_bytes.saturating_add(skip);
                    stats.resynced = true;
                    self.synced = true;
                    self.have = 0;
                    self.partial_nop = false;
                }
                SegmentKind::Tl { carry_bytes } => {
                    if usize::from(carry_bytes) != self.carry() {
                        return Err(err(Error::Packing("TL carry disagrees with the stream")));
                    }
                }
            }
            let from = alt_end.clamp(off, end).saturating_add(skip);
            let area = payload.get(from..end).unwrap_or_default();
            if !self.synced {
                stats.dropped_bytes = stats.dropped_bytes.saturating_add(area.len());
                continue;
            }
            let starts = starts_in(self.carry(), area.len());
            if usize::from(info.tl_starts) > starts {
                return Err(err(Error::Packing(
                    "segment header TL flit starts disagree with the stream",
                )));
            }
            if DELIVER {
                self.feed(area, usize::from(info.tl_starts), sink, &mut stats);
            } else {
                self.have = self.have.saturating_add(area.len()) % TL_FLIT_LEN;
            }
        }
        Ok(stats)
    }

    /// Bytes still missing from the partial TL flit.
    fn carry(&self) -> usize {
        TL_FLIT_LEN.saturating_sub(self.have) % TL_FLIT_LEN
    }

    /// Append TL stream bytes, delivering every completed TL flit. The first `real` TL flits
    /// that start in `bytes` are real; later starts are padding.
    fn feed<S: UnpackSink + ?Sized>(
        &mut self,
        mut bytes: &[u8],
        mut real: usize,
        sink: &mut S,
        st: &mut UnpackStats,
    ) {
        while !bytes.is_empty() {
            if self.have == 0 {
                self.partial_nop = real == 0;
                real = real.saturating_sub(1);
                // Fast path: a whole TL flit in place is delivered without a copy.
                if let Some((head, tail)) = bytes.split_first_chunk::<TL_FLIT_LEN>() {
                    Self::deliver(head, self.partial_nop, sink, st);
                    bytes = tail;
                    continue;
                }
            }
            let n = self.carry_or_full().min(bytes.len());
            let (head, tail) = bytes.split_at(n);
            if let Some(dst) = self.partial.get_mut(self.have..self.have.saturating_add(n)) {
                dst.copy_from_slice(head);
            }
            self.have = self.have.saturating_add(n);
            bytes = tail;
            if self.have == TL_FLIT_LEN {
                self.have = 0;
                let full = self.partial;
                Self::deliver(&full, self.partial_nop, sink, st);
            }
        }
    }

    /// [`Self::feed`] over the five segments of a TL-only flit (one contiguous run of TL
    /// bytes) whose TL flit starts are real where `real` has a bit (bit `k`: the `k`-th start)
    /// and padding elsewhere: the same deliveries and state as feeding segment by segment, with
    /// the partial TL flit finished first and every whole TL flit delivered in place.
    fn feed_tl_run<S: UnpackSink + ?Sized>(
        &mut self,
        bytes: &[u8],
        real: u16,
        sink: &mut S,
        st: &mut UnpackStats,
    ) {
        let lead = self.carry().min(bytes.len());
        let (head, rest) = bytes.split_at(lead);
        if !head.is_empty() {
            if let Some(dst) = self
                .partial
                .get_mut(self.have..self.have.saturating_add(lead))
            {
                dst.copy_from_slice(head);
            }
            self.have = self.have.saturating_add(lead);
            if self.have == TL_FLIT_LEN {
                self.have = 0;
                let full = self.partial;
                Self::deliver(&full, self.partial_nop, sink, st);
            }
        }
        let mut flits = rest.chunks_exact(TL_FLIT_LEN);
        let mut k = 0u32;
        for f in &mut flits {
            if let Ok(f) = <&[u8; TL_FLIT_LEN]>::try_from(f) {
                Self::deliver(f, real >> k & 1 == 0, sink, st);
            }
            k += 1;
        }
        let tail = flits.remainder();
        if !tail.is_empty() {
            // `have` is 0 here: `lead` completed the partial flit or used all of `bytes`.
            if let Some(dst) = self.partial.get_mut(..tail.len()) {
                dst.copy_from_slice(tail);
            }
            self.have = tail.len();
            self.partial_nop = real >> k & 1 == 0;
        }
    }

    /// Hand one complete TL flit to the sink, or drop and count it if it is padding. A real
    /// TL flit may be all zeros (e.g. two data half-flits of zero data): padding is told by
    /// position (the segment header counts real starts), never by content.
    #[inline(always)]
    fn deliver<S: UnpackSink + ?Sized>(
        f: &[u8; TL_FLIT_LEN],
        nop: bool,
        sink: &mut S,
        st: &mut UnpackStats,
    ) {
        if nop {
            st.nop_flits = st.nop_flits.saturating_add(1);
        } else {
            st.tl_flits = st.tl_flits.saturating_add(1);
            sink.tl_flit(f);
        }
    }

    /// The segment headers of a flit that carries only TL data, continuing from the current
    /// stream position (a table lookup: the position is one of 16 multiples of 4 bytes).
    fn expected_tl_headers(&self) -> [u8; SEGMENT_COUNT] {
        TL_ONLY_HEADERS
            .get((self.have / 4) % (TL_FLIT_LEN / 4))
            .copied()
            .unwrap_or([0xff; SEGMENT_COUNT])
    }

    fn carry_or_full(&self) -> usize {
        TL_FLIT_LEN.saturating_sub(self.have)
    }
}

/// Parse an alternative sector (nom): `standard` messages then `vendor` words from the start
/// of `input`, calling `f` for each. Returns the bytes used.
fn parse_alt_sector(
    input: &[u8],
    standard: u8,
    vendor: u8,
    mut f: impl FnMut(DlMessage),
) -> Result<usize> {
    let mut run = |input, n: u8, space| {
        let n = usize::from(n);
        nom::multi::fold_many_m_n(n, n, nom_message(space), || (), |(), m| f(m))
            .parse(input)
            .map(|(rest, ())| rest)
            .map_err(|e| match e {
                nom::Err::Error(NomError(e)) | nom::Err::Failure(NomError(e)) => e,
                nom::Err::Incomplete(_) => Error::Packing("alt sector incomplete"),
            })
    };
    let rest = run(input, standard, MessageSpace::Standard)?;
    let rest = run(rest, vendor, MessageSpace::Vendor)?;
    Ok(input.len().saturating_sub(rest.len()))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::wire::dl_header::ExplicitHeader;
    use crate::wire::dl_msg::{DeviceId, TlRateNotification, UartStreamTransport, VendorDefined};
    use std::collections::VecDeque;
    use std::vec::Vec;

    #[derive(Default)]
    struct Src {
        tl: VecDeque<[u8; TL_FLIT_LEN]>,
        msgs: VecDeque<DlMessage>,
    }

    impl PackSource for Src {
        fn next_tl_flit(&mut self, out: &mut [u8; TL_FLIT_LEN]) -> bool {
            self.tl.pop_front().map(|f| *out = f).is_some()
        }
        fn peek_message(&self) -> Option<&DlMessage> {
            self.msgs.front()
        }
        fn pop_message(&mut self) {
            self.msgs.pop_front();
        }
    }

    #[derive(Default)]
    struct Sink {
        tl: Vec<[u8; TL_FLIT_LEN]>,
        msgs: Vec<DlMessage>,
    }

    impl UnpackSink for Sink {
        fn tl_flit(&mut self, flit: &[u8; TL_FLIT_LEN]) {
            self.tl.push(*flit);
        }
        fn message(&mut self, msg: DlMessage) {
            self.msgs.push(msg);
        }
    }

    /// TL flit number `n`: its index in bytes 0..4, nonzero filler after.
    fn tl(n: u32) -> [u8; TL_FLIT_LEN] {
        let mut f = [0xc3u8; TL_FLIT_LEN];
        f[..4].copy_from_slice(&n.to_be_bytes());
        f
    }

    fn numbered(count: u32) -> Src {
        Src {
            tl: (0..count).map(tl).collect(),
            msgs: VecDeque::new(),
        }
    }

    fn pack(p: &mut DlPacker, src: &mut Src) -> ([u8; FLIT_LEN], PackStats) {
        let mut buf = [0u8; FLIT_LEN];
        let h = FlitHeader::Explicit(ExplicitHeader {
            op: 0,
            payload: true,
            flit_seq_no: 1,
        });
        let st = p.pack_flit(src, &h, DlCrc::Bzip2, &mut buf).unwrap();
        (buf, st)
    }

    fn uart(words: usize) -> DlMessage {
        let mut t = UartStreamTransport::default();
        for w in 0..words {
            t.payload_dwords.push(w as u32 + 1).unwrap();
        }
        DlMessage::UartStreamTransport(t)
    }

    fn rate(rate: u16) -> DlMessage {
        DlMessage::TlRateNotification(TlRateNotification { rate, ack: false })
    }

    fn vendor(vendor_id: u16) -> DlMessage {
        DlMessage::Vendor(VendorDefined {
            vendor_id,
            r#type: 1,
            length: 0,
        })
    }

    #[test]
    fn test_segment_info_codes() {
        for b in 0u8..=255 {
            let Ok(h) = SegmentHeader::parse(&[b]) else {
                assert_eq!(b & 2, 2);
                continue;
            };
            match SegmentInfo::from_header(&h) {
                Ok(info) => assert_eq!(info.to_header(), h, "{b:#04x}"),
                Err(Error::Packing(_)) => assert!(!h.tl_flit0 && h.tl_flit1),
                Err(e) => panic!("{e}"),
            }
        }
        let tl = |carry_bytes, tl_starts| SegmentInfo {
            kind: SegmentKind::Tl { carry_bytes },
            tl_starts,
        };
        assert_eq!(tl(0, 2).to_header(), SegmentHeader::parse(&[0x90]).unwrap());
        assert_eq!(
            tl(60, 1).to_header(),
            SegmentHeader::parse(&[0x7c]).unwrap()
        );
        assert_eq!(starts_in(0, 128), 2);
        assert_eq!(starts_in(60, 124), 1);
        assert_eq!(starts_in(4, 68), 1);
        assert_eq!(starts_in(4, 69), 2);
        assert_eq!(starts_in(60, 60), 0);
        assert_eq!(starts_in(60, 0), 0);
    }

    #[test]
    fn test_straddle_layout() {
        let mut p = DlPacker::new();
        let mut src = numbered(30);
        let (f0, st0) = pack(&mut p, &mut src);
        // 628 = 9 × 64 + 52: ten flits start, nine finish, 12 bytes carry over.
        assert_eq!(
            (st0.tl_started, st0.tl_finished, st0.nop_started),
            (10, 9, 0)
        );
        assert_eq!(p.carry_bytes(), 12);
        assert!(p.carrying_tl_flit());
        assert_eq!(&f0[3..8], &[0x90, 0x90, 0x90, 0x90, 0x94]);
        assert_eq!(&f0[8..12], &[0, 0, 0, 0]);
        assert_eq!(&f0[8 + 576..8 + 580], &[0, 0, 0, 9]);
        let (f1, st1) = pack(&mut p, &mut src);
        assert_eq!((st1.tl_started, st1.tl_finished), (10, 10));
        // Carry 12 bytes = 3 words: message0 = 3.
        assert_eq!(f1[3], 0x9c);
        let mut u = DlUnpacker::new();
        let mut sink = Sink::default();
        let s0 = u
            .unpack(&DlFlit::new_checked(&f0[..]).unwrap(), &mut sink)
            .unwrap();
        assert_eq!((s0.tl_flits, u.partial_len()), (9, 52));
        u.unpack(&DlFlit::new_checked(&f1[..]).unwrap(), &mut sink)
            .unwrap();
        assert_eq!(sink.tl, (0..19).map(tl).collect::<Vec<_>>());
    }

    #[test]
    fn test_all_zero_tl_flits_are_delivered() {
        // Real TL flits of zeros (e.g. data half-flits of zeroed memory) are not padding.
        let mut p = DlPacker::new();
        let mut src = Src::default();
        src.tl.extend([[0u8; TL_FLIT_LEN]; 12]);
        let (f0, st0) = pack(&mut p, &mut src);
        let (f1, st1) = pack(&mut p, &mut src);
        assert_eq!((st0.tl_started, st1.tl_started), (10, 2));
        let mut u = DlUnpacker::new();
        let mut sink = Sink::default();
        let s0 = u
            .unpack(&DlFlit::new_checked(&f0[..]).unwrap(), &mut sink)
            .unwrap();
        let s1 = u
            .unpack(&DlFlit::new_checked(&f1[..]).unwrap(), &mut sink)
            .unwrap();
        assert_eq!((s0.tl_flits + s1.tl_flits, s0.nop_flits), (12, 0));
        assert_eq!(sink.tl, [[0u8; TL_FLIT_LEN]; 12]);
        assert!(s1.nop_flits > 0);
    }

    #[test]
    fn test_nop_padding() {
        let mut p = DlPacker::new();
        let mut src = numbered(2);
        let (f0, st) = pack(&mut p, &mut src);
        assert_eq!((st.tl_started, st.tl_finished, st.nop_started), (2, 2, 8));
        assert!(!p.carrying_tl_flit() && p.carry_bytes() == 12);
        let mut u = DlUnpacker::new();
        let mut sink = Sink::default();
        let s = u
            .unpack(&DlFlit::new_checked(&f0[..]).unwrap(), &mut sink)
            .unwrap();
        assert_eq!((s.tl_flits, s.nop_flits), (2, 7));
        assert_eq!(sink.tl, [tl(0), tl(1)]);
    }

    #[test]
    fn test_messages_first() {
        let mut p = DlPacker::new();
        let mut src = numbered(20);
        src.msgs.extend([rate(1), uart(32), vendor(7), rate(2)]);
        let (f0, st) = pack(&mut p, &mut src);
        assert_eq!((st.messages, st.message_words), (4, 36));
        // Segment 0 opens an alt sector: 2 standard, 1 vendor word (4 + 132 + 4 bytes) that runs
        // into segment 1 (140 bytes); the standard message after the vendor word opens
        // segment 2's.
        let h: Vec<_> = f0[3..8]
            .iter()
            .map(|b| SegmentInfo::from_header(&SegmentHeader::parse(&[*b]).unwrap()).unwrap())
            .collect();
        assert_eq!(
            h[0].kind,
            SegmentKind::Alt {
                standard: 2,
                vendor: 1
            }
        );
        assert_eq!(h[0].tl_starts, 0);
        assert_eq!(h[1].kind, SegmentKind::AltContinued);
        assert_eq!(h[1].tl_starts, 2);
        assert_eq!(
            h[2].kind,
            SegmentKind::Alt {
                standard: 1,
                vendor: 0
            }
        );
        assert_eq!(h[3].kind, SegmentKind::Tl { carry_bytes: 16 });
        assert_eq!(&f0[8..12], &[0, 1, 1, 0]);
        assert_eq!(&f0[8 + 140..8 + 144], &[0, 0, 0, 0]); // TL flit 0 after the alt sector
        let mut u = DlUnpacker::new();
        let mut sink = Sink::default();
        let s = u
            .unpack(&DlFlit::new_checked(&f0[..]).unwrap(), &mut sink)
            .unwrap();
        assert_eq!(s.messages, 4);
        assert_eq!(sink.msgs, [rate(1), uart(32), vendor(7), rate(2)]);
        assert_eq!(sink.tl, (0..s.tl_flits as u32).map(tl).collect::<Vec<_>>());
    }

    #[test]
    fn test_message_waits_for_next_flit() {
        let mut p = DlPacker::new();
        let mut src = numbered(40);
        src.msgs.extend((0..5).map(|_| uart(32)));
        src.msgs.push_back(rate(9));
        let (f0, st0) = pack(&mut p, &mut src);
        // 3 × 132 B in segment 0's alt sector; the 4th does not fit in segment 4's 120 bytes
        // and waits (with everything behind it) for the next flit.
        assert_eq!(st0.messages, 3);
        let (f1, st1) = pack(&mut p, &mut src);
        assert_eq!(st1.messages, 3);
        let mut u = DlUnpacker::new();
        let mut sink = Sink::default();
        for f in [&f0, &f1] {
            u.unpack(&DlFlit::new_checked(&f[..]).unwrap(), &mut sink)
                .unwrap();
        }
        assert_eq!(sink.msgs.len(), 6);
        assert_eq!(sink.msgs[5], rate(9));
        let n = sink.tl.len() as u32;
        assert_eq!(sink.tl, (0..n).map(tl).collect::<Vec<_>>());
        assert!(n > 0);
    }

    #[test]
    fn test_message_budget_and_bad_message() {
        let mut p = DlPacker::new().with_max_message_words(2);
        let mut src = numbered(0);
        let bad = DlMessage::DeviceId(DeviceId {
            id: 2000,
            ..Default::default()
        });
        src.msgs.extend([bad, rate(1), rate(2), rate(3)]);
        let (_, st) = pack(&mut p, &mut src);
        assert_eq!((st.messages, st.dropped_messages), (2, 1));
        assert_eq!(st.message_error, Some(Error::FieldRange("id")));
        assert_eq!(src.msgs, [rate(3)]);
    }

    #[test]
    fn test_lose_sync_and_resync() {
        let mut p = DlPacker::new();
        let mut src = numbered(40);
        let flits: Vec<_> = (0..3).map(|_| pack(&mut p, &mut src).0).collect();
        let mut u = DlUnpacker::new();
        let mut sink = Sink::default();
        u.unpack(&DlFlit::new_checked(&flits[0][..]).unwrap(), &mut sink)
            .unwrap();
        // Flit 1 lost: flit 2 disagrees with the stream and nothing is delivered.
        let f2 = DlFlit::new_checked(&flits[2][..]).unwrap();
        assert_eq!(
            u.unpack(&f2, &mut sink),
            Err(UnpackError {
                segment: 0,
                error: Error::Packing("TL carry disagrees with the stream")
            })
        );
        assert_eq!((sink.tl.len(), u.partial_len()), (9, 52));
        assert_eq!(u.lose_sync(), 52);
        assert!(!u.is_synced());
        let s = u.unpack(&f2, &mut sink).unwrap();
        // Flit 2 starts at TL stream byte 1256 = 19 × 64 + 40: 24 bytes end flit 19.
        assert!(s.resynced && u.is_synced());
        assert_eq!(s.dropped_bytes, 24);
        assert_eq!(sink.tl[9], tl(20));
        assert_eq!(sink.tl[9..], (20..29).map(tl).collect::<Vec<_>>());
        u.reset();
        assert_eq!((u.partial_len(), u.is_synced()), (0, true));
    }

    #[test]
    fn test_resync_skips_alt_segments() {
        let mut p = DlPacker::new();
        let mut src = numbered(40);
        pack(&mut p, &mut src);
        src.msgs.extend([uart(32), uart(32)]);
        let (f1, _) = pack(&mut p, &mut src);
        let mut u = DlUnpacker::new();
        u.lose_sync();
        let mut sink = Sink::default();
        let s = u
            .unpack(&DlFlit::new_checked(&f1[..]).unwrap(), &mut sink)
            .unwrap();
        // Messages are flit-local and always delivered; TL bytes before segment 3 are lost.
        assert_eq!(sink.msgs, [uart(32), uart(32)]);
        assert!(s.resynced);
        // Segment 2's TL area (264..384) and segment 3's carry: 12 + 64 + 44 + 20.
        assert_eq!(s.dropped_bytes, 120 + 20);
        let first = u32::from_be_bytes(sink.tl[0][..4].try_into().unwrap());
        assert_eq!(
            sink.tl,
            (first..first + s.tl_flits as u32)
                .map(tl)
                .collect::<Vec<_>>()
        );
    }

    /// A flit with the given segment headers and payload words at the start, CRC ignored.
    fn raw(headers: [u8; 5], words: &[u32]) -> [u8; FLIT_LEN] {
        let mut b = [0u8; FLIT_LEN];
        b[3..8].copy_from_slice(&headers);
        for (i, w) in words.iter().enumerate() {
            b[8 + 4 * i..12 + 4 * i].copy_from_slice(&w.to_be_bytes());
        }
        b
    }

    fn unpack_err(b: &[u8]) -> UnpackError {
        let mut u = DlUnpacker::new();
        let mut sink = Sink::default();
        let e = u.unpack(&DlFlit::new_unchecked(b), &mut sink).unwrap_err();
        assert!(sink.tl.is_empty() && sink.msgs.is_empty());
        assert_eq!((u.partial_len(), u.is_synced()), (0, true));
        e
    }

    #[test]
    fn test_impossible_segment_headers() {
        let e = |segment, error| UnpackError { segment, error };
        let good = 0x90;
        // Continuation with nothing open.
        assert_eq!(
            unpack_err(&raw([0x01, good, good, good, 0x94], &[])),
            e(
                0,
                Error::Packing("alt sector continuation without an open alt sector")
            )
        );
        // tl_flit1 without tl_flit0.
        assert_eq!(
            unpack_err(&raw([0x80, good, good, good, 0x94], &[])),
            e(
                0,
                Error::Packing("segment header: tl_flit1 without tl_flit0")
            )
        );
        // A 33-word message in segment 0, but segment 1 does not continue it.
        let mut words = [0u32; 33];
        words[0] = 0xf800_0004;
        assert_eq!(
            unpack_err(&raw([0x05, good, good, good, 0x94], &words)),
            e(
                1,
                Error::Packing("alt sector overruns a segment that does not continue it")
            )
        );
        // More real TL flit starts claimed than fit: a 28-word message leaves 16 TL bytes in
        // segment 0 (one start), the header claims two.
        let mut words = [0u32; 28];
        words[0] = 0xd000_0004;
        assert_eq!(
            unpack_err(&raw([0x95, good, good, good, 0x94], &words)),
            e(
                0,
                Error::Packing("segment header TL flit starts disagree with the stream")
            )
        );
        // Wrong carry.
        assert_eq!(
            unpack_err(&raw([0x94, good, good, good, 0x94], &[])),
            e(0, Error::Packing("TL carry disagrees with the stream"))
        );
        // Reserved bit.
        assert_eq!(
            unpack_err(&raw([0x92, good, good, good, 0x94], &[])),
            e(0, Error::Reserved("segment header rsvd"))
        );
        // Unknown and reserved messages in the alt sector.
        assert_eq!(
            unpack_err(&raw([0x95, good, good, good, 0x94], &[0x0000_0040])),
            e(
                0,
                Error::UnknownMessage {
                    mclass: 0,
                    mtype: 1
                }
            )
        );
        assert_eq!(
            unpack_err(&raw([0x95, good, good, good, 0x94], &[0x0000_0101])),
            e(0, Error::Reserved("DL message compressed"))
        );
    }

    #[test]
    fn test_alt_sector_past_payload() {
        // Segment 4 claims three 33-word messages (396 bytes) in its 120.
        let mut b = raw([0x90, 0x90, 0x90, 0x90, 0x0d], &[]);
        for k in 0..3 {
            let at = 8 + 508 + 132 * k;
            if at + 4 <= 636 {
                b[at..at + 4].copy_from_slice(&0xf800_0004u32.to_be_bytes());
            }
        }
        let err = unpack_err(&b);
        assert_eq!(err.segment, 4);
        assert!(matches!(err.error, Error::Truncated { .. }), "{err}");
    }

    #[test]
    fn test_truncated_buffers() {
        let mut p = DlPacker::new();
        let mut src = numbered(1);
        let h = FlitHeader::Explicit(ExplicitHeader::default());
        assert_eq!(
            p.pack_flit(&mut src, &h, DlCrc::Bzip2, &mut [0u8; 639]),
            Err(Error::BufferTooSmall {
                needed: FLIT_LEN,
                got: 639
            })
        );
        assert!(p
            .pack(&mut src, &mut DlFlit::new_unchecked(&mut [0u8; 100][..]))
            .is_err());
        assert_eq!(src.tl.len(), 1);
        assert_eq!(
            unpack_err(&[0u8; 639]),
            UnpackError {
                segment: 0,
                error: Error::Truncated {
                    needed: FLIT_LEN,
                    got: 639
                }
            }
        );
    }

    #[test]
    fn test_packed_flit_crc() {
        let mut p = DlPacker::new();
        let mut src = numbered(3);
        let (f, _) = pack(&mut p, &mut src);
        let v = DlFlit::new_checked(&f[..]).unwrap();
        v.verify_crc(DlCrc::Bzip2).unwrap();
        assert_eq!(&f[..3], &[0x10, 0x01, 0x00]);
        p.reset();
        assert_eq!(p.carry_bytes(), 0);
    }
}

#[cfg(test)]
mod fast_path_tests {
    use super::*;
    use crate::wire::dl_header::ExplicitHeader;

    struct Src(u8);
    impl PackSource for Src {
        fn next_tl_flit(&mut self, out: &mut [u8; TL_FLIT_LEN]) -> bool {
            self.0 = self.0.wrapping_add(1) | 1;
            *out = [self.0; TL_FLIT_LEN];
            true
        }
    }

    #[test]
    fn packed_tl_only_flits_take_the_fast_path() {
        let mut p = DlPacker::new();
        let mut un = DlUnpacker::new();
        let mut src = Src(0);
        for i in 0..20u16 {
            let mut buf = [0u8; FLIT_LEN];
            let h = FlitHeader::Explicit(ExplicitHeader {
                op: 0,
                payload: true,
                flit_seq_no: i + 1,
            });
            p.pack_flit(&mut src, &h, DlCrc::Bzip2, &mut buf).unwrap();
            let f = DlFlit::new_unchecked(&buf[..]);
            assert_eq!(
                f.segment_header_bytes(),
                un.expected_tl_headers(),
                "flit {i}"
            );
            un.unpack(&f, &mut NullSink).unwrap();
        }
    }
}

/// The packer's and unpacker's fast paths against the general algorithms, on random streams
/// of TL flits, padding and DL messages, and on random segment headers.
#[cfg(test)]
mod equivalence_tests {
    use super::*;
    use crate::wire::dl_header::ExplicitHeader;
    use crate::wire::dl_msg::TlRateNotification;
    use std::collections::VecDeque;
    use std::vec::Vec;

    struct Rng(u64);
    impl Rng {
        fn next(&mut self) -> u64 {
            self.0 ^= self.0 << 13;
            self.0 ^= self.0 >> 7;
            self.0 ^= self.0 << 17;
            self.0
        }
        fn below(&mut self, n: u64) -> u64 {
            self.next() % n
        }
    }

    /// A source that runs dry at random points (the rest of a pack call is then padding), and
    /// whose flits are sometimes all zeros.
    struct Src {
        tl: VecDeque<[u8; TL_FLIT_LEN]>,
        msgs: VecDeque<DlMessage>,
        /// Flits handed out before the source reports none, per pack call.
        budget: usize,
    }
    impl PackSource for Src {
        fn next_tl_flit(&mut self, out: &mut [u8; TL_FLIT_LEN]) -> bool {
            if self.budget == 0 {
                return false;
            }
            match self.tl.pop_front() {
                Some(f) => {
                    self.budget -= 1;
                    *out = f;
                    true
                }
                None => false,
            }
        }
        fn peek_message(&self) -> Option<&DlMessage> {
            self.msgs.front()
        }
        fn pop_message(&mut self) {
            self.msgs.pop_front();
        }
    }

    /// The packer as it was before its fast paths: every TL byte through `cur`, padding
    /// copied from a zeroed `cur`.
    struct RefPacker {
        cur: [u8; TL_FLIT_LEN],
        remaining: usize,
        cur_is_nop: bool,
    }

    impl RefPacker {
        fn pack(&mut self, src: &mut Src, flit: &mut [u8; FLIT_LEN]) -> PackStats {
            let mut flit = DlFlit::new_unchecked(&mut flit[..]);
            let mut stats = PackStats::default();
            let mut headers = [0u8; SEGMENT_COUNT];
            let mut alt_end = 0;
            let mut open = true;
            let mut budget = PAYLOAD_LEN / 4;
            let payload = flit.payload_mut();
            for (i, hb) in headers.iter_mut().enumerate() {
                let (off, size) = segment_range(i).unwrap();
                let end = off + size;
                let kind = if alt_end > off {
                    SegmentKind::AltContinued
                } else {
                    let (standard, vendor, used) =
                        place_messages(src, payload, off, &mut open, &mut budget, &mut stats);
                    if standard + vendor > 0 {
                        alt_end = used;
                        SegmentKind::Alt { standard, vendor }
                    } else {
                        SegmentKind::Tl {
                            carry_bytes: self.remaining as u8,
                        }
                    }
                };
                let tl_from = alt_end.clamp(off, end);
                let mut starts = 0;
                let mut rest = &mut payload[tl_from..end];
                while !rest.is_empty() {
                    if self.remaining == 0 {
                        self.cur_is_nop = !src.next_tl_flit(&mut self.cur);
                        if self.cur_is_nop {
                            self.cur = [0; TL_FLIT_LEN];
                            stats.nop_started += 1;
                        } else {
                            stats.tl_started += 1;
                            starts += 1;
                        }
                        self.remaining = TL_FLIT_LEN;
                    }
                    let n = self.remaining.min(rest.len());
                    let from = TL_FLIT_LEN - self.remaining;
                    let (out, tail) = rest.split_at_mut(n);
                    out.copy_from_slice(&self.cur[from..from + n]);
                    rest = tail;
                    self.remaining -= n;
                    if self.remaining == 0 && !self.cur_is_nop {
                        stats.tl_finished += 1;
                    }
                }
                SegmentInfo {
                    kind,
                    tl_starts: starts,
                }
                .to_header()
                .emit(core::slice::from_mut(hb))
                .unwrap();
            }
            flit.set_segment_header_bytes(headers);
            stats
        }
    }

    #[derive(Default, PartialEq, Debug)]
    struct Sink {
        tl: Vec<[u8; TL_FLIT_LEN]>,
        msgs: Vec<DlMessage>,
    }
    impl UnpackSink for Sink {
        fn tl_flit(&mut self, flit: &[u8; TL_FLIT_LEN]) {
            self.tl.push(*flit);
        }
        fn message(&mut self, msg: DlMessage) {
            self.msgs.push(msg);
        }
    }

    /// The general unpacker (validation pass, then delivery pass), bypassing the fast paths.
    fn unpack_general(
        u: &mut DlUnpacker,
        flit: &DlFlit<&[u8]>,
        sink: &mut Sink,
    ) -> core::result::Result<UnpackStats, UnpackError> {
        u.clone()
            .walk::<&[u8], NullSink, false>(flit, &mut NullSink)?;
        u.walk::<&[u8], Sink, true>(flit, sink)
    }

    fn same_state(a: &DlUnpacker, b: &DlUnpacker) -> bool {
        a.have == b.have
            && a.synced == b.synced
            && a.partial[..a.have] == b.partial[..b.have]
            && (a.have == 0 || a.partial_nop == b.partial_nop)
    }

    fn random_stream(r: &mut Rng, n: usize) -> VecDeque<[u8; TL_FLIT_LEN]> {
        (0..n)
            .map(|k| {
                if r.below(5) == 0 {
                    [0u8; TL_FLIT_LEN]
                } else {
                    let mut f = [0u8; TL_FLIT_LEN];
                    for (i, b) in f.iter_mut().enumerate() {
                        *b = (k * 7 + i) as u8 | 1;
                    }
                    f
                }
            })
            .collect()
    }

    #[test]
    fn packer_matches_the_reference_packer() {
        let mut r = Rng(0x9e37_79b9_7f4a_7c15);
        for case in 0..300 {
            let tl = random_stream(&mut r, 200);
            let mut a = Src {
                tl: tl.clone(),
                msgs: VecDeque::new(),
                budget: 0,
            };
            let mut b = Src {
                tl,
                msgs: VecDeque::new(),
                budget: 0,
            };
            let mut p = DlPacker::new();
            let mut q = RefPacker {
                cur: [0; TL_FLIT_LEN],
                remaining: 0,
                cur_is_nop: false,
            };
            for k in 0..20 {
                let budget = match r.below(4) {
                    0 => 0,
                    1 => r.below(3) as usize,
                    2 => r.below(11) as usize,
                    _ => usize::MAX,
                };
                a.budget = budget;
                b.budget = budget;
                if r.below(6) == 0 {
                    let m = DlMessage::TlRateNotification(TlRateNotification {
                        rate: k,
                        ack: false,
                    });
                    a.msgs.push_back(m.clone());
                    b.msgs.push_back(m);
                }
                // Slots start with stale bytes (a reused replay slot).
                let stale = r.next() as u8;
                let mut fa = [stale; FLIT_LEN];
                let mut fb = [stale; FLIT_LEN];
                let sa = p
                    .pack(&mut a, &mut DlFlit::new_unchecked(&mut fa[..]))
                    .unwrap();
                let sb = q.pack(&mut b, &mut fb);
                assert_eq!(sa, sb, "case {case} flit {k}");
                assert_eq!(
                    fa[3..CRC_COVERED],
                    fb[3..CRC_COVERED],
                    "case {case} flit {k}"
                );
                assert_eq!(
                    (p.remaining, p.carrying_tl_flit()),
                    (q.remaining, q.remaining > 0 && !q.cur_is_nop)
                );
            }
        }
    }

    const CRC_COVERED: usize = FLIT_LEN - 4;

    #[test]
    fn unpacker_fast_paths_match_the_general_unpacker() {
        let mut r = Rng(0x2545_f491_4f6c_dd1d);
        let h = FlitHeader::Explicit(ExplicitHeader {
            op: 0,
            payload: true,
            flit_seq_no: 1,
        });
        let mut fast_hits = 0;
        for case in 0..300 {
            let mut src = Src {
                tl: random_stream(&mut r, 200),
                msgs: VecDeque::new(),
                budget: 0,
            };
            let mut p = DlPacker::new();
            let mut fast = DlUnpacker::new();
            let mut general = DlUnpacker::new();
            for k in 0..20 {
                src.budget = match r.below(3) {
                    0 => r.below(3) as usize,
                    1 => r.below(11) as usize,
                    _ => usize::MAX,
                };
                if r.below(8) == 0 {
                    src.msgs
                        .push_back(DlMessage::TlRateNotification(TlRateNotification {
                            rate: 3,
                            ack: false,
                        }));
                }
                let mut buf = [0u8; FLIT_LEN];
                p.pack_flit(&mut src, &h, DlCrc::Bzip2, &mut buf).unwrap();
                // Sometimes damage a segment header (start bits, carry bits, reserved bit)
                // or drop sync, so that both paths must also agree on rejections.
                if r.below(10) == 0 {
                    let i = 3 + r.below(5) as usize;
                    buf[i] ^= [0x10, 0x80, 0x90, 0x04, 0x20, 0x02, 0x01][r.below(7) as usize];
                }
                if r.below(25) == 0 {
                    fast.lose_sync();
                    general.lose_sync();
                }
                let view = DlFlit::new_unchecked(&buf[..]);
                let expected = fast.expected_tl_headers();
                if fast.synced
                    && tl_only_real_starts(view.segment_header_bytes(), expected, fast.carry())
                        .is_some()
                {
                    fast_hits += 1;
                }
                let (mut sa, mut sb) = (Sink::default(), Sink::default());
                let ra = fast.unpack(&view, &mut sa);
                let rb = unpack_general(&mut general, &view, &mut sb);
                assert_eq!(ra, rb, "case {case} flit {k}");
                assert_eq!(sa, sb, "case {case} flit {k}");
                if ra.is_err() {
                    fast.lose_sync();
                    general.lose_sync();
                }
                assert!(same_state(&fast, &general), "case {case} flit {k}");
            }
        }
        assert!(fast_hits > 1000, "{fast_hits}");
    }
}
