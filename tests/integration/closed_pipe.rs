//! Commands whose stdout is piped into a reader that stops early (`config-schema | head`):
//! the binary ends quietly, without `println!`'s panic and backtrace.

use std::io::Read;
use std::process::{Output, Stdio};

use crate::cli::repo;
use crate::harness::binary;

/// Runs `args` with stdout the write end of a pipe whose read end is already closed, so the
/// first write meets a closed pipe whatever the output's size.
fn with_stdout_closed(args: &[&str]) -> Output {
    let (reader, writer) = std::io::pipe().unwrap();
    drop(reader);
    binary()
        .args(args)
        .env("RUST_BACKTRACE", "1")
        .stdout(writer)
        .stderr(Stdio::piped())
        .output()
        .unwrap()
}

fn assert_quiet(args: &[&str], output: &Output) {
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(
        !stderr.contains("panicked") && !stderr.contains("Broken pipe"),
        "{args:?}: {stderr}"
    );
    assert_eq!(output.status.code(), Some(0), "{args:?}: {stderr}");
}

/// Every command that prints its product or a verdict to stdout ends quietly, exit 0, when
/// the reader has gone before the first byte.
#[test]
fn commands_end_quietly_when_the_reader_has_closed_the_pipe() {
    let minimal = repo("config/examples/minimal.toml");
    let openova = repo("tests/fixtures/seed-000/config.yaml");
    let commands: [&[&str]; 4] = [
        &["config-schema"],
        &["crds"],
        &["check-config", "--config", minimal.to_str().unwrap()],
        &["import", "--from", "openova", openova.to_str().unwrap()],
    ];
    for args in commands {
        assert_quiet(args, &with_stdout_closed(args));
    }
}

/// A reader that takes a few bytes of the schema and closes its end mid-output (`| head -c`):
/// the schema is larger than a pipe's buffer, so the writer meets the closed pipe mid-way.
#[test]
fn config_schema_ends_quietly_when_the_reader_stops_mid_output() {
    let mut child = binary()
        .arg("config-schema")
        .env("RUST_BACKTRACE", "1")
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut head = [0u8; 16];
    child.stdout.take().unwrap().read_exact(&mut head).unwrap();
    assert_eq!(head[0], b'{');
    let output = child.wait_with_output().unwrap();
    assert_quiet(&["config-schema"], &output);
}
