//! Requester and completer of one accelerator port (`spec-notes/simulator.md#accelerators`).
//!
//! **Stand-in.** The protocol crate's transaction layer (`podlink_protocol::txn`: `Requester`,
//! `Completer`, `MemoryTarget`, `CreditGate`) is not in main yet. This module has the same
//! shape (sans-IO, `now` as an argument, `poll_transmit` through a credit gate, TL transfers
//! of the protocol crate's wire types) so that the simulator swaps to the real thing by
//! changing its imports. It implements only what the workloads use: reads and full writes of
//! 64..=256 B inside one 256 B region, and 8 B fetch-add atomics returning the old value.
//! Every field it sends is a real, protocol-crate-encoded TL control field.

use podlink_protocol::time::Instant;
use podlink_protocol::wire::{
    AccelId, Opcode, Tag, TlField, TlTransfer, TlUncompressedRequest, TlUncompressedResponse, Vc,
};
use std::collections::VecDeque;

/// Status OK.
const STATUS_OK: u8 = 0;
/// Status "address not mapped" (memory refused the access).
const STATUS_NOT_MAPPED: u8 = 1;
/// `attr` of a fetch-add on 8 B elements: op 0 (bits 7..4), size code 1 (bits 3..2).
pub const ATTR_FETCH_ADD_8: u8 = 0x04;

/// Which way an item flows: requests and responses use separate credit classes.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Flow {
    /// Requester → completer.
    Request,
    /// Completer → requester.
    Response,
}

/// TL credits between the transaction layer and the link (provided by the simulator).
pub trait CreditGate {
    /// Take one command credit and `data_beats` data credits of `flow` on `vc`, all or nothing.
    fn try_consume(&mut self, flow: Flow, vc: Vc, data_beats: u8) -> bool;
}

/// Memory a completer serves.
pub trait MemoryTarget {
    /// Fill `buf` from `addr`.
    ///
    /// # Errors
    /// `Err(())` when the address is not backed.
    #[allow(clippy::result_unit_err)]
    fn read(&mut self, addr: u64, buf: &mut [u8]) -> Result<(), ()>;
    /// Store `data` at `addr`.
    ///
    /// # Errors
    /// `Err(())` when the address is not backed.
    #[allow(clippy::result_unit_err)]
    fn write(&mut self, addr: u64, data: &[u8]) -> Result<(), ()>;
}

/// The handle of a submitted operation.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct OpId(pub u32);

/// One operation (one request: 64..=256 B in one 256 B region, or an 8 B atomic).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Operation<'a> {
    /// Read `len` bytes at `addr`.
    Read {
        /// Byte address, 64 B aligned.
        addr: u64,
        /// 64, 128, 192 or 256.
        len: u32,
    },
    /// Write whole 64 B blocks.
    WriteFull {
        /// Byte address, 64 B aligned.
        addr: u64,
        /// The bytes (64, 128, 192 or 256).
        data: &'a [u8],
    },
    /// Fetch-add on the 8 B element at `addr`, returning the old value.
    FetchAdd {
        /// Byte address, 8 B aligned.
        addr: u64,
        /// The operand.
        operand: u64,
    },
}

/// An operation failed.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum TxnError {
    /// The completer answered with this status.
    Status(u8),
}

/// An operation finished.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Completion {
    /// The operation.
    pub id: OpId,
    /// `Ok(Some(old))` for an atomic, `Ok(None)` otherwise.
    pub result: Result<Option<u64>, TxnError>,
}

/// Read data that arrived for an operation.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ReadData<'a> {
    /// The operation.
    pub op: OpId,
    /// Offset of `data` from the operation's first byte.
    pub offset: u32,
    /// The bytes.
    pub data: &'a [u8],
}

/// Why `submit` refused an operation (nothing was queued).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum SubmitError {
    /// Every operation slot is taken.
    Full,
    /// The operation breaks a rule (size, alignment, 256 B crossing).
    Invalid,
}

#[derive(Debug, Clone, Copy)]
struct Piece {
    op: u32,
    cmd: Opcode,
    dst: AccelId,
    vc: Vc,
    addr: u64,
    len: u32,
    data: [u8; 256],
}

impl Piece {
    fn data_beats(&self) -> u8 {
        match self.cmd {
            Opcode::Read => 0,
            Opcode::AtomicR => 1,
            _ => (self.len / 64) as u8,
        }
    }
    fn payload(&self) -> &[u8] {
        match self.cmd {
            Opcode::Read => &[],
            Opcode::AtomicR => self.data.get(..8).unwrap_or(&[]),
            _ => self.data.get(..self.len as usize).unwrap_or(&[]),
        }
    }
}

#[derive(Debug, Clone, Copy, Default)]
struct Outstanding {
    op: u32,
    busy: bool,
}

/// The requester side of a port: `TAGS` tags, at most `OPS` operations open, at most `QUEUE`
/// requests waiting for a tag or credits.
#[derive(Debug)]
pub struct Requester<const TAGS: usize, const OPS: usize, const QUEUE: usize> {
    local: AccelId,
    free_tags: Vec<u16>,
    free_ops: Vec<u32>,
    outstanding: Vec<Outstanding>,
    queue: VecDeque<Piece>,
    done: VecDeque<Completion>,
    staged: Piece,
    staged_field: TlField,
    /// Transmit attempts that found no credits.
    pub credit_stalls: u64,
    /// Responses dropped (unknown tag or wrong kind).
    pub dropped: u64,
}

impl<const TAGS: usize, const OPS: usize, const QUEUE: usize> Requester<TAGS, OPS, QUEUE> {
    /// A requester for accelerator `local`.
    pub fn new(local: AccelId) -> Self {
        Requester {
            local,
            free_tags: (0..TAGS as u16).rev().collect(),
            free_ops: (0..OPS as u32).rev().collect(),
            outstanding: vec![Outstanding::default(); TAGS],
            queue: VecDeque::with_capacity(QUEUE),
            done: VecDeque::new(),
            staged: Piece {
                op: 0,
                cmd: Opcode::Read,
                dst: AccelId::default(),
                vc: Vc::default(),
                addr: 0,
                len: 0,
                data: [0; 256],
            },
            staged_field: TlField::UncompressedRequest(TlUncompressedRequest::default()),
            credit_stalls: 0,
            dropped: 0,
        }
    }

    /// Operations open (submitted, not yet polled as completions).
    pub fn ops_open(&self) -> usize {
        OPS - self.free_ops.len()
    }

    /// Requests waiting to be sent.
    pub fn queued(&self) -> usize {
        self.queue.len()
    }

    /// Submit an operation to `dst` on `vc`.
    ///
    /// # Errors
    /// [`SubmitError`].
    pub fn submit(
        &mut self,
        _now: Instant,
        dst: AccelId,
        vc: Vc,
        op: &Operation<'_>,
    ) -> Result<OpId, SubmitError> {
        let mut data = [0u8; 256];
        let (cmd, addr, len) = match *op {
            Operation::Read { addr, len } => (Opcode::Read, addr, len),
            Operation::WriteFull { addr, data: d } => {
                data.get_mut(..d.len())
                    .ok_or(SubmitError::Invalid)?
                    .copy_from_slice(d);
                (Opcode::WriteFull, addr, d.len() as u32)
            }
            Operation::FetchAdd { addr, operand } => {
                if addr % 8 != 0 {
                    return Err(SubmitError::Invalid);
                }
                data[..8].copy_from_slice(&operand.to_le_bytes());
                (Opcode::AtomicR, addr, 8)
            }
        };
        if cmd != Opcode::AtomicR
            && (addr % 64 != 0 || len == 0 || len % 64 != 0 || (addr % 256) + u64::from(len) > 256)
        {
            return Err(SubmitError::Invalid);
        }
        if self.queue.len() >= QUEUE {
            return Err(SubmitError::Full);
        }
        let slot = self.free_ops.pop().ok_or(SubmitError::Full)?;
        self.queue.push_back(Piece {
            op: slot,
            cmd,
            dst,
            vc,
            addr,
            len,
            data,
        });
        Ok(OpId(slot))
    }

    /// The next request to send, if a tag and credits are available.
    pub fn poll_transmit(
        &mut self,
        _now: Instant,
        credits: &mut impl CreditGate,
    ) -> Option<TlTransfer<'_>> {
        let p = self.queue.front()?;
        if self.free_tags.is_empty() {
            return None;
        }
        if !credits.try_consume(Flow::Request, p.vc, p.data_beats()) {
            self.credit_stalls += 1;
            return None;
        }
        let piece = self.queue.pop_front()?;
        let tag = self.free_tags.pop()?;
        if let Some(o) = self.outstanding.get_mut(usize::from(tag)) {
            *o = Outstanding {
                op: piece.op,
                busy: true,
            };
        }
        let beats = u32::from(piece.data_beats()).max(1);
        let req = TlUncompressedRequest {
            cmd: piece.cmd,
            vchan: piece.vc,
            tag: Tag::from_bits_truncate(tag),
            attr: if piece.cmd == Opcode::AtomicR {
                ATTR_FETCH_ADD_8
            } else {
                0xff
            },
            len: (piece.len / 4).saturating_sub(1) as u8,
            addr: piece.addr >> 2,
            srcaccid: self.local,
            dstaccid: piece.dst,
            numbeats: if piece.cmd == Opcode::Read {
                0
            } else {
                (beats - 1) as u8
            },
            ..Default::default()
        };
        self.staged = piece;
        self.staged_field = TlField::UncompressedRequest(req);
        Some(TlTransfer::new(self.staged_field, self.staged.payload()))
    }

    /// A received response; returns the read data it carries.
    pub fn handle_response<'a>(
        &mut self,
        _now: Instant,
        t: &TlTransfer<'a>,
    ) -> Option<ReadData<'a>> {
        let TlField::UncompressedResponse(r) = t.field else {
            self.dropped += 1;
            return None;
        };
        let tag = r.tag.get();
        let o = match self.outstanding.get_mut(usize::from(tag)) {
            Some(o) if o.busy => o,
            _ => {
                self.dropped += 1;
                return None;
            }
        };
        o.busy = false;
        let op = o.op;
        self.free_tags.push(tag);
        self.free_ops.push(op);
        let result = if r.status != STATUS_OK {
            Err(TxnError::Status(r.status))
        } else if !r.rd_wr && r.spares == 1 {
            // Atomic: old value in the first 8 bytes (spares = 1 marks an atomic response).
            let mut b = [0u8; 8];
            b.copy_from_slice(t.data.get(..8)?);
            Ok(Some(u64::from_le_bytes(b)))
        } else {
            Ok(None)
        };
        self.done.push_back(Completion {
            id: OpId(op),
            result,
        });
        if r.rd_wr || r.status != STATUS_OK || r.spares == 1 {
            return None;
        }
        Some(ReadData {
            op: OpId(op),
            offset: u32::from(r.offset) * 64,
            data: t.data,
        })
    }

    /// The next completion.
    pub fn poll_completion(&mut self) -> Option<Completion> {
        self.done.pop_front()
    }
}

#[derive(Debug, Clone, Copy)]
struct Response {
    field: TlField,
    len: u16,
    data: [u8; 256],
}

/// The completer side of a port.
#[derive(Debug)]
pub struct Completer {
    local: AccelId,
    out: VecDeque<Response>,
    staged: Response,
}

impl Completer {
    /// A completer for accelerator `local`.
    pub fn new(local: AccelId) -> Self {
        Completer {
            local,
            out: VecDeque::with_capacity(64),
            staged: Response {
                field: TlField::UncompressedResponse(TlUncompressedResponse::default()),
                len: 0,
                data: [0; 256],
            },
        }
    }

    /// Responses waiting to be sent.
    pub fn queued(&self) -> usize {
        self.out.len()
    }

    /// Execute a request against `mem` and queue its response. Returns false (nothing done)
    /// for a field that is not a request this stand-in knows.
    pub fn handle_request(
        &mut self,
        _now: Instant,
        t: &TlTransfer<'_>,
        mem: &mut impl MemoryTarget,
    ) -> bool {
        let TlField::UncompressedRequest(r) = t.field else {
            return false;
        };
        let addr = r.addr << 2;
        let bytes = (usize::from(r.len) + 1) * 4;
        let mut rsp = Response {
            field: TlField::UncompressedResponse(TlUncompressedResponse::default()),
            len: 0,
            data: [0; 256],
        };
        let mut status = STATUS_OK;
        let mut rd_wr = true;
        let mut spares = 0;
        match r.cmd {
            Opcode::Read => {
                rd_wr = false;
                match rsp.data.get_mut(..bytes).map(|b| mem.read(addr, b)) {
                    Some(Ok(())) => rsp.len = bytes.div_ceil(64) as u16 * 64,
                    _ => status = STATUS_NOT_MAPPED,
                }
            }
            Opcode::WriteFull | Opcode::Write => {
                if t.data.len() < bytes || mem.write(addr, &t.data[..bytes]).is_err() {
                    status = STATUS_NOT_MAPPED;
                }
            }
            Opcode::AtomicR if r.attr == ATTR_FETCH_ADD_8 => {
                rd_wr = false;
                spares = 1;
                let mut old = [0u8; 8];
                let operand = t
                    .data
                    .get(..8)
                    .and_then(|d| <[u8; 8]>::try_from(d).ok())
                    .map(u64::from_le_bytes);
                match (mem.read(addr, &mut old), operand) {
                    (Ok(()), Some(x)) => {
                        let new = u64::from_le_bytes(old).wrapping_add(x);
                        if mem.write(addr, &new.to_le_bytes()).is_err() {
                            status = STATUS_NOT_MAPPED;
                        }
                        rsp.data[..8].copy_from_slice(&old);
                        rsp.len = 64;
                    }
                    _ => status = STATUS_NOT_MAPPED,
                }
            }
            _ => status = STATUS_NOT_MAPPED,
        }
        if status != STATUS_OK {
            rsp.len = 0;
        }
        let beats = (rsp.len / 64).max(1);
        rsp.field = TlField::UncompressedResponse(TlUncompressedResponse {
            vchan: r.vchan,
            tag: r.tag,
            len: (beats - 1) as u8,
            offset: 0,
            status,
            rd_wr: rd_wr || status != STATUS_OK,
            last: true,
            srcaccid: self.local,
            dstaccid: r.srcaccid,
            spares,
            ..Default::default()
        });
        self.out.push_back(rsp);
        true
    }

    /// The next response to send, if credits allow.
    pub fn poll_transmit(
        &mut self,
        _now: Instant,
        credits: &mut impl CreditGate,
    ) -> Option<TlTransfer<'_>> {
        let r = self.out.front()?;
        let vc = match r.field {
            TlField::UncompressedResponse(u) => u.vchan,
            _ => Vc::default(),
        };
        if !credits.try_consume(Flow::Response, vc, (r.len / 64) as u8) {
            return None;
        }
        self.staged = self.out.pop_front()?;
        Some(TlTransfer::new(
            self.staged.field,
            self.staged.data.get(..usize::from(self.staged.len))?,
        ))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::HashMap;

    struct Mem(HashMap<u64, u8>);
    impl MemoryTarget for Mem {
        fn read(&mut self, addr: u64, buf: &mut [u8]) -> Result<(), ()> {
            for (i, b) in buf.iter_mut().enumerate() {
                *b = *self.0.get(&(addr + i as u64)).unwrap_or(&0);
            }
            Ok(())
        }
        fn write(&mut self, addr: u64, data: &[u8]) -> Result<(), ()> {
            for (i, b) in data.iter().enumerate() {
                self.0.insert(addr + i as u64, *b);
            }
            Ok(())
        }
    }
    struct Free;
    impl CreditGate for Free {
        fn try_consume(&mut self, _: Flow, _: Vc, _: u8) -> bool {
            true
        }
    }

    #[test]
    fn write_read_atomic_round_trip() {
        let (a, b) = (AccelId::new(1).unwrap(), AccelId::new(2).unwrap());
        let mut rq: Requester<4, 4, 4> = Requester::new(a);
        let mut cp = Completer::new(b);
        let mut mem = Mem(HashMap::new());
        let now = Instant::ZERO;
        let data = [7u8; 128];
        let vc = Vc::default();
        let w = rq
            .submit(
                now,
                b,
                vc,
                &Operation::WriteFull {
                    addr: 256,
                    data: &data,
                },
            )
            .unwrap();
        let r = rq
            .submit(
                now,
                b,
                vc,
                &Operation::Read {
                    addr: 256,
                    len: 128,
                },
            )
            .unwrap();
        let x = rq
            .submit(
                now,
                b,
                vc,
                &Operation::FetchAdd {
                    addr: 8,
                    operand: 5,
                },
            )
            .unwrap();
        assert_eq!(
            rq.submit(now, b, vc, &Operation::Read { addr: 200, len: 64 }),
            Err(SubmitError::Invalid)
        );
        while let Some(t) = rq.poll_transmit(now, &mut Free) {
            // Round-trip the field through its wire encoding.
            let mut buf = [0u8; 16];
            let n = t.field.emit(&mut buf).unwrap();
            assert_eq!(TlField::parse(&buf[..n]).unwrap(), t.field);
            assert!(cp.handle_request(now, &t, &mut mem));
        }
        let mut got = Vec::new();
        while let Some(t) = cp.poll_transmit(now, &mut Free) {
            let t = TlTransfer::new(t.field, &t.data.to_vec().leak()[..]);
            if let Some(d) = rq.handle_response(now, &t) {
                assert_eq!(d.op, r);
                got.extend_from_slice(d.data);
            }
        }
        assert_eq!(got, data.to_vec());
        let c: Vec<Completion> = std::iter::from_fn(|| rq.poll_completion()).collect();
        assert_eq!(c.len(), 3);
        assert_eq!(c[0].id, w);
        assert_eq!(c[2].id, x);
        assert_eq!(c[2].result, Ok(Some(0)));
        assert_eq!(rq.ops_open(), 0);
    }
}
