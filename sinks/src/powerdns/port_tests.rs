//! PowerDNS's settings as its API lists them, generated: the listener is the first entry of
//! `local-address` that is an address, on its own port or `local-port`. The expected
//! listener is the one the generator placed, never worked out by the function under test.

use std::net::{IpAddr, Ipv4Addr, Ipv6Addr, SocketAddr};

use proptest::prelude::*;

use super::listener;
use crate::powerdns::api::ConfigSetting;
use ho_engine::sink::listing::PortError;

fn setting(name: &str, value: &str) -> ConfigSetting {
    ConfigSetting {
        name: name.into(),
        value: value.into(),
    }
}

fn ip() -> impl Strategy<Value = IpAddr> {
    prop_oneof![
        any::<u32>().prop_map(|n| IpAddr::V4(Ipv4Addr::from(n))),
        any::<u128>().prop_map(|n| IpAddr::V6(Ipv6Addr::from(n))),
        Just(IpAddr::V4(Ipv4Addr::UNSPECIFIED)),
        Just(IpAddr::V6(Ipv6Addr::UNSPECIFIED)),
    ]
}

/// An entry PowerDNS would not take as an address (the listener search skips it).
fn junk() -> impl Strategy<Value = String> {
    prop_oneof![
        Just("eth0".to_owned()),
        Just("localhost".to_owned()),
        Just("300.1.1.1".to_owned()),
        "[a-z]{1,8}",
    ]
}

/// How the listener's entry is written: bare on `local-port`, or with its own port.
#[derive(Debug, Clone)]
enum Form {
    /// `local-port` given.
    Bare,
    /// `local-port` not listed: PowerDNS's default, 53.
    BareDefault,
    /// `ip:port` or `[ip]:port`, with some other `local-port` beside.
    WithPort(u16),
}

proptest! {
    #[test]
    fn the_listener_is_the_first_address_on_its_port(
        at in ip(),
        port in 1u16..,
        form in prop_oneof![Just(Form::Bare), Just(Form::BareDefault), (1u16..).prop_map(Form::WithPort)],
        before in prop::collection::vec(junk(), 0..3),
        after in prop::collection::vec(ip(), 0..3),
        separator in prop_oneof![Just(", "), Just(","), Just(" ")],
    ) {
        let (entry, expected_port, local_port) = match form {
            Form::Bare => (at.to_string(), port, Some(port)),
            Form::BareDefault => (at.to_string(), 53, None),
            Form::WithPort(own) => (SocketAddr::new(at, own).to_string(), own, Some(port)),
        };
        let mut entries = before.clone();
        entries.push(entry);
        entries.extend(after.iter().map(IpAddr::to_string));
        let mut settings = vec![
            setting("api", "yes"),
            setting("local-address", &entries.join(separator)),
        ];
        if let Some(p) = local_port {
            settings.push(setting("local-port", &p.to_string()));
        }
        prop_assert_eq!(listener(&settings), Ok(SocketAddr::new(at, expected_port)));
    }

    #[test]
    fn settings_naming_no_address_are_unusable(
        entries in prop::collection::vec(junk(), 0..4),
        port in prop_oneof![Just(None), Just(Some("0".to_owned())), Just(Some("fifty".to_owned())), (1u16..).prop_map(|p| Some(p.to_string()))],
    ) {
        let mut settings = vec![setting("local-address", &entries.join(", "))];
        if let Some(p) = &port {
            settings.push(setting("local-port", p));
        }
        prop_assert!(matches!(listener(&settings), Err(PortError::Unusable(_))));
    }
}

#[test]
fn no_local_address_says_so() {
    let settings = [setting("local-port", "53"), setting("api", "yes")];
    assert_eq!(
        listener(&settings),
        Err(PortError::Unusable("no local-address listed".into()))
    );
}
