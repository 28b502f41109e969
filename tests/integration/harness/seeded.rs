//! A seeded sequence for generated test scripts, so a failing case is replayed from its seed.

/// xorshift64*.
pub struct SeededRng(pub u64);

impl SeededRng {
    /// The next number below `n` (which must be above 0).
    pub fn below(&mut self, n: u64) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        (self.0.wrapping_mul(0x2545_F491_4F6C_DD1D) >> 33) % n
    }

    /// `items` in an order of the sequence's (Fisher-Yates).
    pub fn shuffle<T>(&mut self, items: &mut [T]) {
        for i in (1..items.len()).rev() {
            items.swap(i, self.below(i as u64 + 1) as usize);
        }
    }
}
