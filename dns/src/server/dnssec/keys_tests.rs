use super::*;

#[test]
fn times_read_and_write_as_bind_does() {
    let t = parse_time("20261126014253").unwrap();
    assert_eq!(format_time(t), "20261126014253");
    assert!(parse_time("2026-11-26").is_err());
    let timing = Timing {
        publish: Some(10),
        activate: Some(20),
        inactive: Some(30),
        delete: Some(40),
    };
    assert!(!timing.published(9));
    assert!(timing.published(10) && !timing.active(10));
    assert!(timing.active(20) && timing.active(29));
    assert!(!timing.active(30) && timing.published(39));
    assert!(!timing.published(40));
    assert_eq!(timing.next_change(20), Some(30));
    assert_eq!(timing.next_change(40), None);
    assert!(
        Timing::default().active(0),
        "no times: published and signing"
    );
}

#[test]
fn a_generated_key_reads_back_and_signs() {
    let dir = tempfile::tempdir().unwrap();
    for algorithm in [
        Algorithm::ECDSAP256SHA256,
        Algorithm::ECDSAP384SHA384,
        Algorithm::ED25519,
    ] {
        let new = NewKey {
            zone: "Example.org.".into(),
            algorithm,
            ksk: true,
            timing: Timing::default(),
        };
        let path = generate(&new, dir.path(), SystemTime::now()).unwrap();
        let key = read_key(&path).unwrap();
        assert_eq!(key.zone, "example.org");
        assert!(key.is_ksk());
        assert_eq!(key.signer.algorithm(), algorithm);
        assert!(key.ds().unwrap().starts_with("example.org. IN DS "));
        let public = key.signer.to_public_key().unwrap();
        assert_eq!(
            public.public_bytes(),
            key.dnskey.public_key().public_bytes()
        );
        assert!(
            generate(&new, dir.path(), SystemTime::now()).is_ok(),
            "a second key of the same zone gets its own tag"
        );
    }
    assert_eq!(read_dir(dir.path()).unwrap().len(), 6);
}

#[test]
fn a_private_key_that_does_not_match_its_public_key_is_refused() {
    let dir = tempfile::tempdir().unwrap();
    let new = NewKey {
        zone: "example.org".into(),
        algorithm: Algorithm::ED25519,
        ksk: false,
        timing: Timing::default(),
    };
    let a = generate(&new, dir.path(), SystemTime::now()).unwrap();
    let b = generate(&new, dir.path(), SystemTime::now()).unwrap();
    std::fs::copy(b.with_extension("key"), a.with_extension("key")).unwrap();
    let err = read_key(&a).err().unwrap().to_string();
    assert!(err.contains("does not match"), "{err}");
    std::fs::write(
        b.with_extension("private"),
        "Private-key-format: v1.3\nAlgorithm: 8 (RSASHA256)\n",
    )
    .unwrap();
    let err = read_key(&b).err().unwrap().to_string();
    assert!(err.contains("algorithm 8 is not supported"), "{err}");
}

/// BIND writes an ECDSA scalar without its leading zero bytes (one key in 256 has one):
/// such a key reads as the same key.
#[test]
fn an_ecdsa_scalar_written_without_its_leading_zeros_reads() {
    let rng = SystemRandom::new();
    let curve = &ECDSA_P256_SHA256_FIXED_SIGNING;
    // A key whose scalar starts with a zero byte: one in 256, so one in a few thousand.
    let (scalar, point) = (0..10_000)
        .find_map(|_| {
            let pkcs8 = EcdsaKeyPair::generate_pkcs8(curve, &rng).unwrap();
            let scalar = ec_private_scalar(pkcs8.as_ref())?.to_vec();
            let pair = EcdsaKeyPair::from_pkcs8(curve, pkcs8.as_ref(), &rng).unwrap();
            (scalar[0] == 0).then(|| (scalar, pair.public_key().as_ref().to_vec()))
        })
        .expect("a scalar with a leading zero byte in 10,000 keys");
    let stripped = &scalar[1..];
    let key = signing_key(Algorithm::ECDSAP256SHA256, stripped, &point[1..]).unwrap();
    assert_eq!(key.algorithm(), Algorithm::ECDSAP256SHA256);
}
