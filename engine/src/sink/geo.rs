//! Where clients go when their own location has no endpoint up (it is down, or the tenant
//! has none there): to the nearest location that has one up (PowerDNS `pickclosest`'s
//! idea, gdnsd's `auto_dc_coords`), by great-circle distance from the client's coordinates
//! (a GeoIP City database's) or its country's centre, to each location's country centre
//! from the `keshvar` country dataset. Locations without coordinates (custom labels,
//! continents) get no stand-in: their clients get the tenant's `default_geo`.
//!
//! A location may be a continent, written as Kuadrant writes it: `GEO-EU` (two-letter
//! continent codes alone are also country codes: `AS`, `NA`, `SA`, `AF`). A client is of
//! its country's continent when the tenant has no location for the country itself.

/// The continents a location can name, as `GEO-<code>`: Route53's continent codes.
pub const CONTINENTS: [&str; 7] = ["AF", "AN", "AS", "EU", "NA", "OC", "SA"];

/// The prefix of a continent location.
pub const CONTINENT_PREFIX: &str = "GEO-";

/// The continent code a location names (`GEO-EU` -> `EU`), if it names one.
pub fn continent_of_label(geo: &str) -> Option<&str> {
    geo.strip_prefix(CONTINENT_PREFIX)
        .filter(|c| CONTINENTS.contains(c))
}

/// The continent location of a country location (`FR` or `US-CA` -> `GEO-EU`, `GEO-NA`).
pub fn continent_label(geo: &str) -> Option<&'static str> {
    use keshvar::Continent;
    let country = geo.split('-').next()?.to_ascii_uppercase();
    let alpha2 = keshvar::Alpha2::try_from(country.as_str()).ok()?;
    Some(match alpha2.to_country().continent() {
        Continent::Africa => "GEO-AF",
        Continent::Antarctica => "GEO-AN",
        Continent::Asia => "GEO-AS",
        Continent::Australia => "GEO-OC",
        Continent::Europe => "GEO-EU",
        Continent::NorthAmerica => "GEO-NA",
        Continent::SouthAmerica => "GEO-SA",
    })
}

/// The location answering clients of `geo` (whose addresses are all down): the nearest of
/// `up`, if `geo` is a country (`IE`, or a subdivision such as `US-CA`, placed at its
/// country) and at least one of `up` is too.
pub fn stand_in<'a>(geo: &str, up: impl IntoIterator<Item = &'a str>) -> Option<&'a str> {
    nearest(coordinates(geo)?, up)
}

/// The location of `up` nearest to `from` (latitude, longitude), among those with
/// coordinates.
pub fn nearest<'a>(from: (f64, f64), up: impl IntoIterator<Item = &'a str>) -> Option<&'a str> {
    up.into_iter()
        .filter_map(|g| Some((g, km(from, coordinates(g)?))))
        .min_by(|a, b| a.1.total_cmp(&b.1))
        .map(|(g, _)| g)
}

/// Latitude and longitude of a location's country (ISO 3166 alpha-2, case-insensitive).
pub fn coordinates(geo: &str) -> Option<(f64, f64)> {
    let country = geo.split('-').next()?.to_ascii_uppercase();
    let alpha2 = keshvar::Alpha2::try_from(country.as_str()).ok()?;
    let g = alpha2.to_country().geo();
    Some((g.latitude(), g.longitude()))
}

/// Great-circle distance in kilometres (haversine).
fn km((lat1, lon1): (f64, f64), (lat2, lon2): (f64, f64)) -> f64 {
    let (p1, p2) = (lat1.to_radians(), lat2.to_radians());
    let dp = (lat2 - lat1).to_radians();
    let dl = (lon2 - lon1).to_radians();
    let a = (dp / 2.0).sin().powi(2) + p1.cos() * p2.cos() * (dl / 2.0).sin().powi(2);
    2.0 * 6371.0 * a.sqrt().asin()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_nearest_country_stands_in() {
        assert_eq!(stand_in("IE", ["US", "GB", "DE"]), Some("GB"));
        assert_eq!(stand_in("PT", ["US", "ES", "DE"]), Some("ES"));
        assert_eq!(stand_in("US-CA", ["DE", "MX"]), Some("MX"));
        assert_eq!(
            stand_in("ie", ["us", "de"]),
            Some("de"),
            "case does not matter"
        );
    }

    #[test]
    fn coordinates_pick_the_nearest_location() {
        // New York is nearer the US than Germany, whatever country a database says.
        assert_eq!(nearest((40.7, -74.0), ["DE", "US"]), Some("US"));
        assert_eq!(nearest((52.2, 21.0), ["DE", "US", "eu-west"]), Some("DE"));
        assert_eq!(nearest((0.0, 0.0), ["eu-west"]), None);
    }

    #[test]
    fn countries_belong_to_their_continent_and_only_geo_labels_name_one() {
        assert_eq!(continent_label("FR"), Some("GEO-EU"));
        assert_eq!(continent_label("US-CA"), Some("GEO-NA"));
        assert_eq!(continent_label("nz"), Some("GEO-OC"));
        assert_eq!(continent_label("eu-west"), None);
        assert_eq!(continent_of_label("GEO-SA"), Some("SA"));
        assert_eq!(continent_of_label("SA"), None, "Saudi Arabia");
        assert_eq!(continent_of_label("GEO-XX"), None);
        assert_eq!(
            stand_in("GEO-EU", ["DE"]),
            None,
            "no coordinates for a continent"
        );
    }

    #[test]
    fn custom_labels_have_no_stand_in() {
        assert_eq!(stand_in("eu-west", ["US", "DE"]), None);
        assert_eq!(stand_in("IE", ["eu-west"]), None);
        assert_eq!(stand_in("IE", std::iter::empty()), None);
    }
}
