//! A protobuf watch stream (`application/vnd.kubernetes.protobuf;stream=watch`) read as the JSON
//! watch lines the apiserver would have sent: [`ProtoWatch`] wraps the response body and is the
//! line source the reflector reads, so everything after it (the line bound, the event decoding,
//! the refusal checks, bookmarks, `ERROR` events) is the JSON path's.
//!
//! Each frame is a 4-byte big-endian length and a `metav1.WatchEvent`
//! ([`envelope::decode_frame`]); it becomes one line, [`envelope::event_json`] and a `\n`.
//! A frame is held only until its line is read, and no frame longer than the bound (the
//! reflector's line cap) is held: such a frame's first [`OVERSIZED_PREFIX_BYTES`] are read to
//! name its object, and it becomes a line as long as the frame whose first bytes are the event's
//! type and the object's name, namespace and resourceVersion, the rest blanks passed through as
//! the frame's bytes arrive; the reflector then treats it as it treats a JSON line over its cap
//! (the object is skipped for its size and the stream goes on). A frame that cannot be decoded
//! (not the apiserver's, or of a kind grid-wrapper does not cache) is a read error carrying an
//! [`UndecodableFrame`], which the reflector treats as an undecodable JSON line. Unknown fields
//! of an object are skipped and reported ([`crate::proto::unknown::note_upstream`]). A stream
//! that ends inside a frame ends there (as a JSON stream cut inside a line). Pure: generic over
//! the reader, no I/O of its own.

use crate::k8s::{ObjectKey, Resource};
use crate::proto::{envelope, unknown};
use crate::upstream::decode::event_ref_from_prefix;
use crate::upstream::list_split::OVERSIZED_PREFIX_BYTES;
use crate::upstream::proto_list::event_ref_from_proto_prefix;
use std::fmt;
use std::io::{self, BufRead, Read};

/// Blanks handed out for an oversized frame's bytes.
const BLANKS: [u8; 4096] = [b' '; 4096];

/// Why a protobuf watch frame could not be made a line (the error inside the read error).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct UndecodableFrame(pub String);

impl fmt::Display for UndecodableFrame {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "undecodable protobuf watch frame: {}", self.0)
    }
}

impl std::error::Error for UndecodableFrame {}

/// Whether a read error of a watch stream is an [`UndecodableFrame`].
pub fn undecodable(e: &io::Error) -> Option<&UndecodableFrame> {
    e.get_ref()?.downcast_ref::<UndecodableFrame>()
}

fn undecodable_error(why: impl fmt::Display) -> io::Error {
    io::Error::new(
        io::ErrorKind::InvalidData,
        UndecodableFrame(why.to_string()),
    )
}

/// The resource whose objects are of `kind` in `api_version`.
pub fn resource_of(api_version: &str, kind: &str) -> Option<Resource> {
    Resource::ALL
        .iter()
        .copied()
        .find(|r| r.api_version() == api_version && r.kind() == kind)
}

/// A protobuf watch stream as JSON lines; see the module docs.
pub struct ProtoWatch<R> {
    inner: R,
    /// The longest frame decoded (the reflector's line cap).
    limit: usize,
    /// The current frame (its length first), as far as it has come.
    frame: Vec<u8>,
    /// The current line, and how much of it was read.
    line: Vec<u8>,
    pos: usize,
    /// Bytes of an oversized frame still to pass as blanks, then its `\n`.
    skip: u64,
    newline: bool,
}

impl<R> fmt::Debug for ProtoWatch<R> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("ProtoWatch")
            .field("limit", &self.limit)
            .field("skip", &self.skip)
            .finish()
    }
}

impl<R: BufRead> ProtoWatch<R> {
    /// The frames of `inner` as lines; a frame longer than `limit` is not held (see the module
    /// docs).
    pub fn new(inner: R, limit: usize) -> Self {
        ProtoWatch {
            inner,
            limit,
            frame: Vec::new(),
            line: Vec::new(),
            pos: 0,
            skip: 0,
            newline: false,
        }
    }

    /// Reads the current frame up to `want` bytes; false when the stream ends first.
    fn fill_frame(&mut self, want: usize) -> io::Result<bool> {
        while self.frame.len() < want {
            let avail = self.inner.fill_buf()?;
            if avail.is_empty() {
                return Ok(false);
            }
            let n = avail.len().min(want - self.frame.len());
            self.frame
                .extend_from_slice(avail.get(..n).unwrap_or_default());
            self.inner.consume(n);
        }
        Ok(true)
    }

    /// The next frame made the current line; false at the end of the stream.
    fn next_frame(&mut self) -> io::Result<bool> {
        if !self.fill_frame(4)? {
            return Ok(false);
        }
        let Some(head) = self.frame.first_chunk::<4>() else {
            return Ok(false);
        };
        let len = u32::from_be_bytes(*head) as usize;
        if len > self.limit {
            let prefix = len.min(OVERSIZED_PREFIX_BYTES);
            if !self.fill_frame(4 + prefix)? {
                return Ok(false);
            }
            self.oversized(len, prefix);
        } else {
            if !self.fill_frame(4 + len)? {
                return Ok(false);
            }
            self.decoded()?;
        }
        self.frame.clear();
        if self.frame.capacity() > 64 * 1024 {
            self.frame = Vec::new(); // do not keep the largest frame's buffer
        }
        Ok(true)
    }

    /// The current frame, whole and within the bound, as its JSON line.
    fn decoded(&mut self) -> io::Result<()> {
        let (event, _) = match envelope::decode_frame(&self.frame, self.limit) {
            Ok(Some(e)) => e,
            Ok(None) => return Err(undecodable_error("frame cut short")),
            Err(e) => return Err(undecodable_error(e)),
        };
        let obj = &event.object;
        let res = match resource_of(obj.api_version, obj.kind) {
            Some(r) => r,
            // A Status is decoded as such whatever the resource (an ERROR event's).
            None if obj.kind == "Status" => Resource::Services,
            None => {
                return Err(undecodable_error(format_args!(
                    "an object of kind {:?} of {:?}: not a kind grid-wrapper caches",
                    obj.kind, obj.api_version
                )))
            }
        };
        let decoded = envelope::event_json(res, &event).map_err(undecodable_error)?;
        if !decoded.unknown.is_empty() {
            let (_, r) = event_ref_from_prefix(&decoded.json);
            let key = ObjectKey::new(
                r.namespace.as_deref().unwrap_or_default(),
                r.name.as_deref().unwrap_or_default(),
            );
            unknown::note_upstream(res, &key, &decoded.unknown);
        }
        self.line = decoded.json;
        self.line.push(b'\n');
        self.pos = 0;
        Ok(())
    }

    /// The current frame is over the bound and `prefix` of its `len` bytes are in: a line as
    /// long, naming its object, the rest of the frame passed as blanks.
    fn oversized(&mut self, len: usize, prefix: usize) {
        let (kind, r) = event_ref_from_proto_prefix(self.frame.get(4..).unwrap_or_default());
        let quote = |s: &str| serde_json::to_string(s).unwrap_or_default();
        let mut meta = Vec::new();
        for (key, v) in [
            ("name", &r.name),
            ("namespace", &r.namespace),
            ("resourceVersion", &r.resource_version),
        ] {
            if let Some(v) = v {
                meta.push(format!("{}:{}", quote(key), quote(v)));
            }
        }
        let mut line = String::from("{");
        if let Some(k) = &kind {
            line.push_str(&format!("\"type\":{},", quote(k)));
        }
        line.push_str(&format!(
            "\"object\":{{\"metadata\":{{{}}}}}}}",
            meta.join(",")
        ));
        let mut line = line.into_bytes();
        line.resize(line.len().max(prefix), b' ');
        self.line = line;
        self.pos = 0;
        self.skip = (len - prefix) as u64;
        self.newline = true;
    }
}

impl<R: BufRead> BufRead for ProtoWatch<R> {
    fn fill_buf(&mut self) -> io::Result<&[u8]> {
        loop {
            if self.pos < self.line.len() {
                return Ok(self.line.get(self.pos..).unwrap_or_default());
            }
            if self.skip > 0 {
                let avail = self.inner.fill_buf()?.len();
                if avail == 0 {
                    // The stream ended inside the frame: so does the line.
                    self.skip = 0;
                    self.newline = false;
                    return Ok(&[]);
                }
                let n = avail
                    .min(BLANKS.len())
                    .min(usize::try_from(self.skip).unwrap_or(usize::MAX));
                return Ok(BLANKS.get(..n).unwrap_or_default());
            }
            if std::mem::take(&mut self.newline) {
                self.line = b"\n".to_vec();
                self.pos = 0;
                continue;
            }
            if !self.next_frame()? {
                return Ok(&[]);
            }
        }
    }

    fn consume(&mut self, amt: usize) {
        if self.pos < self.line.len() {
            self.pos = self.pos.saturating_add(amt).min(self.line.len());
        } else if self.skip > 0 {
            let n = amt.min(usize::try_from(self.skip).unwrap_or(usize::MAX));
            self.inner.consume(n);
            self.skip -= n as u64;
        }
    }
}

impl<R: BufRead> Read for ProtoWatch<R> {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        let avail = self.fill_buf()?;
        let n = avail.len().min(buf.len());
        if let (Some(dst), Some(src)) = (buf.get_mut(..n), avail.get(..n)) {
            dst.copy_from_slice(src);
        }
        self.consume(n);
        Ok(n)
    }
}

#[cfg(test)]
#[path = "proto_watch_tests.rs"]
mod tests;
