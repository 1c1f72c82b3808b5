//! HPACK (RFC 7541): the decoder of the header blocks a server sends — prefixed integers, string
//! literals (plain or Huffman), the static table and a bounded dynamic table with its size
//! updates and eviction — and the one encoding a request needs: literals without indexing, no
//! Huffman.

use std::collections::VecDeque;

use super::huffman;

/// One decoded header field.
pub type Field = (Vec<u8>, Vec<u8>);

/// Why a header block was refused.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum HpackError {
    /// The block ended inside a field.
    Truncated,
    /// A prefixed integer larger than any size this decoder accepts.
    IntegerOverflow,
    /// An index of 0, or past the static and dynamic tables.
    BadIndex(u64),
    /// A bad Huffman string.
    Huffman(huffman::HuffmanError),
    /// A dynamic table size update above the size we allow the server.
    TableSizeOverBound { size: u64, bound: usize },
    /// A dynamic table size update after the block's first field.
    LateTableSizeUpdate,
    /// The decoded fields are larger than the header list bound.
    ListTooLarge { bound: usize },
}

impl std::fmt::Display for HpackError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            HpackError::Truncated => f.write_str("header block truncated"),
            HpackError::IntegerOverflow => f.write_str("header block integer too large"),
            HpackError::BadIndex(i) => write!(f, "header table index {i} out of range"),
            HpackError::Huffman(e) => e.fmt(f),
            HpackError::TableSizeOverBound { size, bound } => {
                write!(
                    f,
                    "dynamic table size update to {size} octets over the allowed {bound}"
                )
            }
            HpackError::LateTableSizeUpdate => {
                f.write_str("dynamic table size update after a header field")
            }
            HpackError::ListTooLarge { bound } => {
                write!(f, "header list larger than {bound} octets")
            }
        }
    }
}

/// The largest integer accepted: every size and index this decoder deals with is far below it.
const MAX_INT: u64 = u32::MAX as u64;

/// An entry's size in the dynamic table (§4.1): its octets plus 32.
const ENTRY_OVERHEAD: usize = 32;

/// Reads a prefixed integer (§5.1) at `*pos` with an `n`-bit prefix, advancing `*pos`.
pub fn decode_int(buf: &[u8], pos: &mut usize, n: u8) -> Result<u64, HpackError> {
    let first = *buf.get(*pos).ok_or(HpackError::Truncated)?;
    *pos += 1;
    let max_prefix = (1u64 << n) - 1;
    let mut value = u64::from(first) & max_prefix;
    if value < max_prefix {
        return Ok(value);
    }
    let mut shift = 0u32;
    loop {
        let b = *buf.get(*pos).ok_or(HpackError::Truncated)?;
        *pos += 1;
        // Past 35 bits of continuation the value is over MAX_INT whatever follows.
        if shift > 28 {
            return Err(HpackError::IntegerOverflow);
        }
        value += u64::from(b & 0x7f) << shift;
        if value > MAX_INT {
            return Err(HpackError::IntegerOverflow);
        }
        if b & 0x80 == 0 {
            return Ok(value);
        }
        shift += 7;
    }
}

/// Writes a prefixed integer (§5.1): `flags` holds the bits above the `n`-bit prefix.
pub fn encode_int(out: &mut Vec<u8>, flags: u8, n: u8, value: u64) {
    let max_prefix = (1u64 << n) - 1;
    if value < max_prefix {
        out.push(flags | value as u8);
        return;
    }
    out.push(flags | max_prefix as u8);
    let mut rest = value - max_prefix;
    while rest >= 0x80 {
        out.push((rest as u8 & 0x7f) | 0x80);
        rest >>= 7;
    }
    out.push(rest as u8);
}

/// Reads a string literal (§5.2) at `*pos`, Huffman-decoded when its H bit is set.
fn decode_string(buf: &[u8], pos: &mut usize) -> Result<Vec<u8>, HpackError> {
    let huffman_coded = buf.get(*pos).ok_or(HpackError::Truncated)? & 0x80 != 0;
    let len = decode_int(buf, pos, 7)?;
    let end = usize::try_from(len)
        .ok()
        .and_then(|l| pos.checked_add(l))
        .ok_or(HpackError::Truncated)?;
    let raw = buf.get(*pos..end).ok_or(HpackError::Truncated)?;
    *pos = end;
    if huffman_coded {
        let mut out = Vec::with_capacity(raw.len() * 8 / 5 + 1);
        huffman::decode(raw, &mut out).map_err(HpackError::Huffman)?;
        Ok(out)
    } else {
        Ok(raw.to_vec())
    }
}

/// Writes a literal header field without indexing with a literal name (§6.2.2), no Huffman.
pub fn encode_literal(out: &mut Vec<u8>, name: &[u8], value: &[u8]) {
    out.push(0x00);
    encode_int(out, 0x00, 7, name.len() as u64);
    out.extend_from_slice(name);
    encode_int(out, 0x00, 7, value.len() as u64);
    out.extend_from_slice(value);
}

/// The decoder's state for one connection: the dynamic table (newest first) and its bounds.
#[derive(Debug)]
pub struct Decoder {
    table: VecDeque<Field>,
    /// The table's size in octets (§4.1).
    size: usize,
    /// Its current maximum, as the server's last size update set it.
    max_size: usize,
    /// The most the server may set it to: our SETTINGS_HEADER_TABLE_SIZE.
    bound: usize,
}

impl Decoder {
    /// A decoder whose dynamic table may grow to `bound` octets (our SETTINGS_HEADER_TABLE_SIZE).
    pub fn new(bound: usize) -> Decoder {
        Decoder {
            table: VecDeque::new(),
            size: 0,
            max_size: bound,
            bound,
        }
    }

    /// The dynamic table's size in octets.
    pub fn table_size(&self) -> usize {
        self.size
    }

    fn evict_to(&mut self, max: usize) {
        while self.size > max {
            match self.table.pop_back() {
                Some((n, v)) => self.size -= n.len() + v.len() + ENTRY_OVERHEAD,
                None => break,
            }
        }
    }

    fn insert(&mut self, name: Vec<u8>, value: Vec<u8>) {
        let entry = name.len() + value.len() + ENTRY_OVERHEAD;
        // §4.4: an entry larger than the table empties it and is not added.
        self.evict_to(self.max_size.saturating_sub(entry));
        if entry <= self.max_size {
            self.size += entry;
            self.table.push_front((name, value));
        }
    }

    fn lookup(&self, index: u64) -> Result<Field, HpackError> {
        let i = usize::try_from(index).map_err(|_| HpackError::BadIndex(index))?;
        if i == 0 {
            return Err(HpackError::BadIndex(index));
        }
        if let Some((n, v)) = STATIC.get(i - 1) {
            return Ok((n.as_bytes().to_vec(), v.as_bytes().to_vec()));
        }
        self.table
            .get(i - 1 - STATIC.len())
            .cloned()
            .ok_or(HpackError::BadIndex(index))
    }

    /// Decodes one complete header block; `list_bound` bounds the decoded fields' total size
    /// (each counted as name + value + 32, like SETTINGS_MAX_HEADER_LIST_SIZE). The dynamic
    /// table keeps the changes of every field decoded before an error; after an error the
    /// connection must be dropped (§2.2: the table is out of step with the server's).
    pub fn decode(&mut self, block: &[u8], list_bound: usize) -> Result<Vec<Field>, HpackError> {
        let mut fields = Vec::new();
        let mut list_size = 0usize;
        let mut pos = 0;
        while pos < block.len() {
            let b = block[pos];
            let field = if b & 0x80 != 0 {
                let index = decode_int(block, &mut pos, 7)?;
                self.lookup(index)?
            } else if b & 0xc0 == 0x40 {
                let field = self.literal(block, &mut pos, 6)?;
                self.insert(field.0.clone(), field.1.clone());
                field
            } else if b & 0xe0 == 0x20 {
                if !fields.is_empty() {
                    return Err(HpackError::LateTableSizeUpdate);
                }
                let size = decode_int(block, &mut pos, 5)?;
                let max = usize::try_from(size).ok().filter(|&s| s <= self.bound);
                let max = max.ok_or(HpackError::TableSizeOverBound {
                    size,
                    bound: self.bound,
                })?;
                self.max_size = max;
                self.evict_to(max);
                continue;
            } else {
                // 0000xxxx without indexing, 0001xxxx never indexed: the same to a decoder.
                self.literal(block, &mut pos, 4)?
            };
            list_size += field.0.len() + field.1.len() + ENTRY_OVERHEAD;
            if list_size > list_bound {
                return Err(HpackError::ListTooLarge { bound: list_bound });
            }
            fields.push(field);
        }
        Ok(fields)
    }

    /// A literal field (§6.2): an indexed name (`n`-bit prefix, 0 = a literal name), a value.
    fn literal(&self, block: &[u8], pos: &mut usize, n: u8) -> Result<Field, HpackError> {
        let index = decode_int(block, pos, n)?;
        let name = if index == 0 {
            decode_string(block, pos)?
        } else {
            self.lookup(index)?.0
        };
        let value = decode_string(block, pos)?;
        Ok((name, value))
    }
}

/// RFC 7541 Appendix A: the static table, index 1 first.
pub(super) const STATIC: [(&str, &str); 61] = [
    (":authority", ""),
    (":method", "GET"),
    (":method", "POST"),
    (":path", "/"),
    (":path", "/index.html"),
    (":scheme", "http"),
    (":scheme", "https"),
    (":status", "200"),
    (":status", "204"),
    (":status", "206"),
    (":status", "304"),
    (":status", "400"),
    (":status", "404"),
    (":status", "500"),
    ("accept-charset", ""),
    ("accept-encoding", "gzip, deflate"),
    ("accept-language", ""),
    ("accept-ranges", ""),
    ("accept", ""),
    ("access-control-allow-origin", ""),
    ("age", ""),
    ("allow", ""),
    ("authorization", ""),
    ("cache-control", ""),
    ("content-disposition", ""),
    ("content-encoding", ""),
    ("content-language", ""),
    ("content-length", ""),
    ("content-location", ""),
    ("content-range", ""),
    ("content-type", ""),
    ("cookie", ""),
    ("date", ""),
    ("etag", ""),
    ("expect", ""),
    ("expires", ""),
    ("from", ""),
    ("host", ""),
    ("if-match", ""),
    ("if-modified-since", ""),
    ("if-none-match", ""),
    ("if-range", ""),
    ("if-unmodified-since", ""),
    ("last-modified", ""),
    ("link", ""),
    ("location", ""),
    ("max-forwards", ""),
    ("proxy-authenticate", ""),
    ("proxy-authorization", ""),
    ("range", ""),
    ("referer", ""),
    ("refresh", ""),
    ("retry-after", ""),
    ("server", ""),
    ("set-cookie", ""),
    ("strict-transport-security", ""),
    ("transfer-encoding", ""),
    ("user-agent", ""),
    ("vary", ""),
    ("via", ""),
    ("www-authenticate", ""),
];

#[cfg(test)]
mod tests {
    use super::*;

    fn hex(s: &str) -> Vec<u8> {
        let s: String = s.split_whitespace().collect();
        (0..s.len())
            .step_by(2)
            .map(|i| u8::from_str_radix(&s[i..i + 2], 16).unwrap())
            .collect()
    }

    fn text(fields: &[Field]) -> Vec<(String, String)> {
        fields
            .iter()
            .map(|(n, v)| {
                (
                    String::from_utf8_lossy(n).into_owned(),
                    String::from_utf8_lossy(v).into_owned(),
                )
            })
            .collect()
    }

    #[test]
    fn integers_round_trip_and_match_the_rfc() {
        // C.1.1-C.1.3: 10 in a 5-bit prefix, 1337 in a 5-bit prefix, 42 in an 8-bit prefix.
        let mut out = Vec::new();
        encode_int(&mut out, 0, 5, 1337);
        assert_eq!(out, [0x1f, 0x9a, 0x0a]);
        let mut pos = 0;
        assert_eq!(decode_int(&out, &mut pos, 5), Ok(1337));
        assert_eq!(pos, 3);
        for (n, v) in [
            (5u8, 10u64),
            (8, 42),
            (7, 127),
            (4, 15),
            (6, 1 << 20),
            (7, MAX_INT),
        ] {
            let mut out = Vec::new();
            encode_int(&mut out, 0, n, v);
            let mut pos = 0;
            assert_eq!(decode_int(&out, &mut pos, n), Ok(v));
            assert_eq!(pos, out.len());
        }
    }

    #[test]
    fn integers_that_overflow_or_end_early_are_refused() {
        let mut pos = 0;
        assert_eq!(
            decode_int(&[0x1f, 0xff, 0xff], &mut pos, 5),
            Err(HpackError::Truncated)
        );
        let mut pos = 0;
        assert_eq!(
            decode_int(&[0x7f, 0xff, 0xff, 0xff, 0xff, 0x7f], &mut pos, 7),
            Err(HpackError::IntegerOverflow)
        );
        // Endless continuation octets (a huge length): refused after a few, not looped over.
        let mut huge = vec![0x7f];
        huge.extend(std::iter::repeat_n(0x80, 1000));
        let mut pos = 0;
        assert_eq!(
            decode_int(&huge, &mut pos, 7),
            Err(HpackError::IntegerOverflow)
        );
        assert!(pos < 10);
        let mut pos = 0;
        assert_eq!(decode_int(&[], &mut pos, 7), Err(HpackError::Truncated));
    }

    #[test]
    fn decodes_the_rfc_response_examples_with_huffman_and_eviction() {
        // C.6: three responses with Huffman coding and a 256-octet table.
        let mut d = Decoder::new(256);
        let r1 = hex(
            "4882 6402 5885 aec3 771a 4b61 96d0 7abe 9410 54d4 44a8 2005 9504 0b81 66e0 82a6
             2d1b ff6e 919d 29ad 1718 63c7 8f0b 97c8 e9ae 82ae 43d3",
        );
        let f = d.decode(&r1, 1 << 16).unwrap();
        assert_eq!(
            text(&f),
            [
                (":status".into(), "302".into()),
                ("cache-control".into(), "private".into()),
                ("date".into(), "Mon, 21 Oct 2013 20:13:21 GMT".into()),
                ("location".into(), "https://www.example.com".into()),
            ]
        );
        assert_eq!(d.table_size(), 222);
        let r2 = hex("4883 640e ffc1 c0bf");
        let f = d.decode(&r2, 1 << 16).unwrap();
        assert_eq!(f[0], (b":status".to_vec(), b"307".to_vec()));
        assert_eq!(
            f[3],
            (b"location".to_vec(), b"https://www.example.com".to_vec())
        );
        assert_eq!(d.table_size(), 222);
        let r3 = hex(
            "88c1 6196 d07a be94 1054 d444 a820 0595 040b 8166 e084 a62d 1bff c05a 839b d9ab
             77ad 94e7 821d d7f2 e6c7 b335 dfdf cd5b 3960 d5af 2708 7f36 72c1 ab27 0fb5 291f
             9587 3160 65c0 03ed 4ee5 b106 3d50 07",
        );
        let f = d.decode(&r3, 1 << 16).unwrap();
        assert_eq!(f[0], (b":status".to_vec(), b"200".to_vec()));
        assert_eq!(f[5].0, b"set-cookie");
        assert_eq!(
            f[5].1,
            b"foo=ASDJKHQKBZXOQWEOPIUAXQWEOIU; max-age=3600; version=1"
        );
        assert_eq!(d.table_size(), 215);
    }

    #[test]
    fn size_updates_are_bounded_and_evict() {
        let mut d = Decoder::new(256);
        // Literal with incremental indexing "custom-key: custom-header" (C.2.1): 55 octets.
        let add = hex("400a 6375 7374 6f6d 2d6b 6579 0d63 7573 746f 6d2d 6865 6164 6572");
        d.decode(&add, 1 << 16).unwrap();
        assert_eq!(d.table_size(), 55);
        // A size update to 0 evicts it; index 62 is then out of range.
        assert_eq!(d.decode(&[0x20], 1 << 16).unwrap(), []);
        assert_eq!(d.table_size(), 0);
        assert_eq!(d.decode(&[0xbe], 1 << 16), Err(HpackError::BadIndex(62)));
        // A size update over our bound (4096 > 256) is refused.
        let mut over = Vec::new();
        encode_int(&mut over, 0x20, 5, 4096);
        assert_eq!(
            d.decode(&over, 1 << 16),
            Err(HpackError::TableSizeOverBound {
                size: 4096,
                bound: 256
            })
        );
        // A size update after a field is refused.
        assert_eq!(
            d.decode(&[0x82, 0x20], 1 << 16),
            Err(HpackError::LateTableSizeUpdate)
        );
    }

    #[test]
    fn bad_input_is_refused() {
        let mut d = Decoder::new(4096);
        assert_eq!(d.decode(&[0x80], 1 << 16), Err(HpackError::BadIndex(0)));
        // A literal whose value length runs past the block.
        assert_eq!(
            d.decode(&[0x00, 0x01, b'a', 0x7f, 0x00], 1 << 16),
            Err(HpackError::Truncated)
        );
        // A Huffman value with bad padding ('a' then zero bits).
        assert_eq!(
            d.decode(&[0x00, 0x01, b'a', 0x81, 0b0001_1000], 1 << 16),
            Err(HpackError::Huffman(huffman::HuffmanError::BadPadding))
        );
        // The header list bound.
        let mut big = Vec::new();
        encode_literal(&mut big, b"x", &[b'y'; 100]);
        assert_eq!(
            d.decode(&big, 100),
            Err(HpackError::ListTooLarge { bound: 100 })
        );
    }

    #[test]
    fn literals_we_encode_decode() {
        let mut block = Vec::new();
        encode_literal(
            &mut block,
            b":path",
            b"/runtime.v1.RuntimeService/ListPodSandbox",
        );
        encode_literal(&mut block, b"te", &[b't'; 200]);
        let f = Decoder::new(0).decode(&block, 1 << 16).unwrap();
        assert_eq!(
            f[0],
            (
                b":path".to_vec(),
                b"/runtime.v1.RuntimeService/ListPodSandbox".to_vec()
            )
        );
        assert_eq!(f[1].1.len(), 200);
    }
}
