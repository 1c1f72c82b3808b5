//! A connection's unsent bytes: a queue of segments (owned or shared), written with vectored
//! I/O so list bodies and watch frames go out without copying served objects.

use std::collections::VecDeque;
use std::io::{self, IoSlice, Write};

use crate::api::wire::Segment;

/// Most segments handed to one `write_vectored` call: Linux's `IOV_MAX` (a list body is two
/// segments per item, so even a large LIST takes only a few calls).
const MAX_IOVECS: usize = 1024;
/// Segments gathered on the stack rather than in a vector allocated per call.
const SMALL_IOVECS: usize = 48;

/// Unsent response bytes of one connection.
#[derive(Debug, Default)]
pub struct Outbound {
    segments: VecDeque<Segment>,
    /// Bytes of the front segment already written.
    offset: usize,
    /// Unsent bytes in total.
    len: usize,
}

impl Outbound {
    /// Queues owned bytes.
    pub fn push_owned(&mut self, bytes: Vec<u8>) {
        if !bytes.is_empty() {
            self.len += bytes.len();
            self.segments.push_back(Segment::Owned(bytes));
        }
    }

    /// Queues a segment.
    pub fn push(&mut self, seg: Segment) {
        let n = seg.as_bytes().len();
        if n > 0 {
            self.len += n;
            self.segments.push_back(seg);
        }
    }

    /// Queues segments in order (a watch event's three, [`crate::api::wire::EventChunk`]).
    pub fn push_all(&mut self, segs: impl IntoIterator<Item = Segment>) {
        for seg in segs {
            self.push(seg);
        }
    }

    /// Unsent bytes.
    pub fn len(&self) -> usize {
        self.len
    }

    /// Whether everything was written.
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// Writes as much as `w` accepts. `Ok(())` when everything went out or the socket would
    /// block; other errors are returned.
    pub fn write_to<W: Write>(&mut self, w: &mut W) -> io::Result<()> {
        while self.len > 0 {
            // A watch stream's few events per round fit the array on the stack; a list body's
            // many segments take one vector per call, up to IOV_MAX of them.
            let mut small = [IoSlice::new(&[]); SMALL_IOVECS];
            let mut large: Vec<IoSlice<'_>> = Vec::new();
            let count = self.segments.len().min(MAX_IOVECS);
            let slices: &mut [IoSlice<'_>] = if count <= SMALL_IOVECS {
                &mut small[..count]
            } else {
                large.resize(count, IoSlice::new(&[]));
                &mut large
            };
            for (i, (slot, seg)) in slices.iter_mut().zip(&self.segments).enumerate() {
                let bytes = seg.as_bytes();
                let start = if i == 0 {
                    self.offset.min(bytes.len())
                } else {
                    0
                };
                *slot = IoSlice::new(&bytes[start..]);
            }
            match w.write_vectored(slices) {
                Ok(0) => return Err(io::ErrorKind::WriteZero.into()),
                Ok(n) => self.advance(n),
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => return Ok(()),
                Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
                Err(e) => return Err(e),
            }
        }
        Ok(())
    }

    fn advance(&mut self, mut n: usize) {
        self.len -= n.min(self.len);
        while n > 0 {
            let Some(front) = self.segments.front() else {
                break;
            };
            let left = front.as_bytes().len() - self.offset;
            if n >= left {
                n -= left;
                self.offset = 0;
                self.segments.pop_front();
            } else {
                self.offset += n;
                n = 0;
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::Arc;

    /// A writer that accepts at most `cap` bytes per call and `budget` in total.
    struct Trickle {
        out: Vec<u8>,
        cap: usize,
        budget: usize,
    }

    impl Write for Trickle {
        fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
            if self.budget == 0 {
                return Err(io::ErrorKind::WouldBlock.into());
            }
            let n = buf.len().min(self.cap).min(self.budget);
            self.out.extend_from_slice(&buf[..n]);
            self.budget -= n;
            Ok(n)
        }
        fn flush(&mut self) -> io::Result<()> {
            Ok(())
        }
    }

    #[test]
    fn segments_pushed_together_keep_their_order_and_skip_empty_ones() {
        let mut o = Outbound::default();
        o.push_all([
            Segment::Owned(b"a".to_vec()),
            Segment::Static(b""),
            Segment::Shared(Arc::from(&b"b"[..])),
            Segment::Owned(Vec::new()),
            Segment::Static(b"c"),
        ]);
        assert_eq!((o.len(), o.segments.len()), (3, 3));
        let mut w = Vec::new();
        o.write_to(&mut w).unwrap_or(());
        assert_eq!(w, b"abc");
        assert!(o.is_empty());
    }

    #[test]
    fn partial_writes_resume_where_they_stopped() {
        let mut o = Outbound::default();
        o.push_owned(b"hello ".to_vec());
        o.push(Segment::Shared(Arc::from(&b"shared "[..])));
        o.push_owned(Vec::new());
        o.push_owned(b"world".to_vec());
        assert_eq!(o.len(), 18);
        let mut w = Trickle {
            out: Vec::new(),
            cap: 4,
            budget: 7,
        };
        o.write_to(&mut w).unwrap_or(());
        assert_eq!(w.out, b"hello s");
        assert_eq!(o.len(), 11);
        w.budget = 100;
        o.write_to(&mut w).unwrap_or(());
        assert_eq!(w.out, b"hello shared world");
        assert!(o.is_empty());
    }
}
