//! A tenant's verdict changes not yet carried by a snapshot, each with the span of its
//! transition: the spans are the causes of the publish that carries the changes, and stay
//! here, so a snapshot holding its changes until the tenant publishes again holds none.

use std::collections::VecDeque;

use opentelemetry::trace::SpanContext;

use crate::snapshot::{VerdictChange, MAX_CHANGES};

/// The changes noted since the tenant's last snapshot (the latest [`MAX_CHANGES`]).
#[derive(Default)]
pub(super) struct Pending {
    /// Each change with its transition's span, boxed and only when valid (tracing on).
    queue: VecDeque<(VerdictChange, Option<Box<SpanContext>>)>,
}

impl Pending {
    /// Keeps `change`, caused by the transition of `span`, dropping the oldest past
    /// [`MAX_CHANGES`].
    pub(super) fn note(&mut self, change: VerdictChange, span: &SpanContext) {
        if self.queue.len() == MAX_CHANGES {
            self.queue.pop_front();
        }
        let span = span.is_valid().then(|| Box::new(span.clone()));
        self.queue.push_back((change, span));
    }

    /// The changes noted, oldest first and without spare room (the start-up wave would
    /// leave each tenant's snapshot a queue's room for good), and each one's span (the
    /// invalid one where none was kept): emptied.
    pub(super) fn take(&mut self) -> (Vec<VerdictChange>, Vec<SpanContext>) {
        let queue = std::mem::take(&mut self.queue);
        let mut changes = Vec::with_capacity(queue.len());
        let mut causes = Vec::with_capacity(queue.len());
        for (change, span) in queue {
            changes.push(change);
            causes.push(span.map_or(SpanContext::NONE, |s| *s));
        }
        (changes, causes)
    }
}
