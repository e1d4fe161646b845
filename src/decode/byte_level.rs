//! The byte-level BPE alphabet, shared by the token environment (which reads the
//! vocabulary's token strings back to bytes) and the hand split of forced text (which
//! writes bytes in it for the tokenizer's BPE).

use std::collections::HashMap;

/// The GPT-2 byte-level alphabet, inverted: the character a byte-level BPE
/// vocabulary writes for each byte, mapped back to that byte.
///
/// Printable Latin-1 bytes stand for themselves; the other 68 bytes are shifted to
/// code points from U+0100 upwards, in byte order (GPT-2's `bytes_to_unicode`).
pub fn byte_level_decoder() -> HashMap<char, u8> {
    let self_mapped = |b: u8| matches!(b, b'!'..=b'~' | 0xA1..=0xAC | 0xAE..=0xFF);
    let mut map = HashMap::with_capacity(256);
    let mut shifted = 0x100u32;
    for byte in 0..=255u8 {
        if self_mapped(byte) {
            map.insert(char::from(byte), byte);
        } else {
            // 0x100 + at most 68 stays far below the surrogate range: always a char.
            if let Some(c) = char::from_u32(shifted) {
                map.insert(c, byte);
            }
            shifted += 1;
        }
    }
    map
}
