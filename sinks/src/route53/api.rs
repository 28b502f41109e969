//! The Route53 calls this sink makes (get zone, list record sets, change record sets), the
//! conversion between SDK record sets and [`RecordSet`], and errors worded for operators.

use aws_sdk_route53::error::{ProvideErrorMetadata, SdkError};
use aws_sdk_route53::types::{
    AliasTarget, Change as SdkChange, ChangeAction, ChangeBatch, GeoLocation, ResourceRecord,
    ResourceRecordSet, RrType,
};
use aws_sdk_route53::Client;
use ho_engine::sink::SinkError;

use super::records::{Alias, Location, RecordSet, Routing};

/// Pages of a zone listing read at most, so a misbehaving endpoint that keeps answering
/// "truncated" cannot loop forever (300 record sets per page: 3 million record sets).
pub const MAX_PAGES: usize = 10_000;

/// Record sets asked for per listing page (Route53's maximum).
const PAGE_SIZE: i32 = 300;

/// The hosted zone's name, lower case with the trailing dot.
pub async fn zone_name(client: &Client, zone_id: &str) -> Result<String, SinkError> {
    let out = client
        .get_hosted_zone()
        .id(zone_id)
        .send()
        .await
        .map_err(|e| error("GetHostedZone", zone_id, e))?;
    let name = out.hosted_zone().map(|z| z.name()).unwrap_or_default();
    Ok(name.to_ascii_lowercase())
}

/// One page of the zone: its record sets (SDK form) and where the next page starts.
pub struct Page {
    /// The record sets.
    pub sets: Vec<ResourceRecordSet>,
    /// (name, type, set identifier) of the next page, when truncated.
    pub next: Option<(String, RrType, Option<String>)>,
}

/// Reads one page of the zone starting at `from`.
pub async fn list_page(
    client: &Client,
    zone_id: &str,
    from: Option<(String, RrType, Option<String>)>,
) -> Result<Page, SinkError> {
    let mut call = client
        .list_resource_record_sets()
        .hosted_zone_id(zone_id)
        .max_items(PAGE_SIZE);
    if let Some((name, rtype, id)) = from {
        call = call
            .start_record_name(name)
            .start_record_type(rtype)
            .set_start_record_identifier(id);
    }
    let out = call
        .send()
        .await
        .map_err(|e| error("ListResourceRecordSets", zone_id, e))?;
    let next = match (
        out.is_truncated(),
        out.next_record_name(),
        out.next_record_type(),
    ) {
        (true, Some(name), Some(rtype)) => Some((
            name.to_string(),
            rtype.clone(),
            out.next_record_identifier().map(str::to_string),
        )),
        _ => None,
    };
    Ok(Page {
        sets: out.resource_record_sets().to_vec(),
        next,
    })
}

/// Sends one batch of changes.
pub async fn change(
    client: &Client,
    zone_id: &str,
    changes: Vec<(ChangeAction, ResourceRecordSet)>,
) -> Result<(), SinkError> {
    let changes = changes
        .into_iter()
        .map(|(action, set)| {
            SdkChange::builder()
                .action(action)
                .resource_record_set(set)
                .build()
                .expect("action and record set are set")
        })
        .collect();
    let batch = ChangeBatch::builder()
        .set_changes(Some(changes))
        .comment("health-orchestrator")
        .build()
        .expect("changes are set");
    client
        .change_resource_record_sets()
        .hosted_zone_id(zone_id)
        .change_batch(batch)
        .send()
        .await
        .map_err(|e| error("ChangeResourceRecordSets", zone_id, e))?;
    Ok(())
}

/// The comparable form of a listed record set (an alias with its target's zone: see
/// [`RecordSet::listed_in`]).
pub fn from_sdk(set: &ResourceRecordSet) -> RecordSet {
    let unsupported = set.health_check_id().is_some()
        || set.region().is_some()
        || set.failover().is_some()
        || set.cidr_routing_config().is_some()
        || set.traffic_policy_instance_id().is_some()
        || set.geo_proximity_location().is_some();
    let routing = if unsupported {
        Routing::Other
    } else if let Some(w) = set.weight() {
        Routing::Weighted(w)
    } else if let Some(geo) = set.geo_location() {
        match (geo.country_code(), geo.continent_code()) {
            (Some("*"), None) => Routing::Geo(Location::Default),
            (Some(country), None) => Routing::Geo(Location::Country {
                country: country.to_string(),
                subdivision: geo.subdivision_code().map(str::to_string),
            }),
            (None, Some(continent)) => Routing::Geo(Location::Continent(continent.to_string())),
            _ => Routing::Other,
        }
    } else if set.multi_value_answer() == Some(true) {
        Routing::MultiValue
    } else {
        Routing::Simple
    };
    let mut values: Vec<String> = set
        .resource_records()
        .iter()
        .map(|r| r.value().to_string())
        .collect();
    values.sort();
    RecordSet {
        name: unescape(&set.name().to_ascii_lowercase()),
        rtype: set.r#type().as_str().to_string(),
        set_id: set.set_identifier().map(str::to_string),
        routing,
        ttl: set.ttl().unwrap_or(0),
        values,
        alias: set.alias_target().map(|a| Alias {
            name: fqdn(&a.dns_name().to_ascii_lowercase()),
            zone: Some(
                a.hosted_zone_id()
                    .trim_start_matches("/hostedzone/")
                    .to_owned(),
            ),
        }),
    }
}

/// A listed name as written: Route53 lists every character other than letters, digits,
/// `-`, `_` and `.` as a three-digit octal escape (`*` as `\\052`).
fn unescape(name: &str) -> String {
    let mut out = String::with_capacity(name.len());
    let mut rest = name;
    while let Some(i) = rest.find('\\') {
        out.push_str(&rest[..i]);
        let digits = rest.get(i + 1..i + 4);
        match digits.and_then(|d| u8::from_str_radix(d, 8).ok()) {
            Some(byte) if byte.is_ascii() => {
                out.push(char::from(byte));
                rest = &rest[i + 4..];
            }
            _ => {
                out.push('\\');
                rest = &rest[i + 1..];
            }
        }
    }
    out.push_str(rest);
    out
}

/// `name` with its trailing dot.
fn fqdn(name: &str) -> String {
    format!("{}.", name.trim_end_matches('.'))
}

/// The SDK form of a record set this sink writes into zone `zone_id` (an alias without a
/// zone of its own answers from a name of this one).
pub fn to_sdk(set: &RecordSet, zone_id: &str) -> ResourceRecordSet {
    let mut b = ResourceRecordSet::builder()
        .name(&set.name)
        .r#type(RrType::from(set.rtype.as_str()))
        .set_set_identifier(set.set_id.clone());
    b = match &set.alias {
        Some(target) => b.alias_target(
            AliasTarget::builder()
                .hosted_zone_id(target.zone.as_deref().unwrap_or(zone_id))
                .dns_name(&target.name)
                .evaluate_target_health(false)
                .build()
                .expect("zone, name and evaluation are set"),
        ),
        None => b.ttl(set.ttl),
    };
    for v in &set.values {
        b = b.resource_records(
            ResourceRecord::builder()
                .value(v)
                .build()
                .expect("value is set"),
        );
    }
    b = match &set.routing {
        Routing::Simple | Routing::Other => b,
        Routing::MultiValue => b.multi_value_answer(true),
        Routing::Weighted(w) => b.weight(*w),
        Routing::Geo(Location::Default) => {
            b.geo_location(GeoLocation::builder().country_code("*").build())
        }
        Routing::Geo(Location::Continent(code)) => {
            b.geo_location(GeoLocation::builder().continent_code(code).build())
        }
        Routing::Geo(Location::Country {
            country,
            subdivision,
        }) => b.geo_location(
            GeoLocation::builder()
                .country_code(country)
                .set_subdivision_code(subdivision.clone())
                .build(),
        ),
    };
    b.build().expect("name and type are set")
}

/// Words an SDK error for operators and decides whether retrying helps.
pub fn error<E>(operation: &str, zone_id: &str, e: SdkError<E>) -> SinkError
where
    E: ProvideErrorMetadata + std::error::Error + 'static,
{
    let status = e.raw_response().map(|r| r.status().as_u16());
    match &e {
        SdkError::ServiceError(service) => {
            let err = service.err();
            let code = err.code().unwrap_or("unknown");
            let message = err.message().unwrap_or("");
            let said = format!("{operation} on hosted zone {zone_id}: {code}: {message}");
            match code {
                "Throttling" | "ThrottlingException" | "PriorRequestNotComplete" => {
                    SinkError::throttled(format!("Route53 is throttling: {said}"), None)
                }
                "NoSuchHostedZone" => SinkError::permanent(format!(
                    "hosted zone {zone_id} does not exist: {said}"
                )),
                "AccessDenied" | "AccessDeniedException" | "InvalidClientTokenId"
                | "SignatureDoesNotMatch" | "UnrecognizedClientException" | "ExpiredToken" => {
                    SinkError::permanent(format!(
                        "AWS refused the credentials (needs route53:GetHostedZone, ListResourceRecordSets, ChangeResourceRecordSets on {zone_id}): {said}"
                    ))
                }
                _ if status.is_some_and(|s| s >= 500) => {
                    SinkError::retriable(format!("Route53 failed ({}): {said}", status.unwrap_or(0)))
                }
                _ => SinkError::permanent(format!("Route53 refused: {said}")),
            }
        }
        SdkError::TimeoutError(_) => {
            SinkError::retriable(format!("{operation} on hosted zone {zone_id} timed out"))
        }
        SdkError::DispatchFailure(d) => SinkError::retriable(format!(
            "Route53 unreachable ({operation} on hosted zone {zone_id}): {}",
            d.as_connector_error()
                .map(|c| error_chain(c))
                .unwrap_or_default()
        )),
        other => SinkError::retriable(format!(
            "{operation} on hosted zone {zone_id} failed: {}",
            error_chain(other)
        )),
    }
}

/// The full chain of an SDK error's causes (its `Display` shows only the outermost).
fn error_chain(e: &dyn std::error::Error) -> String {
    let mut text = e.to_string();
    let mut source = e.source();
    while let Some(s) = source {
        text.push_str(": ");
        text.push_str(&s.to_string());
        source = s.source();
    }
    text
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn listed_octal_escapes_read_as_the_characters() {
        assert_eq!(unescape("\\052.apps.example.com."), "*.apps.example.com.");
        assert_eq!(
            unescape("_health-orchestrator.\\052.apps.example.com."),
            "_health-orchestrator.*.apps.example.com."
        );
        assert_eq!(
            unescape("a\\9.example.com."),
            "a\\9.example.com.",
            "not an escape"
        );
    }

    /// What the sink writes reads back as the same record set: continents and aliases too
    /// (an alias has no TTL and no values on the wire).
    #[test]
    fn continents_and_aliases_survive_the_sdk_form() {
        let continent = RecordSet {
            name: "api.example.org.".into(),
            rtype: "A".into(),
            set_id: Some("GEO-EU".into()),
            routing: Routing::Geo(Location::Continent("EU".into())),
            ttl: 30,
            values: vec!["192.0.2.1".into()],
            alias: None,
        };
        let alias = RecordSet {
            set_id: Some("IE".into()),
            routing: Routing::Geo(Location::Country {
                country: "IE".into(),
                subdivision: None,
            }),
            ttl: 0,
            values: Vec::new(),
            alias: Some(Alias::here("ie._weighted.api.example.org.")),
            ..continent.clone()
        };
        for set in [continent, alias] {
            assert_eq!(from_sdk(&to_sdk(&set, "Z0123")).listed_in("Z0123"), set);
        }
    }
}
