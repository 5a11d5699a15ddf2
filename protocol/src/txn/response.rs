//! Responses as the requester sees them: every response FTYPE reduced to one shape, and
//! the reasons a response is dropped (`spec-notes/transactions.md#response-validation`).

use super::{Pool, Status};
use crate::wire::{AccelId, Tag, TlField, Vc};

/// Why the requester dropped a response.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum DropReason {
    /// The field is not a response.
    NotAResponse,
    /// The response is addressed to another accelerator.
    WrongDestination,
    /// No request with this tag is in flight.
    UnknownTag,
    /// The request with this tag already timed out.
    Late,
    /// The response comes from another accelerator than the request went to, or on
    /// another VC.
    WrongSource,
    /// A write-type response to a read, or the reverse.
    WrongKind,
    /// The beats carried, or the beats the field describes, do not fit the request.
    WrongLength,
    /// These beats were already received.
    Duplicate,
}

/// A response field in one shape.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Rsp {
    pub(crate) tag: Tag,
    pub(crate) vc: Vc,
    pub(crate) pool: Pool,
    /// The completer (compressed responses do not say).
    pub(crate) src: Option<AccelId>,
    pub(crate) dst: AccelId,
    pub(crate) status: Status,
    /// A write-type response (no data).
    pub(crate) rd_wr: bool,
    /// First beat, counted from the request's first byte.
    pub(crate) offset: u8,
    /// Data beats the field says follow.
    pub(crate) beats: u8,
}

/// The response in `field`, or `None` if it is not a response.
///
/// An uncompressed response carries data (`len` + 1 beats from `offset`) only when its
/// status is OK and `rd_wr` is clear. A compressed single-beat read response carries one
/// beat at `offset`; a compressed multi-beat read response carries `len` + 1 beats from
/// beat 0; a compressed write response none. Compressed responses always mean OK.
pub(crate) fn parse_response(field: &TlField) -> Option<Rsp> {
    Some(match *field {
        TlField::UncompressedResponse(r) => {
            let status = Status::from_raw(r.status);
            let data = status.is_ok() && !r.rd_wr;
            Rsp {
                tag: r.tag,
                vc: r.vchan,
                pool: Pool::from_bit(r.pool),
                src: Some(r.srcaccid),
                dst: r.dstaccid,
                status,
                rd_wr: r.rd_wr,
                offset: if data { r.offset } else { 0 },
                beats: if data { r.len + 1 } else { 0 },
            }
        }
        TlField::CompressedReadResponse(r) => Rsp {
            tag: r.tag,
            vc: r.vchan,
            pool: Pool::from_bit(r.pool),
            src: None,
            dst: r.dstaccid,
            status: Status::OK,
            rd_wr: false,
            offset: r.offset,
            beats: 1,
        },
        TlField::CompressedWriteResponse(r) => Rsp {
            tag: r.tag,
            vc: r.vchan,
            pool: Pool::from_bit(r.pool),
            src: None,
            dst: r.dstaccid,
            status: Status::OK,
            rd_wr: r.rd_wr,
            offset: 0,
            beats: if r.rd_wr { 0 } else { r.len + 1 },
        },
        _ => return None,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::wire::{
        TlCompressedReadResponse, TlCompressedWriteResponse, TlFlowControl, TlUncompressedResponse,
    };

    #[test]
    fn every_response_shape() {
        let r = TlUncompressedResponse {
            len: 2,
            offset: 1,
            last: true,
            ..Default::default()
        };
        let p = parse_response(&TlField::UncompressedResponse(r)).unwrap();
        assert_eq!((p.offset, p.beats, p.src), (1, 3, Some(AccelId::default())));
        let e = TlUncompressedResponse {
            status: 3,
            len: 2,
            offset: 1,
            ..r
        };
        let p = parse_response(&TlField::UncompressedResponse(e)).unwrap();
        assert_eq!(
            (p.offset, p.beats, p.status),
            (0, 0, Status::PARTITION_DENIED)
        );
        let c = TlCompressedReadResponse {
            offset: 3,
            ..Default::default()
        };
        let p = parse_response(&TlField::CompressedReadResponse(c)).unwrap();
        assert_eq!((p.offset, p.beats, p.src), (3, 1, None));
        let w = TlCompressedWriteResponse {
            len: 3,
            rd_wr: false,
            ..Default::default()
        };
        let p = parse_response(&TlField::CompressedWriteResponse(w)).unwrap();
        assert_eq!((p.beats, p.rd_wr), (4, false));
        let w = TlCompressedWriteResponse { rd_wr: true, ..w };
        let p = parse_response(&TlField::CompressedWriteResponse(w)).unwrap();
        assert_eq!(p.beats, 0);
        assert_eq!(
            parse_response(&TlField::FlowControl(TlFlowControl::default())),
            None
        );
    }
}
