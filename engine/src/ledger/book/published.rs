//! A tenant's last published sets, kept for sink writes that report an older sequence
//! number: each set a bitmap over the addresses the tenant published lately, not a copy of
//! its addresses. Consecutive sets differ by an address or two, and [`PUBLISHED_KEPT`]
//! copies of a tenant's set were most of the ledger (32 × 17 bytes an address).

use std::collections::{HashMap, HashSet, VecDeque};
use std::net::IpAddr;
use std::sync::Arc;

use super::PUBLISHED_KEPT;

/// The sets, oldest first.
#[derive(Default)]
pub(super) struct Published {
    /// Every address a kept set holds, in the order first published (and, until the next
    /// compaction, a few that no kept set holds any more). Handed out whole as the set of a
    /// sequence number that holds all of them (a tenant's one set after a start), so a
    /// sink's write shares it.
    addresses: Arc<[IpAddr]>,
    /// Each kept set: its sequence number and its bitmap (bit `i`: `addresses[i]`; words
    /// past its end are zero).
    sets: VecDeque<(u64, Box<[u64]>)>,
}

impl Published {
    /// Whether no set was published yet.
    pub(super) fn is_empty(&self) -> bool {
        self.sets.is_empty()
    }

    /// Keeps `addresses`, published as `seq`, dropping the oldest set once
    /// [`PUBLISHED_KEPT`] are kept.
    pub(super) fn push(&mut self, seq: u64, addresses: &[IpAddr]) {
        if self.sets.len() == PUBLISHED_KEPT {
            self.sets.pop_front();
        }
        let mut index: HashMap<IpAddr, usize> = (self.addresses.iter().enumerate())
            .map(|(i, a)| (*a, i))
            .collect();
        let mut new = Vec::new();
        let mut bits = Vec::new();
        for a in addresses {
            let i = *index.entry(*a).or_insert_with(|| {
                new.push(*a);
                self.addresses.len() + new.len() - 1
            });
            set_bit(&mut bits, i);
        }
        if !new.is_empty() {
            self.addresses = self.addresses.iter().chain(&new).copied().collect();
        }
        self.sets.push_back((seq, bits.into_boxed_slice()));
        self.compact();
    }

    /// Drops the addresses no kept set holds once they are half of them.
    fn compact(&mut self) {
        let held: Vec<usize> = (0..self.addresses.len())
            .filter(|&i| self.sets.iter().any(|(_, bits)| has_bit(bits, i)))
            .collect();
        if held.len() * 2 >= self.addresses.len() {
            return;
        }
        for (_, bits) in &mut self.sets {
            let mut kept = Vec::new();
            for (to, &from) in held.iter().enumerate() {
                if has_bit(bits, from) {
                    set_bit(&mut kept, to);
                }
            }
            *bits = kept.into_boxed_slice();
        }
        self.addresses = held.iter().map(|&i| self.addresses[i]).collect();
    }

    /// The addresses a kept set of sequence number `from` or later holds: one pass over
    /// the kept sets, then each address a lookup (a tenant's whole set is asked about at
    /// every write its sinks report).
    pub(super) fn held_since(&self, from: u64) -> HashSet<IpAddr> {
        let mut union = vec![0u64; self.addresses.len().div_ceil(64)];
        for (_, bits) in self.sets.iter().filter(|(seq, _)| *seq >= from) {
            for (word, set) in union.iter_mut().zip(bits.iter()) {
                *word |= set;
            }
        }
        (self.addresses.iter().enumerate())
            .filter(|(i, _)| has_bit(&union, *i))
            .map(|(_, a)| *a)
            .collect()
    }

    /// The addresses of the (oldest kept) set published as `seq`, in the order first
    /// published.
    pub(super) fn set(&self, seq: u64) -> Option<Arc<[IpAddr]>> {
        let (_, bits) = self.sets.iter().find(|(s, _)| *s == seq)?;
        if (0..self.addresses.len()).all(|i| has_bit(bits, i)) {
            return Some(self.addresses.clone());
        }
        Some(
            (self.addresses.iter().enumerate())
                .filter(|(i, _)| has_bit(bits, *i))
                .map(|(_, a)| *a)
                .collect(),
        )
    }

    /// Bytes it holds on the heap.
    #[cfg(test)]
    pub(super) fn own_bytes(&self) -> usize {
        std::mem::size_of_val(&*self.addresses)
            + self.sets.capacity() * std::mem::size_of::<(u64, Box<[u64]>)>()
            + (self.sets.iter())
                .map(|(_, bits)| std::mem::size_of_val(&**bits))
                .sum::<usize>()
    }
}

fn set_bit(bits: &mut Vec<u64>, i: usize) {
    if bits.len() <= i / 64 {
        bits.resize(i / 64 + 1, 0);
    }
    bits[i / 64] |= 1 << (i % 64);
}

fn has_bit(bits: &[u64], i: usize) -> bool {
    bits.get(i / 64).is_some_and(|w| w & (1 << (i % 64)) != 0)
}

#[cfg(test)]
#[path = "published_tests.rs"]
mod tests;
