//! The chunked transfer-coding decoder (RFC 9112 §7.1) over byte slices. Pure.
//!
//! It owns chunk-size lines (with extensions, which are ignored), chunk data, the CRLF after each
//! chunk, and the trailer section (tolerated, syntax-checked, discarded). Every line it buffers
//! is bounded by [`MAX_CHUNK_LINE`], every chunk size is checked against the body limit before a
//! byte of it is stored, and it never allocates beyond what has actually arrived.

/// Longest chunk-size line (digits, extensions and CRLF) or trailer line accepted.
pub const MAX_CHUNK_LINE: usize = 4096;
/// Most hex digits accepted in a chunk size (as httparse's `parse_chunk_size`): 16 fill a `u64`.
pub const MAX_CHUNK_DIGITS: usize = 16;

/// Why a chunked body was refused.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ChunkError {
    /// Bad hex, too many digits, a missing CRLF, an over-long line or a malformed trailer.
    Bad,
    /// The decoded body would exceed the body limit.
    BodyTooLarge,
    /// The trailer section exceeds its limit.
    TrailersTooLarge,
}

/// What one [`ChunkedDecoder::feed`] call did.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Decoded {
    /// Input bytes consumed; the caller drops them from its buffer.
    pub consumed: usize,
    /// The terminating chunk and trailer section have been read: the body is complete.
    pub done: bool,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum State {
    /// Expecting a chunk-size line.
    Size,
    /// Inside chunk data, with this many bytes left.
    Data(u64),
    /// Expecting the CRLF that closes chunk data.
    DataEnd,
    /// Inside the trailer section (after the `0` chunk), until an empty line.
    Trailer,
    /// Body complete.
    Done,
}

/// Incremental chunked-body decoder: feed it whatever bytes are buffered, as often as needed.
#[derive(Debug)]
pub struct ChunkedDecoder {
    state: State,
    trailer_bytes: usize,
}

impl Default for ChunkedDecoder {
    fn default() -> Self {
        ChunkedDecoder {
            state: State::Size,
            trailer_bytes: 0,
        }
    }
}

impl ChunkedDecoder {
    /// A decoder at the start of a chunked body.
    pub fn new() -> Self {
        Self::default()
    }

    /// Decodes as much of `buf` as possible, appending chunk data to `body`. `max_body` bounds the
    /// decoded body, `max_trailers` the trailer section (bytes). Consumed bytes are reported even
    /// when the body is not complete yet; after `done` nothing more is consumed.
    pub fn feed(
        &mut self,
        buf: &[u8],
        body: &mut Vec<u8>,
        max_body: usize,
        max_trailers: usize,
    ) -> Result<Decoded, ChunkError> {
        let mut pos = 0;
        loop {
            let rest = buf.get(pos..).unwrap_or_default();
            let more = Decoded {
                consumed: pos,
                done: false,
            };
            match self.state {
                State::Size => {
                    let Some((line, used)) = take_line(rest)? else {
                        return Ok(more);
                    };
                    let size = parse_size(line)?;
                    pos += used;
                    if size == 0 {
                        self.state = State::Trailer;
                    } else {
                        // Checked before anything of the chunk is stored.
                        let total = (body.len() as u64).saturating_add(size);
                        if total > max_body as u64 {
                            return Err(ChunkError::BodyTooLarge);
                        }
                        self.state = State::Data(size);
                    }
                }
                State::Data(left) => {
                    if rest.is_empty() {
                        return Ok(more);
                    }
                    // `take` <= rest.len(), so the conversion and the slice are in range.
                    let take = left.min(rest.len() as u64) as usize;
                    body.extend_from_slice(rest.get(..take).unwrap_or_default());
                    pos += take;
                    let left = left - take as u64;
                    self.state = if left == 0 {
                        State::DataEnd
                    } else {
                        State::Data(left)
                    };
                }
                State::DataEnd => match rest {
                    [b'\r', b'\n', ..] => {
                        pos += 2;
                        self.state = State::Size;
                    }
                    [] | [b'\r'] => return Ok(more),
                    _ => return Err(ChunkError::Bad),
                },
                State::Trailer => {
                    let Some((line, used)) = take_line(rest)? else {
                        return Ok(more);
                    };
                    pos += used;
                    if line.is_empty() {
                        self.state = State::Done;
                        continue;
                    }
                    self.trailer_bytes = self.trailer_bytes.saturating_add(used);
                    if self.trailer_bytes > max_trailers {
                        return Err(ChunkError::TrailersTooLarge);
                    }
                    check_trailer(line)?;
                }
                State::Done => {
                    return Ok(Decoded {
                        consumed: pos,
                        done: true,
                    })
                }
            }
        }
    }
}

/// The next CRLF-terminated line of `rest` (without the CRLF) and its length including the CRLF;
/// `None` if it has not fully arrived. A bare CR or LF, or a line longer than
/// [`MAX_CHUNK_LINE`], is an error.
fn take_line(rest: &[u8]) -> Result<Option<(&[u8], usize)>, ChunkError> {
    let window = rest.get(..MAX_CHUNK_LINE).unwrap_or(rest);
    let Some(lf) = window.iter().position(|&b| b == b'\n') else {
        if window.len() >= MAX_CHUNK_LINE {
            return Err(ChunkError::Bad);
        }
        // A CR that is not the line's last byte so far can never become part of a CRLF.
        let cr_inside = window
            .iter()
            .take(window.len().saturating_sub(1))
            .any(|&b| b == b'\r');
        return if cr_inside {
            Err(ChunkError::Bad)
        } else {
            Ok(None)
        };
    };
    let line = match window.get(..lf) {
        Some([line @ .., b'\r']) => line,
        _ => return Err(ChunkError::Bad),
    };
    if line.contains(&b'\r') {
        return Err(ChunkError::Bad);
    }
    Ok(Some((line, lf + 1)))
}

/// `chunk-size [BWS ";" chunk-ext]`: 1 to 16 hex digits, extensions ignored.
fn parse_size(line: &[u8]) -> Result<u64, ChunkError> {
    let digits = line.iter().take_while(|b| b.is_ascii_hexdigit()).count();
    if digits == 0 || digits > MAX_CHUNK_DIGITS {
        return Err(ChunkError::Bad);
    }
    let mut size: u64 = 0;
    for &b in line.iter().take(digits) {
        // At most 16 hex digits: the shift never overflows a u64.
        let d = (b as char).to_digit(16).ok_or(ChunkError::Bad)?;
        size = (size << 4) | u64::from(d);
    }
    let after = line.get(digits..).unwrap_or_default();
    let after = match after.iter().position(|&b| b != b' ' && b != b'\t') {
        Some(i) => after.get(i..).unwrap_or_default(),
        None => &[],
    };
    match after.first() {
        None | Some(b';') => Ok(size),
        Some(_) => Err(ChunkError::Bad),
    }
}

/// A trailer line must look like a field line: `token ":" value`.
fn check_trailer(line: &[u8]) -> Result<(), ChunkError> {
    let colon = line
        .iter()
        .position(|&b| b == b':')
        .ok_or(ChunkError::Bad)?;
    let name = line.get(..colon).unwrap_or_default();
    if name.is_empty() || !name.iter().all(|&b| super::token::is_tchar(b)) {
        return Err(ChunkError::Bad);
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn decode(input: &[u8], max_body: usize) -> Result<(Vec<u8>, Decoded), ChunkError> {
        let mut body = Vec::new();
        let d = ChunkedDecoder::new().feed(input, &mut body, max_body, 1024)?;
        Ok((body, d))
    }

    #[test]
    fn size_lines() {
        let cases: &[(&[u8], Result<u64, ChunkError>)] = &[
            (b"0", Ok(0)),
            (b"1a", Ok(26)),
            (b"1A;name=value", Ok(26)),
            (b"5 ; ext", Ok(5)),
            (b"ffffffffffffffff", Ok(u64::MAX)),
            (b"0000000000000001", Ok(1)),
            (b"00000000000000001", Err(ChunkError::Bad)),
            (b"", Err(ChunkError::Bad)),
            (b";ext", Err(ChunkError::Bad)),
            (b"x", Err(ChunkError::Bad)),
            (b"5x", Err(ChunkError::Bad)),
            (b"5 6", Err(ChunkError::Bad)),
            (b"-5", Err(ChunkError::Bad)),
            (b"+5", Err(ChunkError::Bad)),
        ];
        for (line, want) in cases {
            assert_eq!(
                parse_size(line),
                *want,
                "{:?}",
                String::from_utf8_lossy(line)
            );
        }
    }

    #[test]
    fn bodies() {
        type Want = Result<(&'static [u8], usize, bool), ChunkError>;
        let cases: &[(&[u8], Want)] = &[
            (b"5\r\nhello\r\n0\r\n\r\n", Ok((b"hello", 15, true))),
            (
                b"5\r\nhello\r\n0\r\nX-T: 1\r\n\r\nGET",
                Ok((b"hello", 23, true)),
            ),
            (b"5\r\nhel", Ok((b"hel", 6, false))),
            (b"5\r\nhello\r", Ok((b"hello", 8, false))),
            (b"5\r\nhelloXY", Err(ChunkError::Bad)),
            (b"5\nhello\r\n0\r\n\r\n", Err(ChunkError::Bad)),
            (b"5\r\nhello\n0\r\n\r\n", Err(ChunkError::Bad)),
            (b"5\r\rhello", Err(ChunkError::Bad)),
            (b"0\r\nnot a field\r\n\r\n", Err(ChunkError::Bad)),
            (b"11\r\n", Err(ChunkError::BodyTooLarge)),
            (b"ffffffffffffffff\r\n", Err(ChunkError::BodyTooLarge)),
            (b"8\r\n12345678\r\n9\r\n", Err(ChunkError::BodyTooLarge)),
        ];
        for (input, want) in cases {
            let got = decode(input, 16).map(|(b, d)| (b, d.consumed, d.done));
            let want = want.map(|(b, c, d)| (b.to_vec(), c, d));
            assert_eq!(got, want, "{:?}", String::from_utf8_lossy(input));
        }
    }

    #[test]
    fn long_lines_are_refused_without_waiting_for_lf() {
        let mut line = b"1;".to_vec();
        line.resize(MAX_CHUNK_LINE - 1, b'x');
        assert!(matches!(decode(&line, 16), Ok((_, d)) if !d.done && d.consumed == 0));
        line.push(b'x');
        assert_eq!(decode(&line, 16), Err(ChunkError::Bad));
    }

    #[test]
    fn trailer_section_is_bounded() {
        let mut input = b"0\r\n".to_vec();
        for _ in 0..100 {
            input.extend_from_slice(b"X-Trailer: some value\r\n");
        }
        assert_eq!(decode(&input, 16), Err(ChunkError::TrailersTooLarge));
    }
}
