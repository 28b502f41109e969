//! Test GeoIP databases: MaxMind-format City databases written with the `mmdb-writer`
//! Python package `.ci/test` installs, read by the embedded server and PowerDNS's geoip
//! backend alike.

use std::path::{Path, PathBuf};

use crate::harness::python_tool;

/// One network of a test GeoIP database: its country and, maybe, its coordinates.
pub type GeoEntry<'a> = (&'a str, &'a str, Option<(f64, f64)>);

/// Writes `dir/geo.mmdb` mapping each network to a country, its continent and, when given,
/// coordinates (with an accuracy radius, which PowerDNS requires before it reads them, as
/// every real City database has one).
pub fn geoip_db(dir: &Path, entries: &[GeoEntry<'_>]) -> PathBuf {
    let path = dir.join("geo.mmdb");
    let inserts: String = entries
        .iter()
        .map(|(network, country, at)| {
            let location = at.map_or(String::new(), |(lat, lon)| {
                format!(", 'location': {{'latitude': {lat}, 'longitude': {lon}, 'accuracy_radius': MmdbU16(100)}}")
            });
            let continent = ho_engine::sink::geo::continent_label(country)
                .and_then(|c| ho_engine::sink::geo::continent_of_label(c))
                .map_or(String::new(), |c| format!(", 'continent': {{'code': '{c}'}}"));
            format!(
                "w.insert_network(IPSet(['{network}']), {{'country': {{'iso_code': '{country}'}}{continent}{location}}})\n"
            )
        })
        .collect();
    let script = format!(
        "from netaddr import IPSet\nfrom mmdb_writer import MMDBWriter, MmdbU16\n\
         w = MMDBWriter(ip_version=6, database_type='GeoIP2-City', ipv4_compatible=True)\n\
         {inserts}w.to_db_file('{}')\n",
        path.display()
    );
    let python = python_tool("PY_TOOLS_PYTHON", "python");
    let out = std::process::Command::new(&python)
        .arg("-c")
        .arg(script)
        .output()
        .unwrap_or_else(|e| {
            panic!(
                "{python}: {e}; run the test command (bash .ci/test), which installs mmdb-writer"
            )
        });
    assert!(
        out.status.success(),
        "mmdb-writer: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    path
}
