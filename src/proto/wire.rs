//! Protobuf wire-format primitives: varints, field tags, length-delimited fields.

/// Wire type of a varint field (int32, int64, bool, enum).
pub const VARINT: u8 = 0;
/// Wire type of a length-delimited field (string, bytes, message, map entry).
pub const LEN: u8 = 2;

/// Appends `v` as a base-128 varint (least significant group first), a byte at a time (not
/// through `memcpy`, which musl starts slowly).
pub fn put_varint(buf: &mut Vec<u8>, mut v: u64) {
    while v >= 0x80 {
        buf.push((v & 0x7f) as u8 | 0x80);
        v >>= 7;
    }
    buf.push(v as u8);
}

/// Writes `v` as a varint at the start of `out`; returns its length.
fn write_varint(out: &mut [u8; 10], mut v: u64) -> usize {
    let mut n = 0;
    while v >= 0x80 {
        out[n] = (v & 0x7f) as u8 | 0x80;
        v >>= 7;
        n += 1;
    }
    out[n] = v as u8;
    n + 1
}

/// How many bytes [`put_varint`] writes for `v` (1..=10).
pub fn varint_len(v: u64) -> usize {
    (64 - (v | 1).leading_zeros() as usize).div_ceil(7)
}

/// Appends the key of field `number` with wire type `wire` (`number << 3 | wire`).
pub fn put_tag(buf: &mut Vec<u8>, number: u32, wire: u8) {
    put_varint(buf, (u64::from(number) << 3) | u64::from(wire));
}

/// Appends a length-delimited field: its tag, the length of `bytes`, then `bytes`.
pub fn put_bytes(buf: &mut Vec<u8>, number: u32, bytes: &[u8]) {
    put_tag(buf, number, LEN);
    put_varint(buf, bytes.len() as u64);
    append(buf, bytes);
}

/// `buf.extend_from_slice(bytes)` in copies of a fixed size, which the compiler inlines: an
/// object's message is mostly short strings, and musl's `memcpy` (what the static builds link)
/// costs more to start than such a string takes to copy. A long one goes to `memcpy`.
fn append(buf: &mut Vec<u8>, bytes: &[u8]) {
    if bytes.len() >= 64 {
        buf.extend_from_slice(bytes);
        return;
    }
    buf.reserve(bytes.len());
    let mut rest = bytes;
    while let Some((chunk, tail)) = rest.split_first_chunk::<8>() {
        buf.extend_from_slice(chunk);
        rest = tail;
    }
    if let Some((chunk, tail)) = rest.split_first_chunk::<4>() {
        buf.extend_from_slice(chunk);
        rest = tail;
    }
    buf.extend(rest.iter().copied());
}

/// Appends a varint field.
pub fn put_varint_field(buf: &mut Vec<u8>, number: u32, v: u64) {
    put_tag(buf, number, VARINT);
    put_varint(buf, v);
}

/// Appends a length-delimited field whose content `write` appends to `buf` itself: one byte is
/// reserved for the length and widened afterwards if the content is 128 bytes or more.
pub fn put_nested(buf: &mut Vec<u8>, number: u32, write: impl FnOnce(&mut Vec<u8>)) {
    put_tag(buf, number, LEN);
    let at = buf.len();
    buf.push(0);
    write(buf);
    let len = buf.len() - at - 1;
    if len < 0x80 {
        buf[at] = len as u8; // fits the reserved byte: the common case, no move
        return;
    }
    let mut varint = [0u8; 10];
    let n = write_varint(&mut varint, len as u64);
    buf.splice(at..at + 1, varint[..n].iter().copied());
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn varints() {
        for (v, bytes) in [
            (0u64, &[0x00][..]),
            (1, &[0x01]),
            (127, &[0x7f]),
            (128, &[0x80, 0x01]),
            (300, &[0xac, 0x02]),
            (
                u64::MAX,
                &[0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x01],
            ),
        ] {
            let mut buf = Vec::new();
            put_varint(&mut buf, v);
            assert_eq!(buf, bytes, "{v}");
            assert_eq!(varint_len(v), bytes.len(), "{v}");
        }
        // Go's uint64(int32(-1)): sign-extended to ten bytes.
        let mut buf = Vec::new();
        put_varint(&mut buf, -1i32 as i64 as u64);
        assert_eq!(buf.len(), 10);
    }

    #[test]
    fn bytes_fields_of_every_short_length_and_a_long_one() {
        let data: Vec<u8> = (0..=200u8).collect();
        for n in (0..=80).chain([200]) {
            let mut buf = vec![0xaa];
            put_bytes(&mut buf, 3, &data[..n]);
            let mut want = vec![0xaa, 0x1a];
            put_varint(&mut want, n as u64);
            want.extend_from_slice(&data[..n]);
            assert_eq!(buf, want, "{n}");
        }
    }

    #[test]
    fn nested_lengths_widen() {
        for n in [0usize, 1, 127, 128, 300, 20_000] {
            let mut buf = vec![0xaa];
            put_nested(&mut buf, 2, |b| b.extend(std::iter::repeat_n(7u8, n)));
            let mut want = vec![0xaa, 0x12];
            put_varint(&mut want, n as u64);
            want.extend(std::iter::repeat_n(7u8, n));
            assert_eq!(buf, want, "{n}");
        }
    }
}
