//! SHA-256 whose running state can be saved in a checkpoint and restored ([`Sha256State`]), so
//! hashing a large input resumes where it stopped instead of hashing its prefix again.
//!
//! The `sha2` crate keeps its hasher's state private; what a checkpoint needs of it is small:
//! the eight words of the chaining value, the length hashed so far, and the bytes of an
//! unfinished 64-byte block. This hasher keeps exactly those, in the open, and runs the
//! standard padding (FIPS 180-4, 5.1.1) itself; the compression of the blocks is `sha2`'s own
//! ([`sha2::compress256`], the crate's optimised code, fed whole runs of blocks by the block
//! buffer `sha2` itself uses). The result is the SHA-256 `sha256sum` prints, however the input
//! was split across calls, saves and restores (tested against `sha2` on random inputs and
//! split points).

use serde::{Deserialize, Serialize};
use sha2::digest::block_buffer::{BlockBuffer, Eager};
use sha2::digest::generic_array::GenericArray;
use sha2::digest::typenum::U64;

/// SHA-256's initial chaining value (FIPS 180-4, 5.3.3).
const INITIAL: [u32; 8] = [
    0x6a09_e667,
    0xbb67_ae85,
    0x3c6e_f372,
    0xa54f_f53a,
    0x510e_527f,
    0x9b05_688c,
    0x1f83_d9ab,
    0x5be0_cd19,
];
/// Bytes per block.
const BLOCK: usize = 64;

/// A SHA-256 computation in progress.
#[derive(Debug, Clone)]
pub struct Sha256 {
    chain: [u32; 8],
    /// Bytes hashed so far (the unfinished block included).
    length: u64,
    /// The unfinished block (fewer than 64 bytes; full ones are compressed at once).
    pending: BlockBuffer<U64, Eager>,
}

impl Default for Sha256 {
    fn default() -> Self {
        Self::new()
    }
}

/// The saved state of a [`Sha256`]: what a checkpoint holds (a hundred bytes or so of JSON).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Sha256State {
    /// The chaining value, 64 lowercase hex digits (eight big-endian words).
    pub chain: String,
    /// Bytes hashed so far.
    pub length: u64,
    /// The bytes of the unfinished block, lowercase hex (fewer than 64 bytes).
    pub pending: String,
}

/// A saved state that no SHA-256 computation can be in.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("failed to restore a SHA-256 state: {0}")]
pub struct Sha256StateError(&'static str);

fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

fn unhex(text: &str) -> Option<Vec<u8>> {
    if text.len() % 2 != 0 {
        return None;
    }
    (0..text.len() / 2)
        .map(|i| text.get(2 * i..2 * i + 2).and_then(|h| u8::from_str_radix(h, 16).ok()))
        .collect()
}

impl Sha256 {
    /// A computation over no bytes yet.
    pub fn new() -> Self {
        Sha256 { chain: INITIAL, length: 0, pending: BlockBuffer::default() }
    }

    /// Bytes hashed so far.
    pub fn length(&self) -> u64 {
        self.length
    }

    /// Hashes `data` after what was hashed before.
    pub fn update(&mut self, data: &[u8]) {
        self.length = self.length.wrapping_add(data.len() as u64);
        let chain = &mut self.chain;
        self.pending.digest_blocks(data, |blocks| sha2::compress256(chain, blocks));
    }

    /// The digest: the padding (a 1 bit, zeros, the length in bits) hashed after the input.
    pub fn finalize(mut self) -> [u8; 32] {
        let bits = self.length.wrapping_mul(8);
        let pending = self.pending.get_data();
        let mut tail = [0u8; 2 * BLOCK];
        tail[..pending.len()].copy_from_slice(pending);
        tail[pending.len()] = 0x80;
        // The length goes in the last 8 bytes of one block, or of a second when it does not fit.
        let end = if pending.len() + 1 + 8 <= BLOCK { BLOCK } else { 2 * BLOCK };
        tail[end - 8..end].copy_from_slice(&bits.to_be_bytes());
        for block in tail[..end].chunks_exact(BLOCK) {
            sha2::compress256(
                &mut self.chain,
                std::slice::from_ref(GenericArray::from_slice(block)),
            );
        }
        let mut out = [0u8; 32];
        for (word, bytes) in self.chain.iter().zip(out.chunks_exact_mut(4)) {
            bytes.copy_from_slice(&word.to_be_bytes());
        }
        out
    }

    /// The state to save.
    pub fn state(&self) -> Sha256State {
        let chain: Vec<u8> = self.chain.iter().flat_map(|w| w.to_be_bytes()).collect();
        Sha256State {
            chain: hex(&chain),
            length: self.length,
            pending: hex(self.pending.get_data()),
        }
    }

    /// The computation a saved state was taken of. A state no computation can be in (bad hex,
    /// a chaining value of the wrong size, an unfinished block that is not the length's
    /// remainder) is refused.
    pub fn from_state(state: &Sha256State) -> Result<Self, Sha256StateError> {
        let chain = unhex(&state.chain).ok_or(Sha256StateError("the chaining value is no hex"))?;
        if chain.len() != 32 {
            return Err(Sha256StateError("the chaining value is not 32 bytes"));
        }
        let pending =
            unhex(&state.pending).ok_or(Sha256StateError("the pending bytes are no hex"))?;
        if pending.len() >= BLOCK || pending.len() as u64 != state.length % BLOCK as u64 {
            return Err(Sha256StateError("the pending bytes do not match the length"));
        }
        let mut restored = Sha256::new();
        for (word, bytes) in restored.chain.iter_mut().zip(chain.chunks_exact(4)) {
            *word = u32::from_be_bytes([bytes[0], bytes[1], bytes[2], bytes[3]]);
        }
        restored.pending = BlockBuffer::new(&pending);
        restored.length = state.length;
        Ok(restored)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use sha2::Digest;

    fn reference(data: &[u8]) -> [u8; 32] {
        sha2::Sha256::digest(data).into()
    }

    /// xorshift64*, seeded: reproducible random bytes and split points.
    struct Draw(u64);

    impl Draw {
        fn next(&mut self) -> u64 {
            self.0 ^= self.0 >> 12;
            self.0 ^= self.0 << 25;
            self.0 ^= self.0 >> 27;
            self.0.wrapping_mul(0x2545_f491_4f6c_dd1d)
        }

        fn below(&mut self, n: usize) -> usize {
            (self.next() % n.max(1) as u64) as usize
        }
    }

    #[test]
    fn known_answers() {
        let cases: [(&[u8], &str); 3] = [
            (b"", "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855"),
            (b"abc", "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad"),
            (
                b"abcdbcdecdefdefgefghfghighijhijkijkljklmklmnlmnomnopnopq",
                "248d6a61d20638b8e5c026930c3e6039a33ce45964ff2167f6ecedd419db06c1",
            ),
        ];
        for (input, want) in cases {
            let mut h = Sha256::new();
            h.update(input);
            assert_eq!(hex(&h.finalize()), want);
        }
    }

    #[test]
    fn every_length_around_the_block_and_padding_boundaries_matches_sha2() {
        let data: Vec<u8> = (0..300u32).map(|i| (i * 7 + 3) as u8).collect();
        for len in 0..data.len() {
            let mut h = Sha256::new();
            h.update(&data[..len]);
            assert_eq!(h.finalize(), reference(&data[..len]), "length {len}");
        }
    }

    #[test]
    fn random_inputs_split_saved_and_restored_anywhere_match_sha2() {
        let mut draw = Draw(0x5eed_1234_abcd_0001);
        for round in 0..200 {
            let len = match round % 4 {
                0 => draw.below(130),
                1 => draw.below(4096),
                _ => draw.below(200_000),
            };
            let data: Vec<u8> = (0..len).map(|_| draw.next() as u8).collect();
            let mut h = Sha256::new();
            let mut at = 0;
            while at < len {
                let step = 1 + draw.below((len - at).min(70_000));
                h.update(&data[at..at + step]);
                at += step;
                if draw.below(3) == 0 {
                    // Through the checkpoint's form: JSON and back.
                    let text = serde_json::to_string(&h.state()).unwrap();
                    let state: Sha256State = serde_json::from_str(&text).unwrap();
                    h = Sha256::from_state(&state).unwrap();
                }
                assert_eq!(h.length(), at as u64);
            }
            assert_eq!(h.finalize(), reference(&data), "round {round}, length {len}");
        }
    }

    #[test]
    fn a_state_no_computation_can_be_in_is_refused() {
        let mut h = Sha256::new();
        h.update(b"hello, world");
        let good = h.state();
        assert_eq!(Sha256::from_state(&good).unwrap().state(), good);
        let bad = [
            Sha256State { chain: "zz".repeat(32), ..good.clone() },
            Sha256State { chain: "00".repeat(31), ..good.clone() },
            Sha256State { length: 13, ..good.clone() },
            Sha256State { pending: "0".into(), ..good.clone() },
            Sha256State { pending: "00".repeat(64), length: 64, ..good.clone() },
        ];
        for state in bad {
            assert!(Sha256::from_state(&state).is_err(), "{state:?}");
        }
    }
}
