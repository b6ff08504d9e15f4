//! A small seeded xorshift generator for the tool's and the harness's workloads and
//! nemeses: variety that a seed repeats, not quality (never for anything secret).

/// Xorshift64 state; seed it with an odd, non-zero value.
#[derive(Debug, Clone)]
pub struct Rng(pub u64);

impl Rng {
    /// The next value below `n` (0 when `n` is 0).
    pub fn below(&mut self, n: u64) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0 % n.max(1)
    }
}
