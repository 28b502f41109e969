//! `/v1/availability` and `/badge/NAME/WINDOW.svg`: the availability ledger read back.

use std::time::{Duration, SystemTime};

use bytes::Bytes;
use http_body_util::Full;
use hyper::{Response, StatusCode};

use super::operator::percent_decoded;
use super::{text, ApiState, PLAIN};
use crate::clock::unix_millis;
use crate::ledger::{Detail, Ledger};

/// The window when the query gives no `from`.
const DEFAULT_WINDOW: Duration = Duration::from_secs(30 * 86_400);

/// What `/v1/availability` asks: a name (or every name), a window, the detail.
#[derive(Debug)]
struct Ask {
    name: Option<String>,
    from: u64,
    to: u64,
    detail: Detail,
}

/// A time given as RFC 3339 or as a span back from now (`90d`, `1h`).
fn time(key: &str, value: &str, now: SystemTime) -> Result<u64, String> {
    let value = percent_decoded(value).map_err(|e| format!("{key}: {e}\n"))?;
    if let Ok(t) = humantime::parse_rfc3339_weak(&value) {
        return Ok(unix_millis(t));
    }
    match humantime::parse_duration(&value) {
        Ok(back) => Ok(unix_millis(now).saturating_sub(back.as_millis() as u64)),
        Err(_) => Err(format!(
            "{key}: \"{value}\" is neither an RFC 3339 time (2026-11-25T10:00:00Z) nor a span back from now (90d)\n"
        )),
    }
}

fn parse(query: Option<&str>, now: SystemTime) -> Result<Ask, String> {
    let mut ask = Ask {
        name: None,
        from: unix_millis(now).saturating_sub(DEFAULT_WINDOW.as_millis() as u64),
        to: unix_millis(now),
        detail: Detail::default(),
    };
    for kv in query.unwrap_or("").split('&').filter(|kv| !kv.is_empty()) {
        let (key, value) = kv.split_once('=').unwrap_or((kv, ""));
        match key {
            "name" => {
                let name = percent_decoded(value).map_err(|e| format!("name: {e}\n"))?;
                ask.name = Some(name.trim_end_matches('.').to_ascii_lowercase());
            }
            "from" => ask.from = time(key, value, now)?,
            "to" => ask.to = time(key, value, now)?,
            "intervals" => ask.detail.intervals = value != "false",
            "by" if value == "day" => ask.detail.days = true,
            _ => {
                return Err(format!(
                    "unknown parameter \"{key}\": name, from, to, intervals, by=day\n"
                ))
            }
        }
    }
    if ask.from >= ask.to {
        return Err("from must be before to\n".into());
    }
    Ok(ask)
}

/// `GET /v1/availability?name=&from=&to=&intervals=true&by=day`: one name's figures (its
/// intervals, its days when asked), or every name's without `name` (each with its own
/// intervals and days when asked).
pub(super) fn availability(query: Option<&str>, state: &ApiState) -> Response<Full<Bytes>> {
    let ask = match parse(query, SystemTime::now()) {
        Ok(ask) => ask,
        Err(message) => return text(StatusCode::BAD_REQUEST, PLAIN, message),
    };
    let ledger = &state.answers.ledger;
    let answer = match &ask.name {
        Some(name) => ledger
            .availability(name, ask.from, ask.to, ask.detail)
            .map(|a| serde_json::to_vec_pretty(&a)),
        None => every_name(ledger, &ask).map(|a| serde_json::to_vec_pretty(&a)),
    };
    match answer {
        Ok(json) => text(
            StatusCode::OK,
            "application/json",
            json.expect("figures serialize"),
        ),
        Err(e) => text(StatusCode::INTERNAL_SERVER_ERROR, PLAIN, format!("{e}\n")),
    }
}

/// Every name's figures, each with its own stretches and days when asked (the same cap
/// per name as a single name's answer).
fn every_name(
    ledger: &Ledger,
    ask: &Ask,
) -> Result<Vec<crate::ledger::NameAvailability>, crate::ledger::store::StoreError> {
    ledger
        .names()?
        .iter()
        .map(|n| ledger.availability(n, ask.from, ask.to, ask.detail))
        .collect()
}

/// `GET /badge/NAME/WINDOW.svg` (`WINDOW`: `24h`, `7d`, `30d`, `90d`, `365d`...): the
/// name's availability over the window as a small SVG to embed in a page.
pub(super) fn badge(rest: &str, state: &ApiState) -> Response<Full<Bytes>> {
    let Some((name, window)) = rest.strip_suffix(".svg").and_then(|r| r.rsplit_once('/')) else {
        return text(StatusCode::NOT_FOUND, PLAIN, "try /badge/NAME/30d.svg\n");
    };
    let Ok(span) = humantime::parse_duration(window) else {
        return text(
            StatusCode::BAD_REQUEST,
            PLAIN,
            format!("\"{window}\" is not a window like 30d\n"),
        );
    };
    let now = unix_millis(SystemTime::now());
    let from = now.saturating_sub(span.as_millis() as u64);
    let name = name.trim_end_matches('.').to_ascii_lowercase();
    match state
        .answers
        .ledger
        .availability(&name, from, now, Detail::default())
    {
        Ok(a) => {
            let mut response = text(
                StatusCode::OK,
                "image/svg+xml",
                svg(&format!("availability {window}"), a.figures.availability),
            );
            response.headers_mut().insert(
                hyper::header::CACHE_CONTROL,
                hyper::header::HeaderValue::from_static("max-age=60"),
            );
            response
        }
        Err(e) => text(StatusCode::INTERNAL_SERVER_ERROR, PLAIN, format!("{e}\n")),
    }
}

/// A two-part badge: the label on grey, the figure on a colour by how good it is.
fn svg(label: &str, availability: Option<f64>) -> String {
    let (value, colour) = match availability {
        None => ("no data".to_owned(), "#9f9f9f"),
        Some(a) if a >= 0.999 => (percent(a), "#2e7d32"),
        Some(a) if a >= 0.99 => (percent(a), "#b28704"),
        Some(a) => (percent(a), "#c62828"),
    };
    // About 7 px a character in 11 px Verdana, plus margins.
    let left = 10 + 7 * label.len();
    let right = 10 + 7 * value.len();
    let width = left + right;
    format!(
        r##"<svg xmlns="http://www.w3.org/2000/svg" width="{width}" height="20" role="img" aria-label="{label}: {value}"><title>{label}: {value}</title><rect width="{left}" height="20" fill="#555"/><rect x="{left}" width="{right}" height="20" fill="{colour}"/><g fill="#fff" font-family="Verdana,DejaVu Sans,sans-serif" font-size="11" text-anchor="middle"><text x="{lx}" y="14">{label}</text><text x="{rx}" y="14">{value}</text></g></svg>"##,
        lx = left / 2,
        rx = left + right / 2,
    )
}

/// `99.95%`, with as many decimals as a figure close to 100 % needs to say something.
fn percent(a: f64) -> String {
    let p = a * 100.0;
    if (99.99..100.0).contains(&p) {
        format!("{p:.3}%")
    } else if (99.0..100.0).contains(&p) {
        format!("{p:.2}%")
    } else {
        format!("{p:.1}%")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn times_are_rfc3339_or_spans_back_and_bad_ones_are_named() {
        let now = SystemTime::UNIX_EPOCH + Duration::from_secs(100 * 86_400);
        let ask = parse(
            Some("name=Shop.Example.com.&from=90d&intervals=true&by=day"),
            now,
        )
        .unwrap();
        assert_eq!(ask.name.as_deref(), Some("shop.example.com"));
        assert_eq!(ask.from, 10 * 86_400_000);
        assert!(ask.detail.intervals && ask.detail.days);
        let ask = parse(Some("from=1970-01-02T00:00:00Z"), now).unwrap();
        assert_eq!(ask.from, 86_400_000);
        let err = parse(Some("from=yesterday"), now).unwrap_err();
        assert!(err.contains("from: \"yesterday\""), "{err}");
        assert!(parse(Some("colour=red"), now)
            .unwrap_err()
            .contains("unknown parameter"));
        assert!(parse(Some("from=1d&to=2d"), now)
            .unwrap_err()
            .contains("before"));
    }

    #[test]
    fn badges_say_the_figure_in_a_colour_by_its_grade() {
        assert!(svg("availability 30d", Some(0.99995)).contains("99.995%"));
        assert!(svg("availability 30d", Some(0.9995)).contains("#2e7d32"));
        assert!(svg("availability 30d", Some(0.995)).contains("#b28704"));
        assert!(svg("availability 30d", Some(0.5)).contains("50.0%"));
        assert!(svg("availability 30d", None).contains("no data"));
        assert!(svg("availability 30d", Some(1.0)).contains("100.0%"));
    }
}
