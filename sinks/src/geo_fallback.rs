//! Where clients go when their own location has no endpoint up (it is down, or the tenant
//! has none there): to the nearest location that has one up (PowerDNS `pickclosest`'s
//! idea, gdnsd's `auto_dc_coords`), by great-circle distance from the client's coordinates
//! (a GeoIP City database's) or its country's centre, to each location's country centre
//! from the `keshvar` country dataset. Locations without coordinates (custom labels) get
//! no stand-in: their clients get the tenant's `default_geo`.

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
    fn custom_labels_have_no_stand_in() {
        assert_eq!(stand_in("eu-west", ["US", "DE"]), None);
        assert_eq!(stand_in("IE", ["eu-west"]), None);
        assert_eq!(stand_in("IE", std::iter::empty()), None);
    }
}
