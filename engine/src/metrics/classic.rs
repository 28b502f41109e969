//! The classic Prometheus text format (0.0.4), made from the OpenMetrics exposition, for
//! scrapers that do not ask for OpenMetrics: in the classic format a counter's `HELP` and
//! `TYPE` name its samples (`x_total`), there is no `# EOF`, `# UNIT` or `_created`, and no
//! exemplars. Served unless the request's `Accept` names `application/openmetrics-text`
//! (Prometheus does), so a parser of either format reads every type and help text.

use std::collections::BTreeSet;
use std::fmt::Write;

/// The content type of the classic format.
pub const CLASSIC_CONTENT_TYPE: &str = "text/plain; version=0.0.4; charset=utf-8";

/// The content type of the OpenMetrics exposition.
pub const OPENMETRICS_CONTENT_TYPE: &str =
    "application/openmetrics-text; version=1.0.0; charset=utf-8";

/// `openmetrics` (an OpenMetrics text exposition) in the classic text format, whole.
#[cfg(test)]
fn to_classic(openmetrics: &str) -> String {
    let mut classic = Classic::new(String::new());
    classic.push_text(openmetrics).unwrap();
    classic.finish().unwrap()
}

/// The classic format written to `W` while the exposition is encoded, a line at a time:
/// the answer is never the exposition and then its conversion beside it (with one
/// `node_status` series an endpoint, the two were a process's heap peak at 100,000
/// endpoints, 28 MiB each scrape). `W` may refuse a write (a streamed answer whose reader
/// stalled): the error ends the encoding.
pub struct Classic<W> {
    out: W,
    /// The line being written, until its end.
    line: String,
    /// A `HELP` line waits for its family's `TYPE` line, which says whether it is a counter
    /// (named by its samples here).
    help: Option<String>,
    counters: BTreeSet<String>,
}

impl<W: Write> Classic<W> {
    /// Converts into `out`.
    pub fn new(out: W) -> Classic<W> {
        Classic {
            out,
            line: String::new(),
            help: None,
            counters: BTreeSet::new(),
        }
    }

    /// Gathers `text` into lines. The encoder hands over a line in many small pieces (a
    /// name, a label, a value): a piece without a line's end is only appended.
    fn push_text(&mut self, text: &str) -> std::fmt::Result {
        let mut rest = text;
        while let Some(end) = rest.bytes().position(|b| b == b'\n') {
            self.line.push_str(&rest[..end]);
            let line = std::mem::take(&mut self.line);
            let pushed = self.push_line(&line);
            self.line = line;
            self.line.clear();
            pushed?;
            rest = &rest[end + 1..];
        }
        self.line.push_str(rest);
        Ok(())
    }

    fn push_line(&mut self, line: &str) -> std::fmt::Result {
        if !line.starts_with('#') {
            self.flush_help()?;
            if self.is_created_sample(line) {
                return Ok(());
            }
            return self.emit("", without_exemplar(line));
        }
        if let Some(rest) = line.strip_prefix("# TYPE ") {
            if let Some(name) = rest.strip_suffix(" counter") {
                self.counters.insert(name.to_owned());
            }
            self.flush_help()?;
            let typed = self.counter_name(rest);
            return self.emit("# TYPE ", &typed);
        }
        self.flush_help()?;
        if let Some(rest) = line.strip_prefix("# HELP ") {
            self.help = Some(rest.to_owned());
            Ok(())
        } else if line.starts_with("# EOF") || line.starts_with("# UNIT ") {
            // The classic format has neither.
            Ok(())
        } else {
            self.emit("", line)
        }
    }

    fn flush_help(&mut self) -> std::fmt::Result {
        match self.help.take() {
            Some(help) => {
                let named = self.counter_name(&help);
                self.emit("# HELP ", &named)
            }
            None => Ok(()),
        }
    }

    fn emit(&mut self, prefix: &str, line: &str) -> std::fmt::Result {
        self.out.write_str(prefix)?;
        self.out.write_str(line)?;
        self.out.write_char('\n')
    }

    /// Whether `line` is a counter's `_created` sample, which the classic format does not
    /// have.
    fn is_created_sample(&self, line: &str) -> bool {
        let name = line.split(['{', ' ']).next().unwrap_or(line);
        (name.strip_suffix("_created")).is_some_and(|counter| self.counters.contains(counter))
    }

    /// `rest` of a HELP or TYPE line (`name ...`), with a counter's name given its `_total`.
    fn counter_name(&self, rest: &str) -> String {
        let (name, tail) = rest.split_once(' ').unwrap_or((rest, ""));
        if self.counters.contains(name) {
            format!("{name}_total {tail}")
        } else {
            rest.to_owned()
        }
    }

    /// The output, with a last line that had no end.
    pub fn finish(mut self) -> Result<W, std::fmt::Error> {
        let line = std::mem::take(&mut self.line);
        if !line.is_empty() {
            self.push_line(&line)?;
        }
        self.flush_help()?;
        Ok(self.out)
    }
}

impl<W: Write> Write for Classic<W> {
    fn write_str(&mut self, s: &str) -> std::fmt::Result {
        self.push_text(s)
    }
}

/// A sample line without its exemplar (` # {...} value` after the sample's value). A label
/// value may hold ` # ` itself: the exemplar is looked for only past the labels.
fn without_exemplar(line: &str) -> &str {
    if !line.as_bytes().contains(&b'#') {
        return line;
    }
    let bytes = line.as_bytes();
    let mut at = bytes
        .iter()
        .position(|&b| b == b'{' || b == b' ')
        .unwrap_or(bytes.len());
    if bytes.get(at) == Some(&b'{') {
        let mut quoted = false;
        while at < bytes.len() {
            match bytes[at] {
                b'\\' if quoted => at += 1,
                b'"' => quoted = !quoted,
                b'}' if !quoted => break,
                _ => {}
            }
            at += 1;
        }
    }
    let tail = line.get(at..).unwrap_or("");
    match tail.find(" # ") {
        Some(exemplar) => &line[..at + exemplar],
        None => line,
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

    /// The exposition handed over in pieces cut anywhere (as the encoder writes it: a
    /// label value, a line's end) converts as the whole text does, against a conversion
    /// written here line by line from the whole text.
    #[test]
    fn pieces_cut_anywhere_convert_as_the_whole() {
        let om = "# HELP a_total_things Things.\n# TYPE a_total_things counter\n\
                  a_total_things_total{k=\"v\"} 3 # {trace_id=\"a\"} 1.0\n\
                  a_total_things_created 1.7e9\n# HELP g Gauge.\n# TYPE g gauge\n# UNIT g seconds\n\
                  g{x=\"1\"} 0.5\ng{x=\"2\"} 1\n# HELP h Hist.\n# TYPE h histogram\n\
                  h_bucket{le=\"1\"} 2\nh_sum 3\nh_count 2\n# HELP c2 Other.\n# TYPE c2 counter\n\
                  c2_total 1\nc2_created 2\n# EOF\n";
        let expected: String = {
            let counters = ["a_total_things", "c2"];
            let named = |rest: &str| {
                let (name, tail) = rest.split_once(' ').unwrap();
                match counters.contains(&name) {
                    true => format!("{name}_total {tail}"),
                    false => rest.to_owned(),
                }
            };
            om.lines()
                .filter_map(|l| {
                    if let Some(r) = l.strip_prefix("# HELP ") {
                        return Some(format!("# HELP {}\n", named(r)));
                    }
                    if let Some(r) = l.strip_prefix("# TYPE ") {
                        return Some(format!("# TYPE {}\n", named(r)));
                    }
                    let gone = l.starts_with("# ")
                        || counters
                            .iter()
                            .any(|c| l.starts_with(&format!("{c}_created")));
                    (!gone).then(|| format!("{}\n", l.split(" # ").next().unwrap()))
                })
                .collect()
        };
        assert_eq!(to_classic(om), expected);
        let mut rng = fastrand::Rng::with_seed(0x2545_f491_4f6c_dd1d);
        for _ in 0..500 {
            let mut classic = Classic::new(String::new());
            let mut at = 0;
            while at < om.len() {
                let end = (at + 1 + rng.usize(..40)).min(om.len());
                classic.write_str(&om[at..end]).unwrap();
                at = end;
            }
            assert_eq!(classic.finish().unwrap(), expected);
        }
    }

    /// Label values holding ` # `, braces, quotes and escapes, with and without an
    /// exemplar: each sample is kept whole and only the exemplar the script added goes
    /// (the expected text is the script's samples, not a parse of them).
    #[test]
    fn a_label_value_holding_an_exemplars_marks_is_kept_whole() {
        let alphabet = ['#', ' ', '}', '{', '=', 'a', ',', '\u{e9}'];
        let escapes = ["\\\\", "\\\"", "\\n"];
        let mut rng = fastrand::Rng::with_seed(0x5eed_c1a5);
        for _ in 0..200 {
            let mut om = String::from("# HELP g Gauge.\n# TYPE g gauge\n");
            let mut expected = String::from("# HELP g Gauge.\n# TYPE g gauge\n");
            for i in 0..rng.usize(1..20) {
                let value: String = (0..rng.usize(0..10))
                    .map(|_| match rng.usize(..10) {
                        0 => escapes[rng.usize(..escapes.len())].to_owned(),
                        _ => alphabet[rng.usize(..alphabet.len())].to_string(),
                    })
                    .collect();
                let sample = format!("g{{k=\"{value}\",i=\"{i}\"}} {i}");
                expected.push_str(&format!("{sample}\n"));
                om.push_str(&sample);
                if rng.bool() {
                    om.push_str(&format!(" # {{trace_id=\"{value}\"}} 1.0"));
                }
                om.push('\n');
            }
            om.push_str("# EOF\n");
            assert_eq!(to_classic(&om), expected, "{om}");
        }
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
