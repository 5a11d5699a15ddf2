//! DL messages: 4-byte words carried in a segment's alternative sector
//! (`spec-notes/wire.md#dl-messages`).
//!
//! Every standard message word ends (bits 8..0) with `mtype:3 mclass:4 rsvd:1 compressed:1`;
//! the 23 bits above are laid out per message, MSB first:
//!
//! | class | type | message | body (bits 31..9) |
//! |---|---|---|---|
//! | Basic 0 | 0 | no-op | rsvd:23 |
//! | Basic 0 | 4 | TL rate notification | rate:16 rsvd:3 ack:1 rsvd:3 |
//! | Basic 0 | 5 | device ID | valid:1 type:2 rsvd:3 id:10 rsvd:3 ack:1 rsvd:3 |
//! | Basic 0 | 6 | port number | valid:1 rsvd:3 port_number:12 rsvd:3 ack:1 rsvd:3 |
//! | UART 1 | 0 | stream transport (header) | length:5 rsvd:15 stream_id:3, then length+1 payload words |
//! | UART 1 | 1 | stream credit update | data_fc_seq:12 rsvd:8 stream_id:3 |
//! | UART 1 | 6 | stream reset request | rsvd:19 all_streams:1 stream_id:3 |
//! | UART 1 | 7 | stream reset response | rsvd:16 status:3 all_streams:1 stream_id:3 |
//! | Control 8 | 4 | channel negotiation | rsvd:4 channel_response:4 channel_command:4 channel_target:4 rsvd:7 |
//!
//! A vendor-defined word is `vendor_id:16 type:8 length:8` with no class/type trailer, so its
//! bits cannot be told apart from a standard word (`1d 22 01 20` is also a valid channel
//! negotiation). The DL layer knows which is which from where the word sits: the segment header
//! counts standard messages and vendor words separately, standard ones first
//! (see [`crate::wire::dl_stream`]). Parsers therefore take a [`MessageSpace`].

use super::bits::{BitReader, BitWriter};
use super::{check_out, Error, Result};
use heapless::Vec;
use nom::error::{ErrorKind, ParseError};
use nom::number::complete::be_u32;
use nom::Parser;

/// Length of one DL message word in bytes.
pub const WORD_LEN: usize = 4;
/// Largest number of payload words of a UART stream transport message.
pub const MAX_UART_PAYLOAD_WORDS: usize = 32;
/// Largest message in words (a UART stream transport: header + 32 payload words).
pub const MAX_MESSAGE_WORDS: usize = MAX_UART_PAYLOAD_WORDS + 1;

/// Message class codes (4-bit `mclass`).
pub mod mclass {
    /// Basic messages.
    pub const BASIC: u8 = 0;
    /// UART stream messages.
    pub const UART: u8 = 1;
    /// Control messages.
    pub const CONTROL: u8 = 8;
}

/// Message type codes (3-bit `mtype`), per class.
pub mod mtype {
    /// Basic: no-op.
    pub const NO_OP: u8 = 0;
    /// Basic: TL rate notification.
    pub const TL_RATE_NOTIFICATION: u8 = 4;
    /// Basic: device ID request/response.
    pub const DEVICE_ID: u8 = 5;
    /// Basic: port number request/response.
    pub const PORT_NUMBER: u8 = 6;
    /// UART: stream transport.
    pub const UART_STREAM_TRANSPORT: u8 = 0;
    /// UART: stream credit update.
    pub const UART_CREDIT_UPDATE: u8 = 1;
    /// UART: stream reset request.
    pub const UART_RESET_REQUEST: u8 = 6;
    /// UART: stream reset response.
    pub const UART_RESET_RESPONSE: u8 = 7;
    /// Control: channel online/offline negotiation.
    pub const CHANNEL_NEGOTIATION: u8 = 4;
}

/// Which kind of word a message is: the bits alone cannot tell (module docs).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub enum MessageSpace {
    /// A standard message with the `mtype/mclass/compressed` trailer.
    #[default]
    Standard,
    /// A vendor-defined word (`vendor_id:16 type:8 length:8`).
    Vendor,
}

/// TL rate notification (Basic, type 4).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub struct TlRateNotification {
    /// Rate (16 bits).
    pub rate: u16,
    /// Acknowledges a notification.
    pub ack: bool,
}

/// Device ID request/response (Basic, type 5).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub struct DeviceId {
    /// The ID is valid.
    pub valid: bool,
    /// Device type (2 bits).
    pub r#type: u8,
    /// Device ID (10 bits).
    pub id: u16,
    /// This is the response.
    pub ack: bool,
}

/// Port number request/response (Basic, type 6; the vectors call it `dl_msg_port_id`).
#[doc(alias = "port_id")]
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub struct PortNumber {
    /// The port number is valid.
    pub valid: bool,
    /// Port number (12 bits).
    pub port_number: u16,
    /// This is the response.
    pub ack: bool,
}

/// Channel online/offline negotiation (Control, type 4).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub struct ChannelNegotiation {
    /// Response code (4 bits).
    pub channel_response: u8,
    /// Command code (4 bits).
    pub channel_command: u8,
    /// Target channel (4 bits).
    pub channel_target: u8,
}

/// UART stream transport (UART, type 0): a header word and 1..=32 payload words.
#[derive(Debug, Clone, PartialEq, Eq, Hash, Default)]
pub struct UartStreamTransport {
    /// Stream (3 bits).
    pub stream_id: u8,
    /// Payload words, 1..=32 (the header's `length` is their count minus one).
    pub payload_dwords: Vec<u32, MAX_UART_PAYLOAD_WORDS>,
}

/// UART stream credit update (UART, type 1).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub struct UartCreditUpdate {
    /// Data flow-control sequence (12 bits).
    pub data_fc_seq: u16,
    /// Stream (3 bits).
    pub stream_id: u8,
}

/// UART stream reset request (UART, type 6).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub struct UartResetRequest {
    /// Reset every stream (then `stream_id` is ignored).
    pub all_streams: bool,
    /// Stream (3 bits).
    pub stream_id: u8,
}

/// UART stream reset response (UART, type 7).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub struct UartResetResponse {
    /// Status (3 bits).
    pub status: u8,
    /// The reset covered every stream.
    pub all_streams: bool,
    /// Stream (3 bits).
    pub stream_id: u8,
}

/// Vendor-defined word: `vendor_id:16 type:8 length:8`, no class/type trailer.
///
/// podlink carries it as one opaque word: `length` is not interpreted (no payload follows).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub struct VendorDefined {
    /// Vendor ID (16 bits).
    pub vendor_id: u16,
    /// Vendor packet type (8 bits).
    pub r#type: u8,
    /// Vendor length (8 bits, carried verbatim).
    pub length: u8,
}

/// A DL message (the `Repr` of one alternative-sector message).
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub enum DlMessage {
    /// Basic no-op.
    NoOp,
    /// Basic TL rate notification.
    TlRateNotification(TlRateNotification),
    /// Basic device ID.
    DeviceId(DeviceId),
    /// Basic port number.
    PortNumber(PortNumber),
    /// UART stream transport (multi-word).
    UartStreamTransport(UartStreamTransport),
    /// UART stream credit update.
    UartCreditUpdate(UartCreditUpdate),
    /// UART stream reset request.
    UartResetRequest(UartResetRequest),
    /// UART stream reset response.
    UartResetResponse(UartResetResponse),
    /// Control channel negotiation.
    ChannelNegotiation(ChannelNegotiation),
    /// Vendor-defined word.
    Vendor(VendorDefined),
}

/// nom error carrying a typed [`Error`]: running out of input is `Truncated`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct NomError(pub(crate) Error);

impl<'a> ParseError<&'a [u8]> for NomError {
    fn from_error_kind(input: &'a [u8], _kind: ErrorKind) -> Self {
        NomError(Error::Truncated {
            needed: WORD_LEN,
            got: input.len(),
        })
    }
    fn append(_input: &'a [u8], _kind: ErrorKind, other: Self) -> Self {
        other
    }
}

type NomResult<'a, O> = nom::IResult<&'a [u8], O, NomError>;

fn fail<T>(e: Error) -> core::result::Result<T, nom::Err<NomError>> {
    Err(nom::Err::Failure(NomError(e)))
}

fn from_nom(e: nom::Err<NomError>) -> Error {
    match e {
        nom::Err::Error(NomError(e)) | nom::Err::Failure(NomError(e)) => e,
        // Complete parsers never ask for more input.
        nom::Err::Incomplete(_) => Error::Truncated {
            needed: WORD_LEN,
            got: 0,
        },
    }
}

/// Parse one message of `space` from the start of `input` (nom, complete).
pub(crate) fn nom_message(space: MessageSpace) -> impl Fn(&[u8]) -> NomResult<'_, DlMessage> {
    move |input| match space {
        MessageSpace::Vendor => nom_vendor(input),
        MessageSpace::Standard => nom_standard(input),
    }
}

fn nom_vendor(input: &[u8]) -> NomResult<'_, DlMessage> {
    let (rest, w) = be_u32(input)?;
    let [hi, lo, r#type, length] = w.to_be_bytes();
    Ok((
        rest,
        DlMessage::Vendor(VendorDefined {
            vendor_id: u16::from_be_bytes([hi, lo]),
            r#type,
            length,
        }),
    ))
}

fn nom_standard(input: &[u8]) -> NomResult<'_, DlMessage> {
    let (rest, w) = be_u32(input)?;
    let msg = match decode_word(w) {
        Ok(m) => m,
        Err(e) => return fail(e),
    };
    let DlMessage::UartStreamTransport(mut t) = msg else {
        return Ok((rest, msg));
    };
    // The header's length (5 bits) + 1 payload words follow.
    let words = ((w >> 27) as usize).saturating_add(1);
    if rest.len() < words.saturating_mul(WORD_LEN) {
        return fail(Error::Truncated {
            needed: words.saturating_add(1).saturating_mul(WORD_LEN),
            got: input.len(),
        });
    }
    let (rest, ()) = nom::multi::fold_many_m_n(
        words,
        words,
        be_u32,
        || (),
        |(), word| {
            // Cannot overflow: `words` ≤ 32 = capacity.
            let _ = t.payload_dwords.push(word);
        },
    )
    .parse(rest)?;
    Ok((rest, DlMessage::UartStreamTransport(t)))
}

/// Decode one standard word; a stream transport comes back with an empty payload.
fn decode_word(w: u32) -> Result<DlMessage> {
    if w & 1 != 0 {
        return Err(Error::Reserved("DL message compressed"));
    }
    if w & 2 != 0 {
        return Err(Error::Reserved("DL message rsvd"));
    }
    let mt = ((w >> 6) & 7) as u8;
    let mc = ((w >> 2) & 0xf) as u8;
    let bytes = w.to_be_bytes();
    let mut r = BitReader::new::<4>(&bytes)?;
    let msg = match (mc, mt) {
        (mclass::BASIC, mtype::NO_OP) => {
            r.reserved(23, "no-op rsvd")?;
            DlMessage::NoOp
        }
        (mclass::BASIC, mtype::TL_RATE_NOTIFICATION) => {
            let rate = r.take(16);
            r.reserved(3, "TL rate notification rsvd")?;
            let ack = r.take(1);
            r.reserved(3, "TL rate notification rsvd")?;
            DlMessage::TlRateNotification(TlRateNotification { rate, ack })
        }
        (mclass::BASIC, mtype::DEVICE_ID) => {
            let valid = r.take(1);
            let r#type = r.take(2);
            r.reserved(3, "device ID rsvd")?;
            let id = r.take(10);
            r.reserved(3, "device ID rsvd")?;
            let ack = r.take(1);
            r.reserved(3, "device ID rsvd")?;
            DlMessage::DeviceId(DeviceId {
                valid,
                r#type,
                id,
                ack,
            })
        }
        (mclass::BASIC, mtype::PORT_NUMBER) => {
            let valid = r.take(1);
            r.reserved(3, "port number rsvd")?;
            let port_number = r.take(12);
            r.reserved(3, "port number rsvd")?;
            let ack = r.take(1);
            r.reserved(3, "port number rsvd")?;
            DlMessage::PortNumber(PortNumber {
                valid,
                port_number,
                ack,
            })
        }
        (mclass::UART, mtype::UART_STREAM_TRANSPORT) => {
            let _length: u8 = r.take(5);
            r.reserved(15, "UART stream transport rsvd")?;
            DlMessage::UartStreamTransport(UartStreamTransport {
                stream_id: r.take(3),
                payload_dwords: Vec::new(),
            })
        }
        (mclass::UART, mtype::UART_CREDIT_UPDATE) => {
            let data_fc_seq = r.take(12);
            r.reserved(8, "UART credit update rsvd")?;
            DlMessage::UartCreditUpdate(UartCreditUpdate {
                data_fc_seq,
                stream_id: r.take(3),
            })
        }
        (mclass::UART, mtype::UART_RESET_REQUEST) => {
            r.reserved(19, "UART reset request rsvd")?;
            DlMessage::UartResetRequest(UartResetRequest {
                all_streams: r.take(1),
                stream_id: r.take(3),
            })
        }
        (mclass::UART, mtype::UART_RESET_RESPONSE) => {
            r.reserved(16, "UART reset response rsvd")?;
            DlMessage::UartResetResponse(UartResetResponse {
                status: r.take(3),
                all_streams: r.take(1),
                stream_id: r.take(3),
            })
        }
        (mclass::CONTROL, mtype::CHANNEL_NEGOTIATION) => {
            r.reserved(4, "channel negotiation rsvd")?;
            let channel_response = r.take(4);
            let channel_command = r.take(4);
            let channel_target = r.take(4);
            r.reserved(7, "channel negotiation rsvd")?;
            DlMessage::ChannelNegotiation(ChannelNegotiation {
                channel_response,
                channel_command,
                channel_target,
            })
        }
        (mclass, mtype) => return Err(Error::UnknownMessage { mclass, mtype }),
    };
    Ok(msg)
}

impl DlMessage {
    /// Parse one message of `space` from the start of `buf`; returns it and the bytes used.
    ///
    /// # Errors
    /// `Truncated`; for standard messages also `Reserved` (a reserved bit, or `compressed`,
    /// is set) and `UnknownMessage` (a class/type podlink does not know).
    pub fn parse_prefix(buf: &[u8], space: MessageSpace) -> Result<(DlMessage, usize)> {
        let (rest, msg) = nom_message(space)(buf).map_err(from_nom)?;
        Ok((msg, buf.len().saturating_sub(rest.len())))
    }

    /// Parse a standard message that fills `buf` exactly.
    ///
    /// # Errors
    /// As [`DlMessage::parse_prefix`], and `LengthMismatch` when bytes are left over.
    pub fn parse(buf: &[u8]) -> Result<DlMessage> {
        Self::parse_exact(buf, MessageSpace::Standard)
    }

    /// Parse a vendor-defined word that fills `buf` exactly.
    ///
    /// # Errors
    /// `Truncated`, or `LengthMismatch` when `buf` is longer than one word.
    pub fn parse_vendor(buf: &[u8]) -> Result<DlMessage> {
        Self::parse_exact(buf, MessageSpace::Vendor)
    }

    fn parse_exact(buf: &[u8], space: MessageSpace) -> Result<DlMessage> {
        let (msg, used) = Self::parse_prefix(buf, space)?;
        if used != buf.len() {
            return Err(Error::LengthMismatch("bytes after the DL message"));
        }
        Ok(msg)
    }

    /// Which space the message belongs to.
    pub const fn space(&self) -> MessageSpace {
        match self {
            DlMessage::Vendor(_) => MessageSpace::Vendor,
            _ => MessageSpace::Standard,
        }
    }

    /// `(mclass, mtype)` of a standard message; `None` for a vendor word.
    pub const fn class_type(&self) -> Option<(u8, u8)> {
        Some(match self {
            DlMessage::NoOp => (mclass::BASIC, mtype::NO_OP),
            DlMessage::TlRateNotification(_) => (mclass::BASIC, mtype::TL_RATE_NOTIFICATION),
            DlMessage::DeviceId(_) => (mclass::BASIC, mtype::DEVICE_ID),
            DlMessage::PortNumber(_) => (mclass::BASIC, mtype::PORT_NUMBER),
            DlMessage::UartStreamTransport(_) => (mclass::UART, mtype::UART_STREAM_TRANSPORT),
            DlMessage::UartCreditUpdate(_) => (mclass::UART, mtype::UART_CREDIT_UPDATE),
            DlMessage::UartResetRequest(_) => (mclass::UART, mtype::UART_RESET_REQUEST),
            DlMessage::UartResetResponse(_) => (mclass::UART, mtype::UART_RESET_RESPONSE),
            DlMessage::ChannelNegotiation(_) => (mclass::CONTROL, mtype::CHANNEL_NEGOTIATION),
            DlMessage::Vendor(_) => return None,
        })
    }

    /// Length in 4-byte words.
    pub fn words(&self) -> usize {
        match self {
            DlMessage::UartStreamTransport(t) => t.payload_dwords.len().saturating_add(1),
            _ => 1,
        }
    }

    /// Encoded length in bytes.
    pub fn buffer_len(&self) -> usize {
        self.words().saturating_mul(WORD_LEN)
    }

    /// Emit into the start of `buf`; returns the bytes written ([`DlMessage::buffer_len`]).
    ///
    /// # Errors
    /// `BufferTooSmall`; `FieldRange` when a field does not fit its width;
    /// `LengthMismatch` for a stream transport without payload.
    pub fn emit(&self, buf: &mut [u8]) -> Result<usize> {
        let len = self.buffer_len();
        check_out(buf, len)?;
        let Some((mc, mt)) = self.class_type() else {
            if let DlMessage::Vendor(v) = self {
                let [hi, lo] = v.vendor_id.to_be_bytes();
                if let Some(out) = buf.get_mut(..WORD_LEN) {
                    out.copy_from_slice(&[hi, lo, v.r#type, v.length]);
                }
            }
            return Ok(WORD_LEN);
        };
        let mut w = BitWriter::new(32);
        self.write_body(&mut w)?;
        w.put(3, mt, "mtype")?;
        w.put(4, mc, "mclass")?;
        w.reserved(1);
        w.put(1, false, "compressed")?;
        w.finish::<4>(buf)?;
        if let DlMessage::UartStreamTransport(t) = self {
            let words = buf.get_mut(WORD_LEN..len).unwrap_or_default();
            for (out, word) in words
                .chunks_exact_mut(WORD_LEN)
                .zip(t.payload_dwords.iter())
            {
                out.copy_from_slice(&word.to_be_bytes());
            }
        }
        Ok(len)
    }

    /// The 23 bits above the trailer.
    fn write_body(&self, w: &mut BitWriter) -> Result<()> {
        match self {
            DlMessage::NoOp | DlMessage::Vendor(_) => w.reserved(23),
            DlMessage::TlRateNotification(m) => {
                w.put(16, m.rate, "rate")?;
                w.reserved(3);
                w.put(1, m.ack, "ack")?;
                w.reserved(3);
            }
            DlMessage::DeviceId(m) => {
                w.put(1, m.valid, "valid")?;
                w.put(2, m.r#type, "type")?;
                w.reserved(3);
                w.put(10, m.id, "id")?;
                w.reserved(3);
                w.put(1, m.ack, "ack")?;
                w.reserved(3);
            }
            DlMessage::PortNumber(m) => {
                w.put(1, m.valid, "valid")?;
                w.reserved(3);
                w.put(12, m.port_number, "port_number")?;
                w.reserved(3);
                w.put(1, m.ack, "ack")?;
                w.reserved(3);
            }
            DlMessage::UartStreamTransport(m) => {
                let n = m.payload_dwords.len();
                if n == 0 {
                    return Err(Error::LengthMismatch(
                        "UART stream transport needs 1..=32 payload words",
                    ));
                }
                w.bits(5, n.saturating_sub(1) as u64, "length")?;
                w.reserved(15);
                w.put(3, m.stream_id, "stream_id")?;
            }
            DlMessage::UartCreditUpdate(m) => {
                w.put(12, m.data_fc_seq, "data_fc_seq")?;
                w.reserved(8);
                w.put(3, m.stream_id, "stream_id")?;
            }
            DlMessage::UartResetRequest(m) => {
                w.reserved(19);
                w.put(1, m.all_streams, "all_streams")?;
                w.put(3, m.stream_id, "stream_id")?;
            }
            DlMessage::UartResetResponse(m) => {
                w.reserved(16);
                w.put(3, m.status, "status")?;
                w.put(1, m.all_streams, "all_streams")?;
                w.put(3, m.stream_id, "stream_id")?;
            }
            DlMessage::ChannelNegotiation(m) => {
                w.reserved(4);
                w.put(4, m.channel_response, "channel_response")?;
                w.put(4, m.channel_command, "channel_command")?;
                w.put(4, m.channel_target, "channel_target")?;
                w.reserved(7);
            }
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn hex(s: &str) -> std::vec::Vec<u8> {
        (0..s.len())
            .step_by(2)
            .map(|i| u8::from_str_radix(&s[i..i + 2], 16).unwrap())
            .collect()
    }

    fn round_trip(space: MessageSpace, h: &str, want: DlMessage) {
        let bytes = hex(h);
        let (got, used) = DlMessage::parse_prefix(&bytes, space).unwrap();
        assert_eq!(got, want, "parse {h}");
        assert_eq!(used, bytes.len());
        let mut out = [0u8; 4 * MAX_MESSAGE_WORDS];
        let n = want.emit(&mut out).unwrap();
        assert_eq!(&out[..n], &bytes[..], "emit {h}");
        assert_eq!(want.buffer_len(), n);
    }

    // Vectors: kinds dl_msg_* of /work/shared/vectors/ualink-style-fields.jsonl.
    #[test]
    fn test_basic_vectors() {
        use DlMessage as M;
        let s = MessageSpace::Standard;
        round_trip(s, "00000000", M::NoOp);
        let rate = |rate, ack| M::TlRateNotification(TlRateNotification { rate, ack });
        round_trip(s, "00000100", rate(0, false));
        round_trip(s, "43211100", rate(17185, true));
        round_trip(s, "80000100", rate(32768, false));
        let dev = |valid, r#type, id, ack| {
            M::DeviceId(DeviceId {
                valid,
                r#type,
                id,
                ack,
            })
        };
        round_trip(s, "00000140", dev(false, 0, 0, false));
        round_trip(s, "a1550140", dev(true, 1, 341, false));
        round_trip(s, "42aa1140", dev(false, 2, 682, true));
        let port = |valid, port_number, ack| {
            M::PortNumber(PortNumber {
                valid,
                port_number,
                ack,
            })
        };
        round_trip(s, "00000180", port(false, 0, false));
        round_trip(s, "83ff0180", port(true, 1023, false));
        round_trip(s, "01231180", port(false, 291, true));
        let chan = |channel_command, channel_response, channel_target| {
            M::ChannelNegotiation(ChannelNegotiation {
                channel_response,
                channel_command,
                channel_target,
            })
        };
        round_trip(s, "00000120", chan(0, 0, 0));
        round_trip(s, "051a0120", chan(1, 5, 10));
        round_trip(s, "01230120", chan(2, 1, 3));
    }

    #[test]
    fn test_uart_vectors() {
        use DlMessage as M;
        let s = MessageSpace::Standard;
        let req = |all_streams| {
            M::UartResetRequest(UartResetRequest {
                all_streams,
                stream_id: 0,
            })
        };
        round_trip(s, "00000184", req(false));
        round_trip(s, "00001184", req(true));
        let rsp = |status, all_streams| {
            M::UartResetResponse(UartResetResponse {
                status,
                all_streams,
                stream_id: 0,
            })
        };
        round_trip(s, "000001c4", rsp(0, false));
        round_trip(s, "000031c4", rsp(1, true));
        round_trip(s, "0000a1c4", rsp(5, false));
        let cu = |data_fc_seq| {
            M::UartCreditUpdate(UartCreditUpdate {
                data_fc_seq,
                stream_id: 0,
            })
        };
        round_trip(s, "00000044", cu(0));
        round_trip(s, "00100044", cu(1));
        round_trip(s, "fff00044", cu(4095));
        let st = |words: &[u32]| {
            M::UartStreamTransport(UartStreamTransport {
                stream_id: 0,
                payload_dwords: Vec::from_slice(words).unwrap(),
            })
        };
        round_trip(s, "000000044486e81f", st(&[1149691935]));
        round_trip(s, "080000045798f80c4a49e14e", st(&[1469642764, 1246355790]));
        let long = "f8000004b0f5de0f4a96c64fce5f3b3c2eb4232393b05eacbf00d295b2e4508606b34f90\
                    298a9edda902d03e48e7dc1eef6f8058abb686dab46914dcaed9c91dffc0055693e406c2\
                    da65202f943a53974e53c71172c54428ed53a98e36dec2115f0f3259f8605fbe9e35e22e\
                    c00915f28e96f9e750b95193d303fe5379033aa8cd843b5e";
        let b = hex(long);
        let words: std::vec::Vec<u32> = b[4..]
            .chunks(4)
            .map(|c| u32::from_be_bytes(c.try_into().unwrap()))
            .collect();
        assert_eq!(words.len(), 32);
        assert_eq!(words[0], 2968903183);
        assert_eq!(words[31], 3447995230);
        round_trip(s, long, st(&words));
    }

    #[test]
    fn test_vendor_vectors() {
        let v = |vendor_id, r#type, length| {
            DlMessage::Vendor(VendorDefined {
                vendor_id,
                r#type,
                length,
            })
        };
        round_trip(MessageSpace::Vendor, "00000000", v(0, 0, 0));
        round_trip(MessageSpace::Vendor, "beef1234", v(48879, 18, 52));
        round_trip(MessageSpace::Vendor, "1d220120", v(7458, 1, 32));
        // The same bits read as a standard word are a channel negotiation.
        assert!(matches!(
            DlMessage::parse(&hex("1d220120")),
            Err(Error::Reserved("channel negotiation rsvd"))
        ));
        assert_eq!(
            DlMessage::parse(&hex("01220120")),
            Ok(DlMessage::ChannelNegotiation(ChannelNegotiation {
                channel_response: 1,
                channel_command: 2,
                channel_target: 2,
            }))
        );
        assert_eq!(
            DlMessage::parse_vendor(&hex("beef1234")).unwrap().words(),
            1
        );
        assert_eq!(v(1, 2, 3).space(), MessageSpace::Vendor);
        assert_eq!(v(1, 2, 3).class_type(), None);
    }

    #[test]
    fn test_reserved_and_compressed() {
        assert_eq!(
            DlMessage::parse(&[0, 0, 1, 1]),
            Err(Error::Reserved("DL message compressed"))
        );
        assert_eq!(
            DlMessage::parse(&[0, 0, 1, 2]),
            Err(Error::Reserved("DL message rsvd"))
        );
        assert_eq!(
            DlMessage::parse(&[0, 0, 0x80, 0]),
            Err(Error::Reserved("no-op rsvd"))
        );
        assert_eq!(
            DlMessage::parse(&[0, 0, 0x21, 0x00]),
            Err(Error::Reserved("TL rate notification rsvd"))
        );
        assert_eq!(
            DlMessage::parse(&[0x10, 0, 0x01, 0x40]),
            Err(Error::Reserved("device ID rsvd"))
        );
        assert_eq!(
            DlMessage::parse(&[0x40, 0, 0x01, 0x80]),
            Err(Error::Reserved("port number rsvd"))
        );
        assert_eq!(
            DlMessage::parse(&[0x00, 0x10, 0x00, 0x04, 0, 0, 0, 0]),
            Err(Error::Reserved("UART stream transport rsvd"))
        );
        assert_eq!(
            DlMessage::parse(&[0x00, 0x01, 0x00, 0x44]),
            Err(Error::Reserved("UART credit update rsvd"))
        );
        assert_eq!(
            DlMessage::parse(&[0x00, 0x00, 0x21, 0x84]),
            Err(Error::Reserved("UART reset request rsvd"))
        );
        assert_eq!(
            DlMessage::parse(&[0x00, 0x01, 0x01, 0xc4]),
            Err(Error::Reserved("UART reset response rsvd"))
        );
        assert_eq!(
            DlMessage::parse(&[0x00, 0x00, 0x03, 0x20]),
            Err(Error::Reserved("channel negotiation rsvd"))
        );
    }

    #[test]
    fn test_unknown_message() {
        // Basic type 1, UART type 2, class 2, control type 0.
        for (word, mclass, mtype) in [
            ([0u8, 0, 0, 0x40], 0, 1),
            ([0, 0, 0, 0x84], 1, 2),
            ([0, 0, 0, 0x08], 2, 0),
            ([0, 0, 0, 0x20], 8, 0),
        ] {
            assert_eq!(
                DlMessage::parse(&word),
                Err(Error::UnknownMessage { mclass, mtype })
            );
        }
    }

    #[test]
    fn test_truncated() {
        assert_eq!(
            DlMessage::parse(&[0, 0, 1]),
            Err(Error::Truncated { needed: 4, got: 3 })
        );
        assert_eq!(
            DlMessage::parse_vendor(&[]),
            Err(Error::Truncated { needed: 4, got: 0 })
        );
        // length = 1 → two payload words; only one present.
        assert_eq!(
            DlMessage::parse(&hex("080000045798f80c")),
            Err(Error::Truncated { needed: 12, got: 8 })
        );
        assert_eq!(
            DlMessage::parse(&hex("0000000000000000")),
            Err(Error::LengthMismatch("bytes after the DL message"))
        );
    }

    #[test]
    fn test_emit_errors() {
        let m = DlMessage::UartStreamTransport(UartStreamTransport::default());
        assert!(matches!(
            m.emit(&mut [0u8; 8]),
            Err(Error::LengthMismatch(_))
        ));
        let m = DlMessage::DeviceId(DeviceId {
            id: 1024,
            ..Default::default()
        });
        assert_eq!(m.emit(&mut [0u8; 4]), Err(Error::FieldRange("id")));
        assert_eq!(
            DlMessage::NoOp.emit(&mut [0u8; 3]),
            Err(Error::BufferTooSmall { needed: 4, got: 3 })
        );
    }
}
