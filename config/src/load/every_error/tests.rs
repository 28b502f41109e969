//! Seeded generated files with bad elements planted from a catalogue: the load reports each
//! planted one once, by file and key path, and words each as figment's path words it when
//! it is the file's only error.

// figment::Jail closures return figment::Error, which is large; that is the API.
#![allow(clippy::result_large_err)]

use figment::Jail;

use crate::load::load;
use crate::load::tests::{oracle, Rng};

/// A fault to plant in one element (or, in `api`, the rest of a file): which array, the key it writes (replacing the key of
/// that name if the element has one, else added), its text, and the key path it errs at
/// below the element.
struct Fault {
    array: &'static str,
    replaces: &'static str,
    key: &'static str,
    value: &'static str,
    path: &'static str,
}

/// The last entry is the rest's, planted in one file at most (`every_error_of_the_rest_is_reported`
/// has several).
const CATALOGUE: [Fault; 10] = [
    fault("endpoints", "address", "adress", "\"10.0.0.9\"", "adress"),
    fault("endpoints", "weight", "weight", "\"heavy\"", "weight"),
    fault(
        "endpoints",
        "check",
        "check",
        "{ port = 70000 }",
        "check.port",
    ),
    fault("endpoints", "check", "check", "{ port = -1 }", "check.port"),
    fault("endpoints", "weight", "weight", "-3", "weight"),
    fault(
        "endpoints",
        "check",
        "check",
        "{ damping = { half_lif = \"1m\" } }",
        "check.damping.half_lif",
    ),
    fault(
        "tenants",
        "domains",
        "domians",
        "[\"x.example\"]",
        "domians",
    ),
    fault("tenants", "domains", "domains", "5", "domains"),
    fault("tenants", "ttl", "ttl", "-30", "ttl"),
    fault("api", "", "listen", "5", "listen"),
];

const fn fault(
    array: &'static str,
    replaces: &'static str,
    key: &'static str,
    value: &'static str,
    path: &'static str,
) -> Fault {
    Fault {
        array,
        replaces,
        key,
        value,
        path,
    }
}

/// A planted fault: file, array (`api`: the rest of the file), element index, catalogue
/// entry.
type Plant = (usize, &'static str, usize, usize);

fn endpoint(i: usize) -> Vec<(&'static str, String)> {
    vec![
        ("name", format!("\"e{i}\"")),
        ("address", format!("\"10.0.0.{i}\"")),
        ("weight", (i % 5).to_string()),
    ]
}

fn tenant(i: usize) -> Vec<(&'static str, String)> {
    vec![
        ("name", format!("\"t{i}\"")),
        ("domains", format!("[\"t{i}.example\"]")),
        ("sinks", "[\"local\"]".into()),
    ]
}

/// One file's TOML: `counts` endpoints and tenants, as `[[key]]` tables or an inline
/// array, with the faults `plants` names for this file.
fn file(rng: &mut Rng, which: usize, counts: [usize; 2], plants: &[Plant]) -> String {
    let mut text = String::new();
    for (array, count, make) in [
        ("endpoints", counts[0], endpoint as fn(usize) -> _),
        ("tenants", counts[1], tenant),
    ] {
        let elements: Vec<Vec<(&str, String)>> = (0..count)
            .map(|i| {
                let mut keys = make(i);
                for &(_, _, _, f) in plants
                    .iter()
                    .filter(|p| (p.0, p.1, p.2) == (which, array, i))
                {
                    let f = &CATALOGUE[f];
                    keys.retain(|(k, _)| *k != f.replaces);
                    keys.push((f.key, f.value.into()));
                }
                keys
            })
            .collect();
        if rng.chance(50) {
            for keys in elements {
                text.push_str(&format!("[[{array}]]\n"));
                for (k, v) in keys {
                    text.push_str(&format!("{k} = {v}\n"));
                }
            }
        } else if count > 0 {
            let inline: Vec<String> = elements
                .iter()
                .map(|keys| {
                    let pairs: Vec<String> =
                        keys.iter().map(|(k, v)| format!("{k} = {v}")).collect();
                    format!("{{ {} }}", pairs.join(", "))
                })
                .collect();
            text = format!("{array} = [{}]\n{text}", inline.join(", "));
        }
    }
    if let Some(&(.., f)) = plants.iter().find(|p| (p.0, p.1) == (which, "api")) {
        text.push_str(&format!(
            "[api]\n{} = {}\n",
            CATALOGUE[f].key, CATALOGUE[f].value
        ));
    }
    text
}

/// Up to `n` faults at distinct elements of the files' arrays, and now and then one in the
/// rest of a file; in the order they are reported: by file, array and element, the rest's
/// last.
fn plants(rng: &mut Rng, counts: &[[usize; 2]], n: usize) -> Vec<Plant> {
    let mut plants: Vec<Plant> = Vec::new();
    for _ in 0..n {
        let f = rng.below(CATALOGUE.len() as u64 - 1) as usize;
        let array = CATALOGUE[f].array;
        let which = rng.below(counts.len() as u64) as usize;
        let count = counts[which][usize::from(array == "tenants")];
        if count == 0 {
            continue;
        }
        let i = rng.below(count as u64) as usize;
        if !plants.iter().any(|p| (p.0, p.1, p.2) == (which, array, i)) {
            plants.push((which, array, i, f));
        }
    }
    plants.sort_by_key(|p| (p.0, p.1, p.2));
    if rng.chance(30) {
        let which = rng.below(counts.len() as u64) as usize;
        plants.push((which, "api", 0, CATALOGUE.len() - 1));
    }
    plants
}

/// `FILE: PATH` of each line of an error.
fn reported(error: &str) -> Vec<(String, String)> {
    error
        .lines()
        .map(|line| {
            let mut parts = line.splitn(3, ": ");
            let file = parts.next().unwrap_or_default().to_owned();
            (file, parts.next().unwrap_or_default().to_owned())
        })
        .collect()
}

/// Every planted fault of every file is reported once, in file and element order with the
/// rest's last, each line byte-identical to the error figment's path gives for that file with that fault
/// alone; a generated set without faults loads.
#[test]
fn every_planted_element_error_is_reported_once() {
    let (mut reported_total, mut rest) = (0, 0);
    for seed in 1..=200u64 {
        let mut rng = Rng(seed.wrapping_mul(0x9E37_79B9_7F4A_7C15));
        let counts: Vec<[usize; 2]> = (0..1 + rng.below(2))
            .map(|_| [rng.below(7) as usize, rng.below(4) as usize])
            .collect();
        let n = rng.below(7) as usize;
        let plants = plants(&mut rng, &counts, n);
        let layouts = rng.0;
        Jail::expect_with(|jail| {
            let files: Vec<String> = (0..counts.len()).map(|i| format!("f{i}.toml")).collect();
            let write = |jail: &mut Jail, planted: &[Plant]| -> figment::Result<()> {
                let mut rng = Rng(layouts);
                for (which, name) in files.iter().enumerate() {
                    jail.create_file(name, &file(&mut rng, which, counts[which], planted))?;
                }
                Ok(())
            };
            write(jail, &plants)?;
            let error = match load(&files) {
                Ok(_) if plants.is_empty() => return Ok(()),
                Ok(_) => panic!("seed {seed}: {plants:?} loaded"),
                Err(e) => e.to_string(),
            };
            let expected: Vec<(String, String)> = plants
                .iter()
                .map(|&(which, array, i, f)| {
                    let path = match array {
                        "api" => format!("api.{}", CATALOGUE[f].path),
                        _ => format!("{array}[{i}].{}", CATALOGUE[f].path),
                    };
                    (files[which].clone(), path)
                })
                .collect();
            assert_eq!(reported(&error), expected, "seed {seed}:\n{error}");
            for (line, plant) in error.lines().zip(&plants) {
                write(jail, std::slice::from_ref(plant))?;
                let alone = oracle(&files[plant.0..=plant.0]).expect_err("a planted fault");
                assert_eq!(line, alone, "seed {seed}");
            }
            reported_total += plants.len();
            rest += plants.iter().filter(|p| p.1 == "api").count();
            Ok(())
        });
    }
    assert!(
        reported_total > 300 && rest > 30,
        "{reported_total} faults reported, {rest} in the rest"
    );
}
