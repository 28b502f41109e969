//! `[ring]`: a member's whole state arrives in pieces of bounded size, each applied as it
//! comes (so a member joining a ring of 100,000 targets never holds, parses or applies a
//! state of all of them at once). What a whole state says beyond its verdicts (every
//! target it does not list has no verdict of that member any more) is kept here while it
//! arrives: one bit a target per member listing, dropped when its last piece is applied.

use super::super::index::TargetIx;

/// The targets each member listing its whole state has listed so far.
#[derive(Default)]
pub(super) struct Listings(Vec<(u16, Vec<u64>)>);

impl Listings {
    /// `member` starts listing its whole state over `targets` targets (a listing it left
    /// unfinished, its connection lost, is forgotten).
    pub(super) fn begin(&mut self, member: u16, targets: usize) {
        self.forget(member);
        self.0.push((member, vec![0; targets.div_ceil(64)]));
    }

    /// `member` listed `target`.
    pub(super) fn mark(&mut self, member: u16, target: TargetIx) {
        if let Some((_, bits)) = self.0.iter_mut().find(|(m, _)| *m == member) {
            if let Some(word) = bits.get_mut(target.0 / 64) {
                *word |= 1 << (target.0 % 64);
            }
        }
    }

    /// `member` finished its listing: whether it listed each target, or `None` when no
    /// listing of it is under way (it began before a reload renumbered the targets).
    pub(super) fn finish(&mut self, member: u16) -> Option<Listed> {
        let at = self.0.iter().position(|(m, _)| *m == member)?;
        Some(Listed(self.0.swap_remove(at).1))
    }

    /// `member`'s listing under way, if any, is void (it left the ring).
    pub(super) fn forget(&mut self, member: u16) {
        self.0.retain(|(m, _)| *m != member);
    }

    /// Every listing under way is void: a reload renumbered the targets.
    pub(super) fn clear(&mut self) {
        self.0.clear();
    }
}

/// The targets a finished listing named.
pub(super) struct Listed(Vec<u64>);

impl Listed {
    /// Whether the listing named `target`.
    pub(super) fn has(&self, target: TargetIx) -> bool {
        self.0
            .get(target.0 / 64)
            .is_some_and(|word| word & (1 << (target.0 % 64)) != 0)
    }
}
