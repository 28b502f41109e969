//! The classic Prometheus text format (0.0.4), made from the OpenMetrics exposition, for
//! scrapers that do not ask for OpenMetrics: in the classic format a counter's `HELP` and
//! `TYPE` name its samples (`x_total`), there is no `# EOF`, `# UNIT` or `_created`, and no
//! exemplars. Served unless the request's `Accept` names `application/openmetrics-text`
//! (Prometheus does), so a parser of either format reads every type and help text.

use std::collections::BTreeSet;

/// The content type of [`to_classic`]'s output.
pub const CLASSIC_CONTENT_TYPE: &str = "text/plain; version=0.0.4; charset=utf-8";

/// The content type of the OpenMetrics exposition.
pub const OPENMETRICS_CONTENT_TYPE: &str =
    "application/openmetrics-text; version=1.0.0; charset=utf-8";

/// `openmetrics` (an OpenMetrics text exposition) in the classic text format.
pub fn to_classic(openmetrics: &str) -> String {
    let counters: BTreeSet<&str> = openmetrics
        .lines()
        .filter_map(|l| l.strip_prefix("# TYPE "))
        .filter_map(|rest| rest.strip_suffix(" counter"))
        .collect();
    let mut out = String::with_capacity(openmetrics.len());
    for line in openmetrics.lines() {
        let classic = if let Some(rest) = line.strip_prefix("# HELP ") {
            Some(format!("# HELP {}", counter_name(rest, &counters)))
        } else if let Some(rest) = line.strip_prefix("# TYPE ") {
            Some(format!("# TYPE {}", counter_name(rest, &counters)))
        } else if line.starts_with("# EOF")
            || line.starts_with("# UNIT ")
            || is_created_sample(line, &counters)
        {
            None
        } else {
            // A sample, without its exemplar (` # {...} value`).
            Some(line.split(" # ").next().unwrap_or(line).to_owned())
        };
        if let Some(l) = classic {
            out.push_str(&l);
            out.push('\n');
        }
    }
    out
}

/// Whether `line` is a counter's `_created` sample, which the classic format does not have.
fn is_created_sample(line: &str, counters: &BTreeSet<&str>) -> bool {
    counters.iter().any(|c| {
        line.strip_prefix(c)
            .is_some_and(|s| s.starts_with("_created"))
    })
}

/// `rest` of a HELP or TYPE line (`name ...`), with a counter's name given its `_total`.
fn counter_name(rest: &str, counters: &BTreeSet<&str>) -> String {
    let (name, tail) = rest.split_once(' ').unwrap_or((rest, ""));
    if counters.contains(name) {
        format!("{name}_total {tail}")
    } else {
        rest.to_owned()
    }
}

/// Whether an `Accept` header value asks for OpenMetrics.
pub fn wants_openmetrics(accept: &str) -> bool {
    accept.contains("application/openmetrics-text")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn counters_are_named_by_their_samples_and_openmetrics_markers_go() {
        let om = "# HELP x_probes Probes.\n# TYPE x_probes counter\nx_probes_total{result=\"ok\"} 3\nx_probes_created 1.7e9\n# HELP x_up Up.\n# TYPE x_up gauge\n# UNIT x_up ratio\nx_up 1 # {trace_id=\"a\"} 1.0\n# EOF\n";
        assert_eq!(
            to_classic(om),
            "# HELP x_probes_total Probes.\n# TYPE x_probes_total counter\nx_probes_total{result=\"ok\"} 3\n# HELP x_up Up.\n# TYPE x_up gauge\nx_up 1\n"
        );
    }

    #[test]
    fn prometheus_asks_for_openmetrics_curl_does_not() {
        assert!(wants_openmetrics(
            "application/openmetrics-text;version=1.0.0,application/openmetrics-text;version=0.0.1;q=0.75,text/plain;version=0.0.4;q=0.5,*/*;q=0.1"
        ));
        assert!(!wants_openmetrics("*/*"));
        assert!(!wants_openmetrics("text/plain"));
    }
}
