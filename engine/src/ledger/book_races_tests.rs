//! An answer and a write that cross: the canary's observation and the sink's write report
//! reach the book by two paths, so an answer given before a write landed may be read after
//! the write's report.

use super::*;

/// A decision drops a live address (a drain); the canary's answer from just before the
/// write landed still holds it and is read after the write's report: that answer is judged
/// by the write then in force, not charged as an address nobody decided. An answer given
/// after the write that still holds it is a stale copy: wrong.
#[test]
fn an_answer_from_before_a_write_is_judged_by_the_write_then_in_force() {
    let mut book = Book::new(Vec::new());
    let mut tenant = plan(&["pdns"]);
    tenant.sinks = vec!["pdns".into()];
    book.plan(vec![tenant], 0);
    let both = [ip(1), ip(2)];
    book.event(&publish(1, &both, 100));
    book.event(&written("pdns", 1, 120));
    assert_eq!(
        served(&book.observed(&seen(&both, None, 200))),
        [(200, Served::Answered, false)]
    );
    book.event(&publish(2, &[ip(2)], 5_000));
    book.event(&written("pdns", 2, 5_020));
    assert!(
        book.observed(&seen(&both, None, 5_015)).is_empty(),
        "answered before the write landed"
    );
    assert!(book.observed(&seen(&[ip(2)], None, 5_040)).is_empty());
    assert_eq!(
        served(&book.observed(&seen(&both, None, 5_100))),
        [(5_100, Served::WrongAddress, false)],
        "answered after the write: a stale copy"
    );
}
