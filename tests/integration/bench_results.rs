//! `bench/results/` keeps only runs the benchmark docs cite, each listed in its index
//! (`bench/results/README.md`): a run added without a row or a citation, or a row whose
//! run is gone, fails here.

use crate::cli::repo;

#[test]
fn every_kept_run_is_indexed_and_cited_and_every_row_is_a_run() {
    let folder = repo("bench/results");
    let index = std::fs::read_to_string(folder.join("README.md")).unwrap();
    let cited: String = ["bench/README.md", "bench/CHANGELOG.md"]
        .iter()
        .map(|d| std::fs::read_to_string(repo(d)).unwrap())
        .collect();
    let mut runs: Vec<String> = std::fs::read_dir(&folder)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .filter(|n| n != "README.md")
        .collect();
    runs.sort();
    for run in &runs {
        assert!(
            index.contains(&format!("| `{run}` |")),
            "bench/results/{run} has no row in bench/results/README.md"
        );
        assert!(
            cited.contains(run.as_str()),
            "bench/results/{run} is cited by neither bench/README.md nor bench/CHANGELOG.md: cite it or remove it"
        );
    }
    let rows: Vec<&str> = (index.lines())
        .filter_map(|l| l.strip_prefix("| `")?.split_once('`').map(|(n, _)| n))
        .collect();
    assert_eq!(rows.len(), runs.len(), "rows {rows:?}, runs {runs:?}");
    for row in rows {
        assert!(
            runs.iter().any(|r| r == row),
            "the index lists {row}, which is not kept"
        );
    }
}
