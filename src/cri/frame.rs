//! HTTP/2 frames (RFC 9113 §4, §6): the 9-octet frame header, and a reader over a byte buffer
//! that returns one typed frame, "need more", or an error. DATA and HEADERS come without their
//! padding and priority fields; a HEADERS block is joined with its CONTINUATION frames (bounded).
//! Frames larger than our SETTINGS_MAX_FRAME_SIZE are refused; unknown frame types and PRIORITY
//! are returned as [`Frame::Ignored`] (§5.5).

/// The frame header's length.
pub const HEADER_LEN: usize = 9;

/// Frame types (§6).
pub const DATA: u8 = 0x0;
pub const HEADERS: u8 = 0x1;
pub const PRIORITY: u8 = 0x2;
pub const RST_STREAM: u8 = 0x3;
pub const SETTINGS: u8 = 0x4;
pub const PUSH_PROMISE: u8 = 0x5;
pub const PING: u8 = 0x6;
pub const GOAWAY: u8 = 0x7;
pub const WINDOW_UPDATE: u8 = 0x8;
pub const CONTINUATION: u8 = 0x9;

/// Flags.
pub const END_STREAM: u8 = 0x1;
pub const ACK: u8 = 0x1;
pub const END_HEADERS: u8 = 0x4;
pub const PADDED: u8 = 0x8;
pub const PRIORITY_FLAG: u8 = 0x20;

/// SETTINGS parameters (§6.5.2).
pub const SETTINGS_HEADER_TABLE_SIZE: u16 = 0x1;
pub const SETTINGS_ENABLE_PUSH: u16 = 0x2;
pub const SETTINGS_INITIAL_WINDOW_SIZE: u16 = 0x4;
pub const SETTINGS_MAX_FRAME_SIZE: u16 = 0x5;
pub const SETTINGS_MAX_HEADER_LIST_SIZE: u16 = 0x6;

/// The smallest SETTINGS_MAX_FRAME_SIZE, the one every peer accepts without asking.
pub const DEFAULT_MAX_FRAME_SIZE: u32 = 16_384;

/// A frame's header (§4.1).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct FrameHeader {
    pub length: u32,
    pub kind: u8,
    pub flags: u8,
    pub stream: u32,
}

impl FrameHeader {
    /// Parses the first nine octets of `b` (the reserved bit of the stream id is ignored).
    pub fn parse(b: &[u8; HEADER_LEN]) -> FrameHeader {
        FrameHeader {
            length: u32::from_be_bytes([0, b[0], b[1], b[2]]),
            kind: b[3],
            flags: b[4],
            stream: u32::from_be_bytes([b[5], b[6], b[7], b[8]]) & 0x7fff_ffff,
        }
    }

    /// Appends the header's nine octets to `out`.
    pub fn encode(&self, out: &mut Vec<u8>) {
        out.extend_from_slice(&self.length.to_be_bytes()[1..]);
        out.push(self.kind);
        out.push(self.flags);
        out.extend_from_slice(&(self.stream & 0x7fff_ffff).to_be_bytes());
    }
}

/// Appends a whole frame to `out`.
pub fn encode_frame(out: &mut Vec<u8>, kind: u8, flags: u8, stream: u32, payload: &[u8]) {
    FrameHeader {
        length: payload.len() as u32,
        kind,
        flags,
        stream,
    }
    .encode(out);
    out.extend_from_slice(payload);
}

/// One frame, as the connection logic needs it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Frame {
    /// DATA without padding; `flow_len` is the whole payload's length, padding included, which
    /// is what flow control counts (§6.9.1).
    Data {
        stream: u32,
        end_stream: bool,
        data: Vec<u8>,
        flow_len: u32,
    },
    /// A HEADERS block joined with its CONTINUATION frames, without padding or priority.
    Headers {
        stream: u32,
        end_stream: bool,
        block: Vec<u8>,
    },
    RstStream {
        stream: u32,
        code: u32,
    },
    Settings {
        ack: bool,
        params: Vec<(u16, u32)>,
    },
    Ping {
        ack: bool,
        data: [u8; 8],
    },
    GoAway {
        last_stream: u32,
        code: u32,
        debug: Vec<u8>,
    },
    WindowUpdate {
        stream: u32,
        increment: u32,
    },
    /// PRIORITY, or a type this client does not know: ignored (§5.5).
    Ignored {
        kind: u8,
    },
}

/// What the reader found at the buffer's start.
#[derive(Debug, PartialEq, Eq)]
pub enum Read {
    /// A frame, and how many octets of the buffer it took.
    Frame(Frame, usize),
    /// The buffer does not yet hold a whole frame (or header block).
    NeedMore,
}

/// Why a frame was refused: each is a connection error.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum FrameError {
    /// A frame longer than our SETTINGS_MAX_FRAME_SIZE.
    TooLarge { length: u32, max: u32 },
    /// A header block (HEADERS + CONTINUATION) longer than our bound.
    HeaderBlockTooLarge { max: usize },
    /// A frame whose length does not fit its type, or padding as long as its payload.
    BadLength { kind: u8, length: u32 },
    /// A frame on the wrong stream (0 for DATA/HEADERS, non-0 for SETTINGS/PING/GOAWAY).
    BadStream { kind: u8, stream: u32 },
    /// A CONTINUATION where none was expected, or another frame inside a header block.
    BadContinuation,
    /// PUSH_PROMISE, though we disabled push.
    PushPromise,
    /// WINDOW_UPDATE with an increment of 0.
    ZeroWindowIncrement,
}

impl std::fmt::Display for FrameError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            FrameError::TooLarge { length, max } => {
                write!(f, "frame of {length} octets over the maximum {max}")
            }
            FrameError::HeaderBlockTooLarge { max } => write!(f, "header block over {max} octets"),
            FrameError::BadLength { kind, length } => {
                write!(f, "frame type {kind} with invalid length {length}")
            }
            FrameError::BadStream { kind, stream } => {
                write!(f, "frame type {kind} on invalid stream {stream}")
            }
            FrameError::BadContinuation => f.write_str("unexpected or missing CONTINUATION frame"),
            FrameError::PushPromise => f.write_str("PUSH_PROMISE although push is disabled"),
            FrameError::ZeroWindowIncrement => f.write_str("WINDOW_UPDATE with a zero increment"),
        }
    }
}

/// The reader's bounds.
#[derive(Debug, Clone, Copy)]
pub struct Limits {
    /// Our SETTINGS_MAX_FRAME_SIZE: the longest frame payload accepted.
    pub max_frame: u32,
    /// The longest header block accepted, HEADERS and CONTINUATION fragments together.
    pub max_header_block: usize,
}

/// The header and payload of the frame at `buf[at..]`, if it is all there.
fn raw_frame<'a>(
    buf: &'a [u8],
    at: usize,
    limits: &Limits,
) -> Result<Option<(FrameHeader, &'a [u8])>, FrameError> {
    let Some(head) = buf.get(at..at + HEADER_LEN) else {
        return Ok(None);
    };
    let head: &[u8; HEADER_LEN] = head.try_into().map_err(|_| FrameError::BadContinuation)?;
    let h = FrameHeader::parse(head);
    if h.length > limits.max_frame {
        return Err(FrameError::TooLarge {
            length: h.length,
            max: limits.max_frame,
        });
    }
    let start = at + HEADER_LEN;
    Ok(buf
        .get(start..start + h.length as usize)
        .map(|payload| (h, payload)))
}

/// Strips the padding of a PADDED frame's payload (§6.1).
fn unpad<'a>(h: &FrameHeader, payload: &'a [u8]) -> Result<&'a [u8], FrameError> {
    if h.flags & PADDED == 0 {
        return Ok(payload);
    }
    let bad = FrameError::BadLength {
        kind: h.kind,
        length: h.length,
    };
    let (&pad, rest) = payload.split_first().ok_or(bad.clone())?;
    rest.len()
        .checked_sub(usize::from(pad))
        .map(|end| &rest[..end])
        .ok_or(bad)
}

fn be32(b: &[u8]) -> u32 {
    u32::from_be_bytes([b[0], b[1], b[2], b[3]])
}

/// Reads the frame at the start of `buf`.
pub fn read(buf: &[u8], limits: &Limits) -> Result<Read, FrameError> {
    let Some((h, payload)) = raw_frame(buf, 0, limits)? else {
        return Ok(Read::NeedMore);
    };
    let mut used = HEADER_LEN + payload.len();
    let bad_len = || FrameError::BadLength {
        kind: h.kind,
        length: h.length,
    };
    let bad_stream = || FrameError::BadStream {
        kind: h.kind,
        stream: h.stream,
    };
    let frame = match h.kind {
        DATA => {
            if h.stream == 0 {
                return Err(bad_stream());
            }
            let data = unpad(&h, payload)?.to_vec();
            Frame::Data {
                stream: h.stream,
                end_stream: h.flags & END_STREAM != 0,
                data,
                flow_len: h.length,
            }
        }
        HEADERS => {
            if h.stream == 0 {
                return Err(bad_stream());
            }
            let mut fragment = unpad(&h, payload)?;
            if h.flags & PRIORITY_FLAG != 0 {
                fragment = fragment.get(5..).ok_or_else(bad_len)?;
            }
            let mut block = fragment.to_vec();
            let mut end_headers = h.flags & END_HEADERS != 0;
            while !end_headers {
                if block.len() > limits.max_header_block {
                    return Err(FrameError::HeaderBlockTooLarge {
                        max: limits.max_header_block,
                    });
                }
                let Some((c, more)) = raw_frame(buf, used, limits)? else {
                    return Ok(Read::NeedMore);
                };
                if c.kind != CONTINUATION || c.stream != h.stream {
                    return Err(FrameError::BadContinuation);
                }
                block.extend_from_slice(more);
                used += HEADER_LEN + more.len();
                end_headers = c.flags & END_HEADERS != 0;
            }
            if block.len() > limits.max_header_block {
                return Err(FrameError::HeaderBlockTooLarge {
                    max: limits.max_header_block,
                });
            }
            Frame::Headers {
                stream: h.stream,
                end_stream: h.flags & END_STREAM != 0,
                block,
            }
        }
        RST_STREAM => {
            if h.stream == 0 {
                return Err(bad_stream());
            }
            if payload.len() != 4 {
                return Err(bad_len());
            }
            Frame::RstStream {
                stream: h.stream,
                code: be32(payload),
            }
        }
        SETTINGS => {
            if h.stream != 0 {
                return Err(bad_stream());
            }
            let ack = h.flags & ACK != 0;
            if payload.len() % 6 != 0 || (ack && !payload.is_empty()) {
                return Err(bad_len());
            }
            let params = payload
                .chunks_exact(6)
                .map(|p| (u16::from_be_bytes([p[0], p[1]]), be32(&p[2..])))
                .collect();
            Frame::Settings { ack, params }
        }
        PUSH_PROMISE => return Err(FrameError::PushPromise),
        PING => {
            if h.stream != 0 {
                return Err(bad_stream());
            }
            let data: [u8; 8] = payload.try_into().map_err(|_| bad_len())?;
            Frame::Ping {
                ack: h.flags & ACK != 0,
                data,
            }
        }
        GOAWAY => {
            if h.stream != 0 {
                return Err(bad_stream());
            }
            if payload.len() < 8 {
                return Err(bad_len());
            }
            Frame::GoAway {
                last_stream: be32(payload) & 0x7fff_ffff,
                code: be32(&payload[4..]),
                debug: payload[8..].to_vec(),
            }
        }
        WINDOW_UPDATE => {
            if payload.len() != 4 {
                return Err(bad_len());
            }
            let increment = be32(payload) & 0x7fff_ffff;
            if increment == 0 {
                return Err(FrameError::ZeroWindowIncrement);
            }
            Frame::WindowUpdate {
                stream: h.stream,
                increment,
            }
        }
        CONTINUATION => return Err(FrameError::BadContinuation),
        kind => {
            if kind == PRIORITY && payload.len() != 5 {
                return Err(bad_len());
            }
            Frame::Ignored { kind }
        }
    };
    Ok(Read::Frame(frame, used))
}

#[cfg(test)]
mod tests {
    use super::*;

    const LIMITS: Limits = Limits {
        max_frame: DEFAULT_MAX_FRAME_SIZE,
        max_header_block: 1024,
    };

    fn frame(kind: u8, flags: u8, stream: u32, payload: &[u8]) -> Vec<u8> {
        let mut out = Vec::new();
        encode_frame(&mut out, kind, flags, stream, payload);
        out
    }

    #[test]
    fn header_round_trips() {
        let h = FrameHeader {
            length: 0x12_3456,
            kind: 9,
            flags: 0x25,
            stream: 0x7fff_fffe,
        };
        let mut out = Vec::new();
        h.encode(&mut out);
        assert_eq!(out.len(), HEADER_LEN);
        assert_eq!(FrameHeader::parse(out[..].try_into().unwrap()), h);
        // The reserved bit is ignored.
        out[5] |= 0x80;
        assert_eq!(
            FrameHeader::parse(out[..].try_into().unwrap()).stream,
            0x7fff_fffe
        );
    }

    #[test]
    fn every_prefix_of_a_frame_needs_more() {
        let f = frame(DATA, END_STREAM, 1, b"hello");
        for end in 0..f.len() {
            assert_eq!(read(&f[..end], &LIMITS), Ok(Read::NeedMore), "prefix {end}");
        }
        let want = Frame::Data {
            stream: 1,
            end_stream: true,
            data: b"hello".to_vec(),
            flow_len: 5,
        };
        assert_eq!(read(&f, &LIMITS), Ok(Read::Frame(want, f.len())));
    }

    #[test]
    fn padding_and_priority_are_stripped() {
        let f = frame(DATA, PADDED, 3, &[2, b'a', b'b', 0, 0]);
        let want = Frame::Data {
            stream: 3,
            end_stream: false,
            data: b"ab".to_vec(),
            flow_len: 5,
        };
        assert_eq!(read(&f, &LIMITS), Ok(Read::Frame(want, f.len())));
        let f = frame(
            HEADERS,
            PADDED | PRIORITY_FLAG | END_HEADERS,
            1,
            &[1, 0, 0, 0, 3, 16, 0x88, 0],
        );
        let want = Frame::Headers {
            stream: 1,
            end_stream: false,
            block: vec![0x88],
        };
        assert_eq!(read(&f, &LIMITS), Ok(Read::Frame(want, f.len())));
        // Padding as long as the payload.
        let f = frame(DATA, PADDED, 1, &[4, 0, 0, 0]);
        assert_eq!(
            read(&f, &LIMITS),
            Err(FrameError::BadLength {
                kind: DATA,
                length: 4
            })
        );
        let f = frame(DATA, PADDED, 1, &[]);
        assert_eq!(
            read(&f, &LIMITS),
            Err(FrameError::BadLength {
                kind: DATA,
                length: 0
            })
        );
    }

    #[test]
    fn continuation_is_joined_and_bounded() {
        let mut f = frame(HEADERS, END_STREAM, 1, b"ab");
        f.extend(frame(CONTINUATION, 0, 1, b"cd"));
        let split = f.len();
        f.extend(frame(CONTINUATION, END_HEADERS, 1, b"e"));
        assert_eq!(read(&f[..split], &LIMITS), Ok(Read::NeedMore));
        let want = Frame::Headers {
            stream: 1,
            end_stream: true,
            block: b"abcde".to_vec(),
        };
        assert_eq!(read(&f, &LIMITS), Ok(Read::Frame(want, f.len())));
        // Another frame inside the block, or a CONTINUATION of another stream.
        let mut g = frame(HEADERS, 0, 1, b"ab");
        g.extend(frame(DATA, 0, 1, b"x"));
        assert_eq!(read(&g, &LIMITS), Err(FrameError::BadContinuation));
        let mut g = frame(HEADERS, 0, 1, b"ab");
        g.extend(frame(CONTINUATION, END_HEADERS, 3, b"x"));
        assert_eq!(read(&g, &LIMITS), Err(FrameError::BadContinuation));
        assert_eq!(
            read(&frame(CONTINUATION, END_HEADERS, 1, b"x"), &LIMITS),
            Err(FrameError::BadContinuation)
        );
        // An endless run of CONTINUATION frames stops at the bound.
        let mut g = frame(HEADERS, 0, 1, &[0; 600]);
        for _ in 0..3 {
            g.extend(frame(CONTINUATION, 0, 1, &[0; 600]));
        }
        assert_eq!(
            read(&g, &LIMITS),
            Err(FrameError::HeaderBlockTooLarge { max: 1024 })
        );
    }

    #[test]
    fn huge_lengths_and_bad_shapes_are_refused() {
        // A header announcing 16 MiB: refused from the header alone, nothing buffered.
        let huge = [0xff, 0xff, 0xff, DATA, 0, 0, 0, 0, 1];
        assert_eq!(
            read(&huge, &LIMITS),
            Err(FrameError::TooLarge {
                length: 0xff_ffff,
                max: DEFAULT_MAX_FRAME_SIZE
            })
        );
        assert_eq!(
            read(&frame(DATA, 0, 0, b"x"), &LIMITS),
            Err(FrameError::BadStream {
                kind: DATA,
                stream: 0
            })
        );
        assert_eq!(
            read(&frame(SETTINGS, 0, 1, &[]), &LIMITS),
            Err(FrameError::BadStream {
                kind: SETTINGS,
                stream: 1
            })
        );
        assert_eq!(
            read(&frame(SETTINGS, 0, 0, &[0; 5]), &LIMITS),
            Err(FrameError::BadLength {
                kind: SETTINGS,
                length: 5
            })
        );
        assert_eq!(
            read(&frame(SETTINGS, ACK, 0, &[0; 6]), &LIMITS),
            Err(FrameError::BadLength {
                kind: SETTINGS,
                length: 6
            })
        );
        assert_eq!(
            read(&frame(PING, 0, 0, &[0; 7]), &LIMITS),
            Err(FrameError::BadLength {
                kind: PING,
                length: 7
            })
        );
        assert_eq!(
            read(&frame(GOAWAY, 0, 0, &[0; 7]), &LIMITS),
            Err(FrameError::BadLength {
                kind: GOAWAY,
                length: 7
            })
        );
        assert_eq!(
            read(&frame(RST_STREAM, 0, 1, &[0; 3]), &LIMITS),
            Err(FrameError::BadLength {
                kind: RST_STREAM,
                length: 3
            })
        );
        assert_eq!(
            read(&frame(WINDOW_UPDATE, 0, 0, &[0; 4]), &LIMITS),
            Err(FrameError::ZeroWindowIncrement)
        );
        assert_eq!(
            read(&frame(PUSH_PROMISE, 0, 1, &[0; 4]), &LIMITS),
            Err(FrameError::PushPromise)
        );
    }

    #[test]
    fn control_frames_are_typed() {
        let mut s = Vec::new();
        s.extend_from_slice(&SETTINGS_MAX_FRAME_SIZE.to_be_bytes());
        s.extend_from_slice(&32_768u32.to_be_bytes());
        let f = frame(SETTINGS, 0, 0, &s);
        let want = Frame::Settings {
            ack: false,
            params: vec![(SETTINGS_MAX_FRAME_SIZE, 32_768)],
        };
        assert_eq!(read(&f, &LIMITS), Ok(Read::Frame(want, f.len())));
        let f = frame(PING, ACK, 0, b"12345678");
        assert_eq!(
            read(&f, &LIMITS),
            Ok(Read::Frame(
                Frame::Ping {
                    ack: true,
                    data: *b"12345678"
                },
                17
            ))
        );
        let f = frame(GOAWAY, 0, 0, &[0, 0, 0, 5, 0, 0, 0, 2, b'x']);
        let want = Frame::GoAway {
            last_stream: 5,
            code: 2,
            debug: b"x".to_vec(),
        };
        assert_eq!(read(&f, &LIMITS), Ok(Read::Frame(want, f.len())));
        let f = frame(WINDOW_UPDATE, 0, 0, &[0x80, 0, 1, 0]);
        assert_eq!(
            read(&f, &LIMITS),
            Ok(Read::Frame(
                Frame::WindowUpdate {
                    stream: 0,
                    increment: 256
                },
                13
            ))
        );
        let f = frame(0xee, 0, 7, b"whatever");
        assert_eq!(
            read(&f, &LIMITS),
            Ok(Read::Frame(Frame::Ignored { kind: 0xee }, f.len()))
        );
        let f = frame(RST_STREAM, 0, 1, &[0, 0, 0, 8]);
        assert_eq!(
            read(&f, &LIMITS),
            Ok(Read::Frame(Frame::RstStream { stream: 1, code: 8 }, 13))
        );
    }
}
