//! From settings to an authority, as linkerd's `Config::build` composes an app: each part
//! built from its settings, a part that cannot be built named by its [`ServerError`], then
//! the authority made of them. The sink, the fuzz targets and the answer tests all start
//! here.

use super::acme::Acme;
use super::answer::{Authority, Parts};
use super::config::DnsServerConfig;
use super::cookies::Cookies;
use super::dnssec::Signer;
use super::error::ServerError;
use super::geo::Locator;
use super::records::Records;
use super::statics::Statics;
use super::transfer::Transfers;
use super::zones::Zone;
use crate::wire::key::load_signer;

/// The authority of `config`, starting from `records` (kept across a rebuild so a reload
/// never answers from nothing).
pub fn authority(config: &DnsServerConfig, records: Records) -> Result<Authority, ServerError> {
    Ok(Authority::new(config, records, parts(config)?))
}

/// Each part of `config`, in the order their failures were always reported.
fn parts(config: &DnsServerConfig) -> Result<Parts, ServerError> {
    let zones = Zone::all_of(config).map_err(ServerError::Zone)?;
    let signer = (config.dnssec.as_ref())
        .map(|d| Signer::start(d, &config.zones, config.soa.minimum))
        .transpose()
        .map_err(ServerError::Dnssec)?;
    let transfers = (config.transfer.as_ref())
        .map(Transfers::new)
        .transpose()
        .map_err(ServerError::Transfer)?;
    let report_key = (config.reports.as_ref())
        .map(|r| load_signer(&r.tsig))
        .transpose()
        .map_err(ServerError::Reports)?;
    let locator = Locator::load(&config.geo).map_err(ServerError::Geo)?;
    let cookies = Cookies::load(&config.cookies)
        .map_err(|(field, reason)| ServerError::Cookies { field, reason })?;
    let acme = (config.acme.as_ref())
        .map(|a| load_signer(&a.tsig))
        .transpose()
        .map_err(ServerError::Acme)?
        .map(|key| Acme::new(key, None));
    let statics = match &config.static_records {
        Some(text) => Statics::parse(text, &config.zones).map_err(ServerError::Statics)?,
        None => Statics::default(),
    };
    Ok(Parts {
        zones,
        locator,
        cookies,
        signer,
        transfers,
        report_key,
        acme,
        statics,
    })
}
