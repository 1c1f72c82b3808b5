//! Reading protobuf's wire format (varints, tags, length-delimited fields), the counterpart of
//! [`super::wire`]'s writers (the container runtime's CRI answers are protobuf). Every read is bounded by its buffer; a
//! truncated field, an overlong varint or a group is an error, never a panic.

/// Why a protobuf message was refused.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum PbError {
    /// The buffer ended inside a field.
    Truncated,
    /// A varint longer than ten octets or over 64 bits.
    BadVarint,
    /// A wire type this reader does not accept (groups, or 6 and 7).
    BadWireType(u8),
    /// A field number of 0.
    BadFieldNumber,
    /// A string field that is not UTF-8.
    NotUtf8 { field: u32 },
}

impl std::fmt::Display for PbError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            PbError::Truncated => f.write_str("protobuf message truncated"),
            PbError::BadVarint => f.write_str("protobuf varint too long"),
            PbError::BadWireType(w) => write!(f, "protobuf wire type {w} not accepted"),
            PbError::BadFieldNumber => f.write_str("protobuf field number 0"),
            PbError::NotUtf8 { field } => write!(f, "protobuf string field {field} is not UTF-8"),
        }
    }
}

/// One field's value.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Value<'a> {
    Varint(u64),
    /// Wire types 1 and 5 (fixed64, fixed32): read and skipped by the CRI decoder.
    Fixed(u64),
    Bytes(&'a [u8]),
}

/// Reads a varint at `*pos`.
pub fn varint(buf: &[u8], pos: &mut usize) -> Result<u64, PbError> {
    let mut v: u64 = 0;
    for i in 0..10 {
        let b = *buf.get(*pos).ok_or(PbError::Truncated)?;
        *pos += 1;
        // The tenth octet holds bit 63 only.
        if i == 9 && b > 1 {
            return Err(PbError::BadVarint);
        }
        v |= u64::from(b & 0x7f) << (7 * i);
        if b & 0x80 == 0 {
            return Ok(v);
        }
    }
    Err(PbError::BadVarint)
}

/// The fields of a message, in wire order.
pub struct Fields<'a> {
    buf: &'a [u8],
    pos: usize,
}

/// Iterates over the fields of `buf`; the iteration stops at the first error.
pub fn fields(buf: &[u8]) -> Fields<'_> {
    Fields { buf, pos: 0 }
}

impl<'a> Fields<'a> {
    fn field(&mut self) -> Result<(u32, Value<'a>), PbError> {
        let key = varint(self.buf, &mut self.pos)?;
        let number = u32::try_from(key >> 3).map_err(|_| PbError::BadFieldNumber)?;
        if number == 0 {
            return Err(PbError::BadFieldNumber);
        }
        let fixed = |this: &mut Self, n: usize| -> Result<Value<'a>, PbError> {
            let b = this
                .buf
                .get(this.pos..this.pos + n)
                .ok_or(PbError::Truncated)?;
            this.pos += n;
            Ok(Value::Fixed(
                b.iter()
                    .rev()
                    .fold(0u64, |acc, &x| (acc << 8) | u64::from(x)),
            ))
        };
        let value = match (key & 7) as u8 {
            0 => Value::Varint(varint(self.buf, &mut self.pos)?),
            1 => fixed(self, 8)?,
            2 => {
                let len = varint(self.buf, &mut self.pos)?;
                let end = usize::try_from(len)
                    .ok()
                    .and_then(|l| self.pos.checked_add(l))
                    .ok_or(PbError::Truncated)?;
                let b = self.buf.get(self.pos..end).ok_or(PbError::Truncated)?;
                self.pos = end;
                Value::Bytes(b)
            }
            5 => fixed(self, 4)?,
            w => return Err(PbError::BadWireType(w)),
        };
        Ok((number, value))
    }
}

impl<'a> Iterator for Fields<'a> {
    type Item = Result<(u32, Value<'a>), PbError>;

    fn next(&mut self) -> Option<Self::Item> {
        if self.pos >= self.buf.len() {
            return None;
        }
        let item = self.field();
        if item.is_err() {
            self.pos = self.buf.len();
        }
        Some(item)
    }
}

/// A string field's value.
pub fn string(field: u32, b: &[u8]) -> Result<String, PbError> {
    String::from_utf8(b.to_vec()).map_err(|_| PbError::NotUtf8 { field })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::proto::wire;

    #[test]
    fn reads_what_the_writers_write() {
        let mut buf = Vec::new();
        wire::put_varint_field(&mut buf, 1, u64::MAX);
        wire::put_bytes(&mut buf, 2, b"abc");
        wire::put_varint_field(&mut buf, 536_870_911, 7);
        buf.extend_from_slice(&[0x1d, 1, 0, 0, 0]); // field 3, fixed32 1
        let got: Vec<_> = fields(&buf).collect::<Result<_, _>>().unwrap();
        assert_eq!(
            got,
            [
                (1, Value::Varint(u64::MAX)),
                (2, Value::Bytes(b"abc")),
                (536_870_911, Value::Varint(7)),
                (3, Value::Fixed(1))
            ]
        );
    }

    #[test]
    fn bad_input_is_refused() {
        let first = |b: &[u8]| fields(b).next().unwrap().map(|(n, _)| n);
        assert_eq!(first(&[0x08]), Err(PbError::Truncated));
        assert_eq!(first(&[0x12, 0x05, b'a']), Err(PbError::Truncated));
        assert_eq!(
            first(&[0x12, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x01]),
            Err(PbError::Truncated)
        );
        assert_eq!(
            first(&[0x08, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x02]),
            Err(PbError::BadVarint)
        );
        assert_eq!(first(&[0x0b]), Err(PbError::BadWireType(3)));
        assert_eq!(first(&[0x00, 0x00]), Err(PbError::BadFieldNumber));
        assert_eq!(string(4, &[0xff]), Err(PbError::NotUtf8 { field: 4 }));
        // After an error the iteration ends.
        let mut it = fields(&[0x0b, 0x08, 0x01]);
        assert!(it.next().unwrap().is_err());
        assert!(it.next().is_none());
    }
}
