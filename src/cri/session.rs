//! One HTTP/2 client connection carrying unary gRPC calls, one at a time, as a pure state
//! machine: bytes in ([`Session::receive`]), bytes out ([`Session::take_output`]), no socket.
//! It writes the preface and our SETTINGS, answers SETTINGS and PING, keeps the server's HPACK
//! table in step (header blocks of every stream are decoded), gives back flow-control credit
//! as DATA is consumed, and turns RST_STREAM and GOAWAY into errors of the call they end.

use super::frame::{self, Frame, Read};
use super::grpc::{self, GrpcError};
use super::hpack::{self, Field, HpackError};

/// The client connection preface (RFC 9113 §3.4).
pub const PREFACE: &[u8] = b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n";

/// The dynamic table the server may use: HPACK's default, which we do not change.
pub const HEADER_TABLE_SIZE: usize = 4096;
/// The largest decoded header list accepted (advertised as SETTINGS_MAX_HEADER_LIST_SIZE);
/// also the bound on a header block's encoded size.
pub const MAX_HEADER_LIST: usize = 64 << 10;
/// The connection's receive window after our first WINDOW_UPDATE: room for the largest
/// message, so only the stream window (RFC 9113's default, 65,535) paces an answer.
pub const CONNECTION_WINDOW: u32 =
    (grpc::MAX_MESSAGE + 2 * frame::DEFAULT_MAX_FRAME_SIZE as usize) as u32;
/// RFC 9113's initial window, for the connection and each stream until changed.
const DEFAULT_WINDOW: u32 = 65_535;

/// Why a call or its connection failed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum SessionError {
    Frame(frame::FrameError),
    Hpack(HpackError),
    Grpc(GrpcError),
    /// The server reset the call's stream (an HTTP/2 error code).
    Reset {
        code: u32,
    },
    /// The server is closing the connection and will not process the call.
    GoAway {
        last_stream: u32,
        code: u32,
        debug: String,
    },
    /// A frame that breaks the call's sequence (DATA before HEADERS, HEADERS after trailers,
    /// an answer without END_STREAM on its trailers).
    Sequence(&'static str),
    /// A call started while another is in progress, or after GOAWAY.
    NotReady,
    /// The request message is too large for one DATA frame.
    RequestTooLarge,
    /// Every client stream id has been used.
    StreamIdsExhausted,
}

impl std::fmt::Display for SessionError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            SessionError::Frame(e) => write!(f, "HTTP/2: {e}"),
            SessionError::Hpack(e) => write!(f, "HPACK: {e}"),
            SessionError::Grpc(e) => write!(f, "gRPC: {e}"),
            SessionError::Reset { code } => {
                write!(f, "stream reset by the server ({})", h2_code_name(*code))
            }
            SessionError::GoAway {
                last_stream,
                code,
                debug,
            } => write!(
                f,
                "the server sent GOAWAY ({}, last stream {last_stream}{}{debug})",
                h2_code_name(*code),
                if debug.is_empty() { "" } else { ": " }
            ),
            SessionError::Sequence(what) => write!(f, "HTTP/2: {what}"),
            SessionError::NotReady => f.write_str("connection cannot take a new call"),
            SessionError::RequestTooLarge => f.write_str("request message too large"),
            SessionError::StreamIdsExhausted => f.write_str("stream ids exhausted"),
        }
    }
}

impl From<frame::FrameError> for SessionError {
    fn from(e: frame::FrameError) -> Self {
        SessionError::Frame(e)
    }
}
impl From<HpackError> for SessionError {
    fn from(e: HpackError) -> Self {
        SessionError::Hpack(e)
    }
}
impl From<GrpcError> for SessionError {
    fn from(e: GrpcError) -> Self {
        SessionError::Grpc(e)
    }
}

/// The name of an HTTP/2 error code (RFC 9113 §7).
pub fn h2_code_name(code: u32) -> &'static str {
    const NAMES: [&str; 14] = [
        "NO_ERROR",
        "PROTOCOL_ERROR",
        "INTERNAL_ERROR",
        "FLOW_CONTROL_ERROR",
        "SETTINGS_TIMEOUT",
        "STREAM_CLOSED",
        "FRAME_SIZE_ERROR",
        "REFUSED_STREAM",
        "CANCEL",
        "COMPRESSION_ERROR",
        "CONNECT_ERROR",
        "ENHANCE_YOUR_CALM",
        "INADEQUATE_SECURITY",
        "HTTP_1_1_REQUIRED",
    ];
    usize::try_from(code)
        .ok()
        .and_then(|c| NAMES.get(c))
        .copied()
        .unwrap_or("unknown error code")
}

/// The call in progress.
#[derive(Debug)]
struct Call {
    stream: u32,
    headers_seen: bool,
    body: Vec<u8>,
}

/// One connection's state.
#[derive(Debug)]
pub struct Session {
    input: Vec<u8>,
    output: Vec<u8>,
    hpack: hpack::Decoder,
    limits: frame::Limits,
    next_stream: u32,
    call: Option<Call>,
    goaway: Option<u32>,
    /// Whether the server has acknowledged our SETTINGS.
    settings_acked: bool,
}

impl Default for Session {
    fn default() -> Self {
        Session::new()
    }
}

impl Session {
    /// A new connection, its preface, SETTINGS and first WINDOW_UPDATE ready to be written.
    pub fn new() -> Session {
        let mut output = PREFACE.to_vec();
        let mut settings = Vec::new();
        for (id, value) in [
            (frame::SETTINGS_ENABLE_PUSH, 0),
            (frame::SETTINGS_MAX_HEADER_LIST_SIZE, MAX_HEADER_LIST as u32),
        ] {
            settings.extend_from_slice(&id.to_be_bytes());
            settings.extend_from_slice(&u32::to_be_bytes(value));
        }
        frame::encode_frame(&mut output, frame::SETTINGS, 0, 0, &settings);
        window_update(&mut output, 0, CONNECTION_WINDOW - DEFAULT_WINDOW);
        Session {
            input: Vec::new(),
            output,
            hpack: hpack::Decoder::new(HEADER_TABLE_SIZE),
            limits: frame::Limits {
                max_frame: frame::DEFAULT_MAX_FRAME_SIZE,
                max_header_block: MAX_HEADER_LIST,
            },
            next_stream: 1,
            call: None,
            goaway: None,
            settings_acked: false,
        }
    }

    /// Whether a new call may start on this connection (no GOAWAY, no call in progress).
    pub fn reusable(&self) -> bool {
        self.goaway.is_none() && self.call.is_none() && self.next_stream < 0x7fff_ffff
    }

    /// Whether the server has acknowledged our SETTINGS.
    pub fn settings_acked(&self) -> bool {
        self.settings_acked
    }

    /// The octets to write now (taken: the next call returns only what is new).
    pub fn take_output(&mut self) -> Vec<u8> {
        std::mem::take(&mut self.output)
    }

    /// Starts a unary call of `path` with `message` on a new stream; returns its stream id.
    pub fn start_call(
        &mut self,
        path: &str,
        authority: &str,
        timeout_ms: u64,
        message: &[u8],
    ) -> Result<u32, SessionError> {
        if !self.reusable() {
            return Err(if self.next_stream >= 0x7fff_ffff {
                SessionError::StreamIdsExhausted
            } else {
                SessionError::NotReady
            });
        }
        let body = grpc::frame_message(message);
        let block = grpc::request_headers(path, authority, timeout_ms);
        let max = frame::DEFAULT_MAX_FRAME_SIZE as usize;
        if body.len() > max || block.len() > max {
            return Err(SessionError::RequestTooLarge);
        }
        let stream = self.next_stream;
        self.next_stream += 2;
        frame::encode_frame(
            &mut self.output,
            frame::HEADERS,
            frame::END_HEADERS,
            stream,
            &block,
        );
        frame::encode_frame(
            &mut self.output,
            frame::DATA,
            frame::END_STREAM,
            stream,
            &body,
        );
        self.call = Some(Call {
            stream,
            headers_seen: false,
            body: Vec::new(),
        });
        Ok(stream)
    }

    /// Takes octets read from the server. Returns the call's answer message once its stream
    /// has ended well, `None` while more is needed, or the error that ends the call (after
    /// which the connection must be dropped).
    pub fn receive(&mut self, bytes: &[u8]) -> Result<Option<Vec<u8>>, SessionError> {
        self.input.extend_from_slice(bytes);
        loop {
            let (frame, used) = match frame::read(&self.input, &self.limits)? {
                Read::NeedMore => return Ok(None),
                Read::Frame(frame, used) => (frame, used),
            };
            self.input.drain(..used);
            if let Some(message) = self.on_frame(frame)? {
                return Ok(Some(message));
            }
        }
    }

    fn on_frame(&mut self, frame: Frame) -> Result<Option<Vec<u8>>, SessionError> {
        match frame {
            Frame::Settings { ack: true, .. } => self.settings_acked = true,
            Frame::Settings { ack: false, .. } => {
                frame::encode_frame(&mut self.output, frame::SETTINGS, frame::ACK, 0, &[])
            }
            Frame::Ping { ack: false, data } => {
                frame::encode_frame(&mut self.output, frame::PING, frame::ACK, 0, &data)
            }
            Frame::Ping { ack: true, .. } | Frame::WindowUpdate { .. } | Frame::Ignored { .. } => {}
            Frame::GoAway {
                last_stream,
                code,
                debug,
            } => {
                self.goaway = Some(last_stream);
                if let Some(call) = &self.call {
                    if call.stream > last_stream || code != 0 {
                        let debug =
                            String::from_utf8_lossy(&debug[..debug.len().min(256)]).into_owned();
                        self.call = None;
                        return Err(SessionError::GoAway {
                            last_stream,
                            code,
                            debug,
                        });
                    }
                }
            }
            Frame::RstStream { stream, code } => {
                if self.call.as_ref().is_some_and(|c| c.stream == stream) {
                    self.call = None;
                    return Err(SessionError::Reset { code });
                }
            }
            Frame::Headers {
                stream,
                end_stream,
                block,
            } => {
                // Decoded whatever the stream: the table must stay in step with the server's.
                let fields = self.hpack.decode(&block, MAX_HEADER_LIST)?;
                return self.on_headers(stream, end_stream, &fields);
            }
            Frame::Data {
                stream,
                end_stream,
                data,
                flow_len,
            } => return self.on_data(stream, end_stream, &data, flow_len),
        }
        Ok(None)
    }

    fn on_headers(
        &mut self,
        stream: u32,
        end_stream: bool,
        fields: &[Field],
    ) -> Result<Option<Vec<u8>>, SessionError> {
        let Some(call) = self.call.as_mut().filter(|c| c.stream == stream) else {
            return Ok(None);
        };
        if !call.headers_seen {
            grpc::check_headers(fields)?;
            call.headers_seen = true;
            if !end_stream {
                return Ok(None);
            }
            // Trailers-only: the status is in this block; an OK without a message is no answer.
            self.call = None;
            grpc::status(fields)?;
            return Err(GrpcError::BadBody { length: 0 }.into());
        }
        if !end_stream {
            return Err(SessionError::Sequence(
                "a second header block without END_STREAM",
            ));
        }
        let Some(call) = self.call.take() else {
            return Ok(None);
        };
        grpc::status(fields)?;
        Ok(Some(grpc::unframe(&call.body)?.to_vec()))
    }

    fn on_data(
        &mut self,
        stream: u32,
        end_stream: bool,
        data: &[u8],
        flow_len: u32,
    ) -> Result<Option<Vec<u8>>, SessionError> {
        let ours = self.call.as_ref().is_some_and(|c| c.stream == stream);
        if flow_len > 0 {
            // The octets are consumed now (kept in the call's body or dropped): credit both
            // windows, the stream's only while it stays open.
            window_update(&mut self.output, 0, flow_len);
            if ours && !end_stream {
                window_update(&mut self.output, stream, flow_len);
            }
        }
        let Some(call) = self.call.as_mut().filter(|_| ours) else {
            return Ok(None);
        };
        if !call.headers_seen {
            return Err(SessionError::Sequence("DATA before the answer's headers"));
        }
        if call.body.len() + data.len() > grpc::PREFIX_LEN + grpc::MAX_MESSAGE {
            let length = (call.body.len() + data.len()) as u64;
            return Err(GrpcError::TooLarge {
                length,
                max: grpc::MAX_MESSAGE,
            }
            .into());
        }
        call.body.extend_from_slice(data);
        grpc::check_prefix(&call.body)?;
        if end_stream {
            self.call = None;
            return Err(GrpcError::NoStatus.into());
        }
        Ok(None)
    }
}

fn window_update(out: &mut Vec<u8>, stream: u32, increment: u32) {
    frame::encode_frame(
        out,
        frame::WINDOW_UPDATE,
        0,
        stream,
        &increment.to_be_bytes(),
    );
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::cri::frame::encode_frame;

    const PATH: &str = "/runtime.v1.RuntimeService/ListPodSandbox";

    fn response_headers() -> Vec<u8> {
        let mut block = vec![0x88]; // :status 200, static index 8
        hpack::encode_literal(&mut block, b"content-type", b"application/grpc");
        block
    }

    fn trailers(status: &str, message: &str) -> Vec<u8> {
        let mut block = Vec::new();
        hpack::encode_literal(&mut block, b"grpc-status", status.as_bytes());
        if !message.is_empty() {
            hpack::encode_literal(&mut block, b"grpc-message", message.as_bytes());
        }
        block
    }

    /// A whole answer on `stream`: SETTINGS, headers, the message in DATA frames of at most
    /// `chunk` octets, trailers.
    fn answer(stream: u32, message: &[u8], chunk: usize) -> Vec<u8> {
        let mut out = Vec::new();
        encode_frame(&mut out, frame::SETTINGS, 0, 0, &[]);
        encode_frame(
            &mut out,
            frame::HEADERS,
            frame::END_HEADERS,
            stream,
            &response_headers(),
        );
        for part in grpc::frame_message(message).chunks(chunk) {
            encode_frame(&mut out, frame::DATA, 0, stream, part);
        }
        encode_frame(
            &mut out,
            frame::HEADERS,
            frame::END_HEADERS | frame::END_STREAM,
            stream,
            &trailers("0", ""),
        );
        out
    }

    /// The frames of `out`, preface skipped.
    fn frames(mut out: &[u8]) -> Vec<Frame> {
        out = out.strip_prefix(PREFACE).unwrap_or(out);
        let limits = frame::Limits {
            max_frame: 1 << 20,
            max_header_block: 1 << 20,
        };
        let mut got = Vec::new();
        while !out.is_empty() {
            let Ok(Read::Frame(f, used)) = frame::read(out, &limits) else {
                panic!("bad output")
            };
            got.push(f);
            out = &out[used..];
        }
        got
    }

    fn started() -> Session {
        let mut s = Session::new();
        s.start_call(PATH, "localhost", 2000, &[0x0a, 0x02, 0x12, 0x00])
            .unwrap();
        s
    }

    #[test]
    fn the_connection_opens_with_preface_settings_and_a_window_update() {
        let mut s = started();
        let out = s.take_output();
        assert!(out.starts_with(PREFACE));
        let f = frames(&out);
        assert!(
            matches!(&f[0], Frame::Settings { ack: false, params } if params.contains(&(frame::SETTINGS_ENABLE_PUSH, 0)))
        );
        assert_eq!(
            f[1],
            Frame::WindowUpdate {
                stream: 0,
                increment: CONNECTION_WINDOW - DEFAULT_WINDOW
            }
        );
        assert!(matches!(
            &f[2],
            Frame::Headers {
                stream: 1,
                end_stream: false,
                ..
            }
        ));
        assert!(
            matches!(&f[3], Frame::Data { stream: 1, end_stream: true, data, .. } if data == b"\0\0\0\0\x04\x0a\x02\x12\x00")
        );
    }

    #[test]
    fn an_answer_is_read_whole_or_octet_by_octet() {
        let message = b"the answer".to_vec();
        let mut s = started();
        assert_eq!(
            s.receive(&answer(1, &message, 4)),
            Ok(Some(message.clone()))
        );
        assert!(s.reusable());
        // The server's SETTINGS is acknowledged.
        assert!(frames(&s.take_output()).contains(&Frame::Settings {
            ack: true,
            params: vec![]
        }));
        let mut s = started();
        let bytes = answer(1, &message, 3);
        let (last, most) = bytes.split_last().unwrap();
        for b in most {
            assert_eq!(s.receive(std::slice::from_ref(b)), Ok(None));
        }
        assert_eq!(s.receive(&[*last]), Ok(Some(message)));
        // The next call uses stream 3.
        assert_eq!(s.start_call(PATH, "localhost", 2000, b""), Ok(3));
    }

    #[test]
    fn a_large_answer_gets_window_updates_for_every_data_octet() {
        let message = vec![7u8; 200_000];
        let mut s = started();
        s.take_output();
        assert_eq!(
            s.receive(&answer(1, &message, 16_384)),
            Ok(Some(message.clone()))
        );
        let (mut conn, mut stream) = (0u64, 0u64);
        for f in frames(&s.take_output()) {
            match f {
                Frame::WindowUpdate {
                    stream: 0,
                    increment,
                } => conn += u64::from(increment),
                Frame::WindowUpdate {
                    stream: 1,
                    increment,
                } => stream += u64::from(increment),
                _ => {}
            }
        }
        let total = (message.len() + grpc::PREFIX_LEN) as u64;
        assert_eq!(conn, total);
        assert_eq!(stream, total);
    }

    #[test]
    fn ping_is_echoed() {
        let mut s = started();
        s.take_output();
        let mut ping = Vec::new();
        encode_frame(&mut ping, frame::PING, 0, 0, b"87654321");
        assert_eq!(s.receive(&ping), Ok(None));
        assert_eq!(
            frames(&s.take_output()),
            [Frame::Ping {
                ack: true,
                data: *b"87654321"
            }]
        );
    }

    #[test]
    fn reset_and_goaway_end_the_call() {
        let mut s = started();
        let mut rst = Vec::new();
        encode_frame(
            &mut rst,
            frame::HEADERS,
            frame::END_HEADERS,
            1,
            &response_headers(),
        );
        encode_frame(&mut rst, frame::RST_STREAM, 0, 1, &[0, 0, 0, 8]);
        assert_eq!(s.receive(&rst), Err(SessionError::Reset { code: 8 }));
        assert!(SessionError::Reset { code: 8 }
            .to_string()
            .contains("CANCEL"));

        let mut s = started();
        let mut away = Vec::new();
        encode_frame(
            &mut away,
            frame::GOAWAY,
            0,
            0,
            &[0, 0, 0, 0, 0, 0, 0, 0, b'b', b'y', b'e'],
        );
        assert_eq!(
            s.receive(&away),
            Err(SessionError::GoAway {
                last_stream: 0,
                code: 0,
                debug: "bye".into()
            })
        );
        assert!(!s.reusable());

        // A graceful GOAWAY that covers the call lets it finish; no new call after it.
        let mut s = started();
        let mut away = Vec::new();
        encode_frame(&mut away, frame::GOAWAY, 0, 0, &[0, 0, 0, 1, 0, 0, 0, 0]);
        away.extend(answer(1, b"m", 100));
        assert_eq!(s.receive(&away), Ok(Some(b"m".to_vec())));
        assert_eq!(
            s.start_call(PATH, "localhost", 2000, b""),
            Err(SessionError::NotReady)
        );
    }

    #[test]
    fn trailers_only_and_bad_sequences_are_errors() {
        let mut s = started();
        let mut block = vec![0x88];
        hpack::encode_literal(&mut block, b"content-type", b"application/grpc");
        block.extend(trailers("12", "unknown method"));
        let mut only = Vec::new();
        encode_frame(
            &mut only,
            frame::HEADERS,
            frame::END_HEADERS | frame::END_STREAM,
            1,
            &block,
        );
        assert_eq!(
            s.receive(&only),
            Err(GrpcError::Status {
                code: 12,
                message: "unknown method".into()
            }
            .into())
        );

        let mut s = started();
        let mut early = Vec::new();
        encode_frame(&mut early, frame::DATA, 0, 1, b"\0\0\0\0\0");
        assert_eq!(
            s.receive(&early),
            Err(SessionError::Sequence("DATA before the answer's headers"))
        );

        let mut s = started();
        let mut huge = Vec::new();
        encode_frame(
            &mut huge,
            frame::HEADERS,
            frame::END_HEADERS,
            1,
            &response_headers(),
        );
        encode_frame(&mut huge, frame::DATA, 0, 1, b"\0\x7f\xff\xff\xff");
        assert!(matches!(
            s.receive(&huge),
            Err(SessionError::Grpc(GrpcError::TooLarge { .. }))
        ));

        let mut s = started();
        let mut no_trailers = Vec::new();
        encode_frame(
            &mut no_trailers,
            frame::HEADERS,
            frame::END_HEADERS,
            1,
            &response_headers(),
        );
        encode_frame(
            &mut no_trailers,
            frame::DATA,
            frame::END_STREAM,
            1,
            b"\0\0\0\0\0",
        );
        assert_eq!(s.receive(&no_trailers), Err(GrpcError::NoStatus.into()));
    }

    #[test]
    fn other_streams_keep_the_header_table_in_step() {
        let mut s = started();
        // On stream 99 (not ours) the server indexes content-type; stream 1 then refers to it.
        let mut indexed = vec![0x5f, 0x10];
        indexed.extend_from_slice(b"application/grpc");
        let mut bytes = Vec::new();
        encode_frame(
            &mut bytes,
            frame::HEADERS,
            frame::END_HEADERS,
            99,
            &[&[0x88][..], &indexed].concat(),
        );
        encode_frame(
            &mut bytes,
            frame::HEADERS,
            frame::END_HEADERS,
            1,
            &[0x88, 0xbe],
        );
        encode_frame(&mut bytes, frame::DATA, 0, 1, &grpc::frame_message(b"x"));
        encode_frame(
            &mut bytes,
            frame::HEADERS,
            frame::END_HEADERS | frame::END_STREAM,
            1,
            &trailers("0", ""),
        );
        assert_eq!(s.receive(&bytes), Ok(Some(b"x".to_vec())));
    }
}
