//! RFC 9110 tokens (§5.6.2): the bytes a method, a header name or a trailer name may hold.
//! Pure. The request reader, the chunked decoder's trailers and response framing all check
//! names against this one table.

/// RFC 9110 `tchar`: the bytes of a token (method, header name).
pub(crate) fn is_tchar(b: u8) -> bool {
    b.is_ascii_alphanumeric() || b"!#$%&'*+-.^_`|~".contains(&b)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tchar_is_the_rfc_9110_set() {
        // tchar = "!" / "#" / "$" / "%" / "&" / "'" / "*" / "+" / "-" / "." / "^" / "_" / "`" /
        //         "|" / "~" / DIGIT / ALPHA
        let want: Vec<u8> = (b'0'..=b'9')
            .chain(b'A'..=b'Z')
            .chain(b'a'..=b'z')
            .chain(*b"!#$%&'*+-.^_`|~")
            .collect();
        for b in 0..=u8::MAX {
            assert_eq!(is_tchar(b), want.contains(&b), "byte {b:#04x}");
        }
    }
}
