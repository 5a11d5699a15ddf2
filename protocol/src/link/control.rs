//! DL control messages at bring-up and during operation (`spec-notes/link.md#dl-control`):
//! device ID and port number exchange, TL rate notification, and channel online/offline
//! negotiation, as a sans-IO machine with a response timer.
//!
//! Requests carry `ack = 0`; the peer answers with `ack = 1` and its own values (device ID,
//! port number) or the rate it received (TL rate). protocol-facts §4: Basic requests are
//! answered within 1 µs; [`ControlConfig::response_timeout`] is how long the requester waits
//! before sending again (a timeout after [`ControlConfig::retries`] tries is an event, not a
//! fault). DL messages ride in sequenced DL flits, so retry already makes them reliable; the
//! timer catches a peer that does not answer.
//!
//! Channel negotiation codes are podlink's (the public layout has the fields, not the
//! values): command 1 online, 2 offline; response 0 (a request), 1 ack, 2 nack, 3 pending.
//! The responder's upper layer answers with [`Control::respond_channel`]; if it has not within
//! [`ControlConfig::answer_within`], the machine answers "pending" for it, and the final ack
//! or nack follows when the upper layer decides.

#![cfg_attr(not(test), deny(clippy::arithmetic_side_effects))]

use crate::time::{Duration, Instant};
use crate::timer::TimerTable;
use crate::wire::dl_msg::{
    ChannelNegotiation, DeviceId, DlMessage, PortNumber, TlRateNotification,
};
use core::fmt;
use heapless::Deque;

/// This end's identity and timing.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ControlConfig {
    /// Device ID (10 bits).
    pub device_id: u16,
    /// Device type (2 bits).
    pub device_type: u8,
    /// Port number (12 bits).
    pub port_number: u16,
    /// TL rate announced at bring-up (16 bits, podlink passes it through uninterpreted).
    pub tl_rate: u16,
    /// Wait this long for an answer before asking again (1 µs).
    pub response_timeout: Duration,
    /// Tries before a request times out (3).
    pub retries: u8,
    /// Answer a peer's channel request with "pending" if the upper layer has not answered
    /// by then (500 ns, so the answer still arrives within 1 µs).
    pub answer_within: Duration,
    /// After a "pending", wait this long for the final answer before asking again.
    pub pending_timeout: Duration,
}

impl Default for ControlConfig {
    fn default() -> Self {
        ControlConfig {
            device_id: 0,
            device_type: 0,
            port_number: 0,
            tl_rate: 0,
            response_timeout: Duration::from_us(1),
            retries: 3,
            answer_within: Duration::from_ns(500),
            pending_timeout: Duration::from_us(100),
        }
    }
}

/// Channel negotiation command (podlink's codes).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum ChannelCommand {
    /// Bring the channel online (1).
    Online = 1,
    /// Take the channel offline (2).
    Offline = 2,
}

/// Channel negotiation response (podlink's codes; 0 marks a request).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum ChannelResponse {
    /// Accepted (1).
    Ack = 1,
    /// Refused (2).
    Nack = 2,
    /// Decision later (3): a final Ack or Nack follows.
    Pending = 3,
}

impl ChannelCommand {
    fn from_raw(v: u8) -> Option<Self> {
        match v {
            1 => Some(ChannelCommand::Online),
            2 => Some(ChannelCommand::Offline),
            _ => None,
        }
    }
}

impl ChannelResponse {
    fn from_raw(v: u8) -> Option<Self> {
        match v {
            1 => Some(ChannelResponse::Ack),
            2 => Some(ChannelResponse::Nack),
            3 => Some(ChannelResponse::Pending),
            _ => None,
        }
    }
}

/// What a control request was about.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum ControlRequest {
    /// Device ID, port number and TL rate exchange.
    Identity,
    /// Our channel negotiation request.
    Channel,
}

/// Something the upper layer may want to know.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum ControlEvent {
    /// The peer's device ID and port number are known.
    PeerIdentified {
        /// Device ID.
        device_id: u16,
        /// Device type.
        device_type: u8,
        /// Port number.
        port_number: u16,
    },
    /// The peer announced its TL rate.
    PeerTlRate {
        /// Rate.
        rate: u16,
    },
    /// The peer asks to bring a channel online or offline: answer with
    /// [`Control::respond_channel`].
    ChannelRequested {
        /// Channel.
        target: u8,
        /// What it asks.
        command: ChannelCommand,
    },
    /// The peer answered our channel request (Pending is followed by a final answer).
    ChannelAnswered {
        /// Channel.
        target: u8,
        /// What we asked.
        command: ChannelCommand,
        /// The answer.
        response: ChannelResponse,
    },
    /// No answer after every try (not fatal).
    Timeout {
        /// Which request.
        request: ControlRequest,
    },
}

/// Counters of [`Control`].
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct ControlStats {
    /// DL messages queued for sending.
    pub messages_sent: u64,
    /// DL messages handled.
    pub messages_received: u64,
    /// Requests sent again after the response timeout.
    pub retries: u64,
    /// Requests that timed out.
    pub timeouts: u64,
    /// "Pending" answers sent because the upper layer was slow.
    pub auto_pending: u64,
    /// Messages with codes podlink does not know, or answers nobody asked for.
    pub protocol_errors: u64,
    /// Messages dropped because the send queue was full.
    pub queue_full: u64,
    /// Events lost because the queue was full.
    pub events_dropped: u64,
}

/// Why a control command was refused.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum ControlError {
    /// A channel request of ours is already outstanding.
    Busy,
    /// There is no peer channel request to answer (or `Pending` was answered twice).
    NoRequest,
    /// The send queue is full.
    QueueFull,
}

impl fmt::Display for ControlError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            ControlError::Busy => "a channel request is outstanding",
            ControlError::NoRequest => "no channel request to answer",
            ControlError::QueueFull => "DL message queue full",
        })
    }
}

impl core::error::Error for ControlError {}

/// The timers of [`Control`].
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum ControlTimer {
    /// Identity / rate answers overdue.
    Identity = 0,
    /// Our channel request's answer overdue.
    Channel = 1,
    /// Our answer to the peer's channel request is due.
    ChannelAnswer = 2,
}

#[derive(Debug, Clone, Copy)]
struct OurRequest {
    target: u8,
    command: ChannelCommand,
    tries: u8,
}

/// Queue depth of outgoing DL messages.
pub const OUT_QUEUE: usize = 16;

/// The DL control machine. The composed link feeds it received messages
/// ([`Control::handle_message`]) and drains [`Control::peek_message`] /
/// [`Control::pop_message`] into DL flits.
// Memory layout (`repr(C)`: declaration order): the small state first, the outgoing message
// queue (2 KiB of message storage) last.
#[derive(Debug, Clone)]
#[repr(C)]
pub struct Control {
    id_pending: bool,
    port_pending: bool,
    rate_pending: bool,
    identity_tries: u8,
    timers: TimerTable<3>,
    events: Deque<ControlEvent, 8>,
    stats: ControlStats,
    peer_device: Option<DeviceId>,
    peer_port: Option<PortNumber>,
    peer_rate: Option<u16>,
    ours: Option<OurRequest>,
    theirs: Option<(u8, ChannelCommand, bool)>,
    cfg: ControlConfig,
    out: Deque<DlMessage, OUT_QUEUE>,
}

impl Control {
    /// Idle until the link comes up.
    pub fn new(cfg: ControlConfig) -> Self {
        Control {
            cfg,
            out: Deque::new(),
            timers: TimerTable::new(),
            events: Deque::new(),
            stats: ControlStats::default(),
            id_pending: false,
            port_pending: false,
            rate_pending: false,
            identity_tries: 0,
            peer_device: None,
            peer_port: None,
            peer_rate: None,
            ours: None,
            theirs: None,
        }
    }

    /// The configuration.
    pub fn config(&self) -> &ControlConfig {
        &self.cfg
    }
    /// Counters.
    pub fn stats(&self) -> &ControlStats {
        &self.stats
    }
    /// The peer's device ID message, once known.
    pub fn peer_device(&self) -> Option<DeviceId> {
        self.peer_device
    }
    /// The peer's port number message, once known.
    pub fn peer_port(&self) -> Option<PortNumber> {
        self.peer_port
    }
    /// The peer's TL rate, once known.
    pub fn peer_tl_rate(&self) -> Option<u16> {
        self.peer_rate
    }
    /// Both ends know each other and the rates are acknowledged.
    pub fn is_identified(&self) -> bool {
        self.peer_device.is_some()
            && self.peer_port.is_some()
            && !self.id_pending
            && !self.port_pending
            && !self.rate_pending
    }
    /// Messages waiting to be sent.
    pub fn has_message(&self) -> bool {
        !self.out.is_empty()
    }

    fn send(&mut self, m: DlMessage) {
        if self.out.push_back(m).is_err() {
            self.stats.queue_full = self.stats.queue_full.saturating_add(1);
        } else {
            self.stats.messages_sent = self.stats.messages_sent.saturating_add(1);
        }
    }

    fn event(&mut self, e: ControlEvent) {
        if self.events.is_full() {
            self.events.pop_front();
            self.stats.events_dropped = self.stats.events_dropped.saturating_add(1);
        }
        let _ = self.events.push_back(e);
    }

    fn device_msg(&self, ack: bool) -> DlMessage {
        DlMessage::DeviceId(DeviceId {
            valid: true,
            r#type: self.cfg.device_type & 3,
            id: self.cfg.device_id & 0x3ff,
            ack,
        })
    }

    fn port_msg(&self, ack: bool) -> DlMessage {
        DlMessage::PortNumber(PortNumber {
            valid: true,
            port_number: self.cfg.port_number & 0xfff,
            ack,
        })
    }

    fn send_identity_requests(&mut self) {
        if self.id_pending {
            self.send(self.device_msg(false));
        }
        if self.port_pending {
            self.send(self.port_msg(false));
        }
        if self.rate_pending {
            self.send(DlMessage::TlRateNotification(TlRateNotification {
                rate: self.cfg.tl_rate,
                ack: false,
            }));
        }
    }

    /// The link is up (again): exchange identities and rates.
    pub fn handle_link_up(&mut self, now: Instant) {
        self.out.clear();
        self.id_pending = true;
        self.port_pending = true;
        self.rate_pending = true;
        self.identity_tries = 1;
        self.send_identity_requests();
        self.timers.set(
            ControlTimer::Identity as usize,
            now.saturating_add(self.cfg.response_timeout),
        );
        if let Some(r) = self.ours.as_mut() {
            // Ask again on the new link.
            r.tries = 0;
            self.timers.set(ControlTimer::Channel as usize, now);
        }
    }

    /// The link went down: stop waiting (requests go out again on the next link up).
    pub fn handle_link_down(&mut self) {
        self.out.clear();
        self.timers.stop_all();
        self.theirs = None;
    }

    /// Announce a new TL rate.
    pub fn notify_tl_rate(&mut self, now: Instant, rate: u16) {
        self.cfg.tl_rate = rate;
        self.rate_pending = true;
        self.send(DlMessage::TlRateNotification(TlRateNotification {
            rate,
            ack: false,
        }));
        self.timers.set_if_stopped(
            ControlTimer::Identity as usize,
            now.saturating_add(self.cfg.response_timeout),
        );
    }

    fn send_channel_request(&mut self, now: Instant, target: u8, command: ChannelCommand) {
        self.send(DlMessage::ChannelNegotiation(ChannelNegotiation {
            channel_response: 0,
            channel_command: command as u8,
            channel_target: target & 0xf,
        }));
        self.timers.set(
            ControlTimer::Channel as usize,
            now.saturating_add(self.cfg.response_timeout),
        );
    }

    /// Ask the peer to bring channel `target` (4 bits) online or offline.
    ///
    /// # Errors
    /// [`ControlError::Busy`] while an earlier request is outstanding.
    pub fn request_channel(
        &mut self,
        now: Instant,
        target: u8,
        command: ChannelCommand,
    ) -> Result<(), ControlError> {
        if self.ours.is_some() {
            return Err(ControlError::Busy);
        }
        if self.out.is_full() {
            return Err(ControlError::QueueFull);
        }
        self.ours = Some(OurRequest {
            target: target & 0xf,
            command,
            tries: 1,
        });
        self.send_channel_request(now, target, command);
        Ok(())
    }

    /// Answer the peer's outstanding channel request.
    ///
    /// # Errors
    /// [`ControlError::NoRequest`] when there is none.
    pub fn respond_channel(
        &mut self,
        _now: Instant,
        response: ChannelResponse,
    ) -> Result<(), ControlError> {
        let Some((target, command, _)) = self.theirs else {
            return Err(ControlError::NoRequest);
        };
        if self.out.is_full() {
            return Err(ControlError::QueueFull);
        }
        self.answer(target, command, response);
        Ok(())
    }

    fn answer(&mut self, target: u8, command: ChannelCommand, response: ChannelResponse) {
        self.send(DlMessage::ChannelNegotiation(ChannelNegotiation {
            channel_response: response as u8,
            channel_command: command as u8,
            channel_target: target,
        }));
        self.timers.stop(ControlTimer::ChannelAnswer as usize);
        self.theirs = match response {
            ChannelResponse::Pending => Some((target, command, true)),
            _ => None,
        };
    }

    /// A received DL message. Returns it back if this machine does not handle it (UART,
    /// vendor-defined), for the upper layer.
    pub fn handle_message(&mut self, now: Instant, msg: DlMessage) -> Option<DlMessage> {
        self.stats.messages_received = self.stats.messages_received.saturating_add(1);
        match msg {
            DlMessage::NoOp => {}
            DlMessage::DeviceId(d) => {
                self.peer_device = Some(d);
                if d.ack {
                    self.id_pending = false;
                } else {
                    self.send(self.device_msg(true));
                }
                self.identity_progress();
            }
            DlMessage::PortNumber(p) => {
                self.peer_port = Some(p);
                if p.ack {
                    self.port_pending = false;
                } else {
                    self.send(self.port_msg(true));
                }
                self.identity_progress();
            }
            DlMessage::TlRateNotification(r) => {
                if r.ack {
                    if r.rate == self.cfg.tl_rate {
                        self.rate_pending = false;
                    }
                } else {
                    self.peer_rate = Some(r.rate);
                    self.event(ControlEvent::PeerTlRate { rate: r.rate });
                    self.send(DlMessage::TlRateNotification(TlRateNotification {
                        rate: r.rate,
                        ack: true,
                    }));
                }
                self.identity_progress();
            }
            DlMessage::ChannelNegotiation(c) => self.channel_message(now, c),
            other => return Some(other),
        }
        None
    }

    fn identity_progress(&mut self) {
        if !self.id_pending && !self.port_pending && !self.rate_pending {
            self.timers.stop(ControlTimer::Identity as usize);
        }
        if let (Some(d), Some(p), false, false) = (
            self.peer_device,
            self.peer_port,
            self.id_pending,
            self.port_pending,
        ) {
            if d.ack && p.ack {
                // Report once per exchange: the acks just completed it.
                self.peer_device = Some(DeviceId { ack: false, ..d });
                self.peer_port = Some(PortNumber { ack: false, ..p });
                self.event(ControlEvent::PeerIdentified {
                    device_id: d.id,
                    device_type: d.r#type,
                    port_number: p.port_number,
                });
            }
        }
    }

    fn channel_message(&mut self, now: Instant, c: ChannelNegotiation) {
        let command = ChannelCommand::from_raw(c.channel_command);
        if c.channel_response == 0 {
            // A request from the peer.
            let Some(command) = command else {
                self.stats.protocol_errors = self.stats.protocol_errors.saturating_add(1);
                self.send(DlMessage::ChannelNegotiation(ChannelNegotiation {
                    channel_response: ChannelResponse::Nack as u8,
                    ..c
                }));
                return;
            };
            match self.theirs {
                // A repeat of a request we already answered "pending": say so again.
                Some((t, cmd, true)) if t == c.channel_target && cmd == command => {
                    self.answer(t, cmd, ChannelResponse::Pending);
                }
                Some((t, cmd, false)) if t == c.channel_target && cmd == command => {}
                _ => {
                    self.theirs = Some((c.channel_target, command, false));
                    self.timers.set(
                        ControlTimer::ChannelAnswer as usize,
                        now.saturating_add(self.cfg.answer_within),
                    );
                    self.event(ControlEvent::ChannelRequested {
                        target: c.channel_target,
                        command,
                    });
                }
            }
            return;
        }
        let response = ChannelResponse::from_raw(c.channel_response);
        match (self.ours, response) {
            (Some(r), Some(response))
                if Some(r.command) == command && r.target == c.channel_target =>
            {
                self.event(ControlEvent::ChannelAnswered {
                    target: r.target,
                    command: r.command,
                    response,
                });
                if response == ChannelResponse::Pending {
                    self.timers.set(
                        ControlTimer::Channel as usize,
                        now.saturating_add(self.cfg.pending_timeout),
                    );
                } else {
                    self.ours = None;
                    self.timers.stop(ControlTimer::Channel as usize);
                }
            }
            _ => self.stats.protocol_errors = self.stats.protocol_errors.saturating_add(1),
        }
    }

    /// Fire expired timers (spurious calls do nothing).
    pub fn handle_timeout(&mut self, now: Instant) {
        if self
            .timers
            .take_expired(ControlTimer::Identity as usize, now)
            && (self.id_pending || self.port_pending || self.rate_pending)
        {
            if self.identity_tries < self.cfg.retries {
                self.identity_tries = self.identity_tries.saturating_add(1);
                self.stats.retries = self.stats.retries.saturating_add(1);
                self.send_identity_requests();
                self.timers.set(
                    ControlTimer::Identity as usize,
                    now.saturating_add(self.cfg.response_timeout),
                );
            } else {
                self.id_pending = false;
                self.port_pending = false;
                self.rate_pending = false;
                self.stats.timeouts = self.stats.timeouts.saturating_add(1);
                self.event(ControlEvent::Timeout {
                    request: ControlRequest::Identity,
                });
            }
        }
        if self
            .timers
            .take_expired(ControlTimer::Channel as usize, now)
        {
            if let Some(mut r) = self.ours {
                if r.tries < self.cfg.retries {
                    if r.tries > 0 {
                        self.stats.retries = self.stats.retries.saturating_add(1);
                    }
                    r.tries = r.tries.saturating_add(1);
                    self.ours = Some(r);
                    self.send_channel_request(now, r.target, r.command);
                } else {
                    self.ours = None;
                    self.stats.timeouts = self.stats.timeouts.saturating_add(1);
                    self.event(ControlEvent::Timeout {
                        request: ControlRequest::Channel,
                    });
                }
            }
        }
        if self
            .timers
            .take_expired(ControlTimer::ChannelAnswer as usize, now)
        {
            if let Some((t, cmd, false)) = self.theirs {
                self.stats.auto_pending = self.stats.auto_pending.saturating_add(1);
                self.answer(t, cmd, ChannelResponse::Pending);
            }
        }
    }

    /// The earliest timer deadline.
    #[must_use]
    pub fn poll_timeout(&self) -> Option<Instant> {
        self.timers.next()
    }

    /// The next event, if any.
    #[must_use]
    pub fn poll_event(&mut self) -> Option<ControlEvent> {
        self.events.pop_front()
    }

    /// The next DL message to send, left in the queue.
    pub fn peek_message(&self) -> Option<&DlMessage> {
        self.out.front()
    }

    /// Remove the message [`Control::peek_message`] returned.
    pub fn pop_message(&mut self) {
        self.out.pop_front();
    }

    /// Queue a DL message from the upper layer (UART, vendor-defined).
    ///
    /// # Errors
    /// [`ControlError::QueueFull`].
    pub fn send_message(&mut self, msg: DlMessage) -> Result<(), ControlError> {
        if self.out.is_full() {
            return Err(ControlError::QueueFull);
        }
        self.send(msg);
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::vec::Vec;

    /// The queue keeps the newest 8 events and counts the ones it drops.
    #[test]
    fn the_event_queue_keeps_the_newest_and_counts_what_it_drops() {
        let mut c = Control::new(ControlConfig::default());
        assert_eq!(c.poll_event(), None);
        for rate in 0..11u16 {
            c.event(ControlEvent::PeerTlRate { rate });
        }
        assert_eq!(c.stats().events_dropped, 3);
        let got: Vec<_> = core::iter::from_fn(|| c.poll_event()).collect();
        let want: Vec<_> = (3..11u16)
            .map(|rate| ControlEvent::PeerTlRate { rate })
            .collect();
        assert_eq!(got, want);
        c.event(ControlEvent::PeerTlRate { rate: 99 });
        assert_eq!(c.poll_event(), Some(ControlEvent::PeerTlRate { rate: 99 }));
        assert_eq!(c.poll_event(), None);
    }

    fn cfg(id: u16, port: u16) -> ControlConfig {
        ControlConfig {
            device_id: id,
            device_type: 1,
            port_number: port,
            tl_rate: 200,
            ..ControlConfig::default()
        }
    }

    /// Move every queued message from `a` to `b`.
    fn xfer(a: &mut Control, b: &mut Control, now: Instant) {
        while let Some(m) = a.peek_message().cloned() {
            a.pop_message();
            assert_eq!(b.handle_message(now, m), None);
        }
    }

    fn events(c: &mut Control) -> Vec<ControlEvent> {
        core::iter::from_fn(|| c.poll_event()).collect()
    }

    #[test]
    fn identity_exchange() {
        let (mut a, mut b) = (Control::new(cfg(7, 100)), Control::new(cfg(9, 200)));
        let t = Instant::ZERO;
        a.handle_link_up(t);
        b.handle_link_up(t);
        for _ in 0..2 {
            xfer(&mut a, &mut b, t);
            xfer(&mut b, &mut a, t);
        }
        assert!(a.is_identified() && b.is_identified());
        assert_eq!(a.peer_device().unwrap().id, 9);
        assert_eq!(b.peer_port().unwrap().port_number, 100);
        assert!(events(&mut a).contains(&ControlEvent::PeerIdentified {
            device_id: 9,
            device_type: 1,
            port_number: 200
        }));
        assert_eq!(a.poll_timeout(), None);
        assert_eq!(b.peer_tl_rate(), Some(200));
    }

    #[test]
    fn silent_peer_times_out_after_retries() {
        let mut a = Control::new(cfg(7, 100));
        let mut t = Instant::ZERO;
        a.handle_link_up(t);
        let first: Vec<_> = core::iter::from_fn(|| {
            let m = a.peek_message().cloned();
            a.pop_message();
            m
        })
        .collect();
        assert_eq!(first.len(), 3);
        for _ in 0..2 {
            t = a.poll_timeout().unwrap();
            assert_eq!(t.as_ps() % 1_000_000, 0);
            a.handle_timeout(t);
            assert!(a.has_message());
            while a.peek_message().is_some() {
                a.pop_message();
            }
        }
        t = a.poll_timeout().unwrap();
        a.handle_timeout(t);
        assert_eq!(a.stats().retries, 2);
        assert_eq!(
            events(&mut a),
            [ControlEvent::Timeout {
                request: ControlRequest::Identity
            }]
        );
        assert_eq!(a.poll_timeout(), None);
    }

    #[test]
    fn channel_negotiation_ack_nack_pending() {
        let (mut a, mut b) = (Control::new(cfg(1, 1)), Control::new(cfg(2, 2)));
        let t0 = Instant::ZERO;
        a.request_channel(t0, 3, ChannelCommand::Offline).unwrap();
        assert_eq!(
            a.request_channel(t0, 4, ChannelCommand::Online),
            Err(ControlError::Busy)
        );
        xfer(&mut a, &mut b, t0);
        assert_eq!(
            events(&mut b),
            [ControlEvent::ChannelRequested {
                target: 3,
                command: ChannelCommand::Offline
            }]
        );
        // b's upper layer is slow: after 500 ns b answers "pending" by itself.
        let t1 = b.poll_timeout().unwrap();
        assert_eq!(t1, t0 + Duration::from_ns(500));
        b.handle_timeout(t1);
        assert_eq!(b.stats().auto_pending, 1);
        xfer(&mut b, &mut a, t1);
        assert_eq!(
            events(&mut a),
            [ControlEvent::ChannelAnswered {
                target: 3,
                command: ChannelCommand::Offline,
                response: ChannelResponse::Pending
            }]
        );
        assert_eq!(a.poll_timeout(), Some(t1 + Duration::from_us(100)));
        // Then the final answer.
        b.respond_channel(t1, ChannelResponse::Nack).unwrap();
        assert_eq!(
            b.respond_channel(t1, ChannelResponse::Ack),
            Err(ControlError::NoRequest)
        );
        xfer(&mut b, &mut a, t1);
        assert!(matches!(
            events(&mut a)[..],
            [ControlEvent::ChannelAnswered {
                response: ChannelResponse::Nack,
                ..
            }]
        ));
        assert_eq!(a.poll_timeout(), None);
        // A prompt ack.
        a.request_channel(t1, 5, ChannelCommand::Online).unwrap();
        xfer(&mut a, &mut b, t1);
        b.respond_channel(t1, ChannelResponse::Ack).unwrap();
        xfer(&mut b, &mut a, t1);
        assert!(matches!(
            events(&mut a)[..],
            [ControlEvent::ChannelAnswered {
                target: 5,
                response: ChannelResponse::Ack,
                ..
            }]
        ));
    }

    #[test]
    fn unknown_codes_and_unsolicited_answers() {
        let mut b = Control::new(cfg(2, 2));
        let t = Instant::ZERO;
        let bad = DlMessage::ChannelNegotiation(ChannelNegotiation {
            channel_response: 0,
            channel_command: 9,
            channel_target: 1,
        });
        assert_eq!(b.handle_message(t, bad), None);
        assert_eq!(b.stats().protocol_errors, 1);
        assert!(matches!(
            b.peek_message(),
            Some(DlMessage::ChannelNegotiation(ChannelNegotiation {
                channel_response: 2,
                ..
            }))
        ));
        let unsolicited = DlMessage::ChannelNegotiation(ChannelNegotiation {
            channel_response: 1,
            channel_command: 1,
            channel_target: 1,
        });
        assert_eq!(b.handle_message(t, unsolicited), None);
        assert_eq!(b.stats().protocol_errors, 2);
        let vendor = DlMessage::Vendor(Default::default());
        assert_eq!(b.handle_message(t, vendor.clone()), Some(vendor));
    }
}
