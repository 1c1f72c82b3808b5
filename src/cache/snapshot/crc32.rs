//! CRC-32/IEEE, the checksum of zip, gzip and PNG (reflected polynomial `0xEDB88320`, initial
//! value and final XOR `0xFFFFFFFF`; "123456789" → `0xCBF43926`). Table-driven, one byte per
//! step, the table built at compile time. Incremental, so that a snapshot is checksummed while
//! it streams out.

/// The 256 remainders of one byte, computed at compile time.
const TABLE: [u32; 256] = table();

const fn table() -> [u32; 256] {
    let mut table = [0u32; 256];
    let mut i = 0;
    while i < 256 {
        let mut c = i as u32;
        let mut bit = 0;
        while bit < 8 {
            c = if c & 1 == 1 {
                0xEDB8_8320 ^ (c >> 1)
            } else {
                c >> 1
            };
            bit += 1;
        }
        table[i] = c;
        i += 1;
    }
    table
}

/// A running CRC-32.
#[derive(Clone, Copy, Debug)]
pub(super) struct Crc32(u32);

impl Crc32 {
    /// The CRC of no bytes yet.
    pub(super) fn new() -> Self {
        Crc32(0xFFFF_FFFF)
    }

    /// Feeds `bytes`.
    pub(super) fn update(&mut self, bytes: &[u8]) {
        let mut c = self.0;
        for &b in bytes {
            // The low byte of the state selects the table entry (any u8 is in range).
            c = TABLE[usize::from((c as u8) ^ b)] ^ (c >> 8);
        }
        self.0 = c;
    }

    /// The CRC of every byte fed.
    pub(super) fn finish(self) -> u32 {
        !self.0
    }
}

/// The CRC-32 of `bytes`.
pub(super) fn checksum(bytes: &[u8]) -> u32 {
    let mut crc = Crc32::new();
    crc.update(bytes);
    crc.finish()
}
